package sqlitestore_test

import (
	"context"
	"fmt"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/collypace/ext"
	"github.com/collypace/ext/storetest"
)

func batch(prefix string, n int) []ext.StoredHost {
	states := make([]ext.StoredHost, n)
	for i := range states {
		states[i] = storetest.Sample(fmt.Sprintf("%s%d.test", prefix, i))
	}
	return states
}

// BenchmarkSaveHosts writes batches of states over existing rows, as the pacer's write-behind does
// every second; ns/state is the cost of one state in the batch.
func BenchmarkSaveHosts(b *testing.B) {
	for _, n := range []int{1, 100} {
		b.Run(fmt.Sprintf("batch=%d", n), func(b *testing.B) {
			st := open(b, tempPath(b))
			ctx := context.Background()
			states := batch("h", n)
			b.ReportAllocs()
			for b.Loop() {
				for i := range states {
					states[i].NextDeparture = states[i].NextDeparture.Add(time.Millisecond)
				}
				if err := st.SaveHosts(ctx, states); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*n), "ns/state")
		})
		b.Run(fmt.Sprintf("batch=%d/parallel", n), func(b *testing.B) {
			st := open(b, tempPath(b))
			ctx := context.Background()
			var g atomic.Int64
			b.ReportAllocs()
			b.RunParallel(func(pb *testing.PB) {
				states := batch(fmt.Sprintf("g%d-", g.Add(1)), n) // each goroutine its own hosts
				for pb.Next() {
					if err := st.SaveHosts(ctx, states); err != nil {
						b.Error(err)
						return
					}
				}
			})
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*n), "ns/state")
		})
	}
}

func BenchmarkLoadHost(b *testing.B) {
	st := open(b, tempPath(b))
	ctx := context.Background()
	states := batch("h", 100)
	if err := st.SaveHosts(ctx, states); err != nil {
		b.Fatal(err)
	}
	b.Run("serial", func(b *testing.B) {
		b.ReportAllocs()
		i := 0
		for b.Loop() {
			if _, ok, err := st.LoadHost(ctx, states[i%len(states)].Host); !ok || err != nil {
				b.Fatal(ok, err)
			}
			i++
		}
	})
	b.Run("parallel", func(b *testing.B) {
		b.ReportAllocs()
		b.RunParallel(func(pb *testing.PB) {
			i := 0
			for pb.Next() {
				if _, ok, err := st.LoadHost(ctx, states[i%len(states)].Host); !ok || err != nil {
					b.Error(ok, err)
					return
				}
				i++
			}
		})
	})
}

// BenchmarkDeparture is a whole departure through a pacer writing behind to SQLite: compare it with
// the root package's BenchmarkDeparture (memory only) for what SQLite adds.
func BenchmarkDeparture(b *testing.B) {
	storetest.BenchDeparture(b, open(b, filepath.Join(b.TempDir(), "bench.db")))
}

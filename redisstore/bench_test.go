package redisstore_test

import (
	"fmt"
	"sync/atomic"
	"testing"

	"github.com/collypace/ext"
	"github.com/collypace/ext/redisstore"
	"github.com/collypace/ext/redisstore/internal/redistest"
	"github.com/collypace/ext/storetest"
)

// The benchmarks run against a private server on a unix socket. BenchmarkPing is one bare round trip
// (PING), the floor a departure booked in Redis cannot go below: compare BenchmarkAdmit
// with it.

func openBench(b *testing.B) *redisstore.Store {
	b.Helper()
	st, err := redisstore.Open(redistest.Start(b).Addr())
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = st.Close() })
	return st
}

func BenchmarkPing(b *testing.B) {
	srv := redistest.Start(b)
	c := srv.Client()
	b.Run("serial", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if err := c.Ping(ctx).Err(); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("parallel", func(b *testing.B) {
		b.ReportAllocs()
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				if err := c.Ping(ctx).Err(); err != nil {
					b.Error(err)
					return
				}
			}
		})
	})
}

// BenchmarkAdmit is one admission decision in Redis (an EVALSHA round trip). The gap is 0, so every
// call admits and records a departure, as a fast crawl's does.
func BenchmarkAdmit(b *testing.B) {
	st := openBench(b)
	b.Run("serial", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := st.Admit(ctx, "serial.test", 0); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("parallel", func(b *testing.B) {
		// Each goroutine asks for its own host, as a crawl over many hosts does.
		var n atomic.Int64
		b.ReportAllocs()
		b.RunParallel(func(pb *testing.PB) {
			host := fmt.Sprintf("p%d.test", n.Add(1))
			for pb.Next() {
				if _, err := st.Admit(ctx, host, 0); err != nil {
					b.Error(err)
					return
				}
			}
		})
	})
	b.Run("parallel-one-host", func(b *testing.B) {
		b.ReportAllocs()
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				if _, err := st.Admit(ctx, "one.test", 0); err != nil {
					b.Error(err)
					return
				}
			}
		})
	})
}

func BenchmarkSaveHosts(b *testing.B) {
	st := openBench(b)
	batch := make([]ext.StoredHost, 100)
	for i := range batch {
		batch[i] = storetest.Sample(fmt.Sprintf("h%d.test", i))
	}
	b.ReportAllocs()
	for b.Loop() {
		if err := st.SaveHosts(ctx, batch); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(batch)), "ns/host")
}

// BenchmarkDeparture is a whole departure through a pacer booking each slot in Redis: compare it with
// BenchmarkPing (one round trip) and the root package's BenchmarkDeparture (memory only).
func BenchmarkDeparture(b *testing.B) { storetest.BenchDeparture(b, openBench(b)) }

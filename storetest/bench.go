package storetest

import (
	"context"
	"strconv"
	"sync/atomic"
	"testing"

	"github.com/collypace/ext"
)

// BenchDeparture measures a whole departure through a pacer keeping its state in st (nil: in memory
// only): Wait (host lookup, in-flight slot, admission, and with a SharedStore the admission in the
// store) and the release, over 1 000 hosts with no delay, serial and from every core.
func BenchDeparture(b *testing.B, st ext.Store) {
	opts := []ext.Option{ext.WithBaseDelay(0), ext.WithJitter(0), ext.WithoutRobots()}
	if st != nil {
		opts = append(opts, ext.WithStore(st))
	}
	p := ext.NewPacer(opts...)
	b.Cleanup(func() { _ = p.Close() })
	keys := make([]string, 1000)
	for i := range keys {
		keys[i] = "bench-" + strconv.Itoa(i) + ".example"
	}
	ctx := context.Background()
	depart := func(key string) {
		_, release, err := p.Wait(ctx, key)
		if err != nil {
			b.Fatal(err)
		}
		release()
	}
	for _, k := range keys { // hosts known (and restored) before timing
		depart(k)
	}
	b.Run("serial", func(b *testing.B) {
		b.ReportAllocs()
		for i := 0; b.Loop(); i++ {
			depart(keys[i%len(keys)])
		}
	})
	b.Run("parallel", func(b *testing.B) {
		var next atomic.Int64
		b.ReportAllocs()
		b.RunParallel(func(pb *testing.PB) {
			i := int(next.Add(1)) * 7919
			for pb.Next() {
				depart(keys[i%len(keys)])
				i++
			}
		})
	})
}

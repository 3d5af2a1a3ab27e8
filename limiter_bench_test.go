package ext

import (
	"strconv"
	"sync/atomic"
	"testing"
	"time"
)

func benchHosts(n int) []string {
	keys := make([]string, n)
	for i := range keys {
		keys[i] = "host-" + strconv.Itoa(i) + ".example:443"
	}
	return keys
}

// BenchmarkAdmit measures the admission decision (host lookup, interval, the rule, recording an
// admitted departure) over 10 000 hosts with the audit log disabled: issue 9 asks for it to be
// allocation-free and under 1 µs. Time advances by 100 ms a call, so most decisions admit.
func BenchmarkAdmit(b *testing.B) {
	keys := benchHosts(10_000)
	p := NewPacer(WithBaseDelay(time.Second))
	now := time.Now()
	for _, k := range keys {
		p.AdmitAt(k, now)
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; b.Loop(); i++ {
		p.AdmitAt(keys[i%len(keys)], now.Add(time.Duration(i)*100*time.Millisecond))
	}
}

// BenchmarkAdmitParallel is BenchmarkAdmit from every core at once.
func BenchmarkAdmitParallel(b *testing.B) {
	keys := benchHosts(10_000)
	p := NewPacer(WithBaseDelay(time.Second))
	now := time.Now()
	for _, k := range keys {
		p.AdmitAt(k, now)
	}
	var next atomic.Int64
	b.ReportAllocs()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		i := int(next.Add(7919))
		for pb.Next() {
			p.AdmitAt(keys[i%len(keys)], now.Add(time.Duration(i)*100*time.Millisecond))
			i++
		}
	})
}

// BenchmarkReserve measures one departure decision (host lookup, interval, booking) over 10 000
// hosts with the audit log disabled.
func BenchmarkReserve(b *testing.B) {
	keys := benchHosts(10_000)
	p := NewPacer()
	now := time.Now()
	for _, k := range keys {
		p.ReserveAt(k, now)
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; b.Loop(); i++ {
		p.ReserveAt(keys[i%len(keys)], now)
	}
}

// BenchmarkReserveParallel is BenchmarkReserve from every core at once.
func BenchmarkReserveParallel(b *testing.B) {
	keys := benchHosts(10_000)
	p := NewPacer()
	now := time.Now()
	for _, k := range keys {
		p.ReserveAt(k, now)
	}
	var next atomic.Int64
	b.ReportAllocs()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		i := int(next.Add(7919))
		for pb.Next() {
			p.ReserveAt(keys[i%len(keys)], now)
			i++
		}
	})
}

// BenchmarkObserve measures recording a clean outcome (latency window, decrease step).
func BenchmarkObserve(b *testing.B) {
	keys := benchHosts(10_000)
	p := NewPacer()
	now := time.Now()
	res := make([]Reservation, len(keys))
	for i, k := range keys {
		res[i] = p.ReserveAt(k, now)
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; b.Loop(); i++ {
		p.ObserveAt(res[i%len(res)], Outcome{Status: 200, Latency: 80 * time.Millisecond}, now)
	}
}

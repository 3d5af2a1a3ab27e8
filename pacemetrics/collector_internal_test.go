package pacemetrics

import (
	"fmt"
	"testing"
	"time"

	"github.com/collypace/ext/audit"
	"github.com/prometheus/client_golang/prometheus"
)

// fakeClock is the time seen by a Collector's scrapes.
type fakeClock struct{ t time.Time }

func (f *fakeClock) now() time.Time                   { return f.t }
func (f *fakeClock) advance(d time.Duration)          { f.t = f.t.Add(d) }
func newFakeClock() *fakeClock                        { return &fakeClock{t: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)} }
func withClock(c *Collector, f *fakeClock) *Collector { c.now = f.now; return c }

// scrape runs one Collect and discards the metrics.
func scrape(c *Collector) int {
	ch := make(chan prometheus.Metric)
	go func() { c.Collect(ch); close(ch) }()
	n := 0
	for range ch {
		n++
	}
	return n
}

func depart(c *Collector, host string, n int) {
	for range n {
		c.Departed(host, time.Millisecond)
	}
}

func members(c *Collector) []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []string
	for _, s := range c.members {
		out = append(out, s.key)
	}
	return out
}

func TestHysteresis(t *testing.T) {
	clk := newFakeClock()
	c := withClock(New(WithTopHosts(1)), clk)
	depart(c, "a", 10)
	scrape(c)
	if got := fmt.Sprint(members(c)); got != "[a]" {
		t.Fatalf("members %s, want [a]", got)
	}
	depart(c, "b", 15) // 15 < 2 × 10: a keeps its place
	scrape(c)
	if got := fmt.Sprint(members(c)); got != "[a]" {
		t.Fatalf("members %s, want [a] (b is not twice as active)", got)
	}
	depart(c, "b", 10) // 25 > 2 × 10
	scrape(c)
	if got := fmt.Sprint(members(c)); got != "[b]" {
		t.Fatalf("members %s, want [b]", got)
	}
	if c.stats("a").member.Load() || !c.stats("b").member.Load() {
		t.Fatal("member flags not updated")
	}
}

func TestActivityDecays(t *testing.T) {
	clk := newFakeClock()
	c := withClock(New(WithTopHosts(1)), clk)
	depart(c, "busy-once", 1000)
	scrape(c)
	clk.advance(time.Hour) // 12 half-lives: 1000 → 0.24
	depart(c, "steady", 1)
	scrape(c)
	if got := fmt.Sprint(members(c)); got != "[steady]" {
		t.Fatalf("members %s, want [steady] once busy-once has gone quiet", got)
	}
}

func TestIdleHostsForgotten(t *testing.T) {
	clk := newFakeClock()
	c := withClock(New(WithTopHosts(1)), clk)
	depart(c, "member", 5)
	depart(c, "idle", 1)
	depart(c, "active", 1)
	c.BreakerChanged("parked", audit.BreakerOpen)
	scrape(c)
	for range 4 {
		clk.advance(10 * time.Minute)
		depart(c, "member", 5)
		depart(c, "active", 1)
		scrape(c)
	}
	for host, want := range map[string]bool{"member": true, "idle": false, "active": true, "parked": true} {
		if _, ok := c.hosts.Load(host); ok != want {
			t.Errorf("%s in memory: %v, want %v", host, ok, want)
		}
	}
	if n := c.hosts.Len(); n != 3 {
		t.Errorf("%d hosts in memory, want 3", n)
	}
	// member took the one place at its first event; idle's and active's are counted under "other", and
	// the forgotten host's event stays counted.
	if got := c.other.departures.Load(); got != 1+1+4 {
		t.Errorf("other departures %d, want 6", got)
	}
}

func TestObserverDoesNotAllocate(t *testing.T) {
	c := New()
	c.Departed("a.test", time.Millisecond)
	c.BreakerChanged("a.test", audit.BreakerOpen)
	for name, f := range map[string]func(){
		"Departed":       func() { c.Departed("a.test", time.Millisecond) },
		"Refused":        func() { c.Refused("a.test", audit.TriggerServerError) },
		"RetryAfter":     func() { c.RetryAfter("a.test", time.Second) },
		"BreakerChanged": func() { c.BreakerChanged("a.test", audit.BreakerClosed) },
	} {
		if n := testing.AllocsPerRun(100, f); n != 0 {
			t.Errorf("%s: %v allocations per call, want 0", name, n)
		}
	}
}

func BenchmarkObserver(b *testing.B) {
	c := New()
	hosts := make([]string, 10_000)
	for i := range hosts {
		hosts[i] = fmt.Sprintf("host-%d.test", i)
		c.Departed(hosts[i], 0)
	}
	scrape(c)
	b.ReportAllocs()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		i := 0
		for pb.Next() {
			c.Departed(hosts[i%len(hosts)], time.Millisecond)
			i += 7
		}
	})
}

func BenchmarkScrape100kHosts(b *testing.B) {
	c := New()
	for i := range 100_000 {
		c.Departed(fmt.Sprintf("host-%d.test", i), time.Millisecond)
	}
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		scrape(c)
	}
}

// issue 10 item 21: while places are free, a host has series of its own from its first event, not from
// the first scrape after it: early departures are not counted under "other".
func TestEarlyEventsHaveTheirHostsSeries(t *testing.T) {
	c := withClock(New(WithTopHosts(3)), newFakeClock())
	depart(c, "a", 5)
	depart(c, "b", 2)
	c.Refused("b", audit.TriggerRefusal)
	if got := fmt.Sprint(members(c)); got != "[a b]" {
		t.Errorf("members before any scrape %s, want [a b]", got)
	}
	scrape(c)
	depart(c, "c", 1)
	depart(c, "d", 1) // the top 3 is full: "other"
	if n := c.other.departures.Load(); n != 1 {
		t.Errorf("%d departures under %q, want only d's: every other host fits the top 3", n, OtherHost)
	}
	if n := c.other.refusals[triggerIndex(audit.TriggerRefusal)].Load(); n != 0 {
		t.Errorf("%d refusals under %q, want 0", n, OtherHost)
	}
	if got := fmt.Sprint(members(c)); got != "[a b c]" {
		t.Errorf("members %s, want [a b c]", got)
	}
}

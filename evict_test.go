package ext

import (
	"strconv"
	"testing"
	"time"
)

// Idle hosts leave memory after the idle time; their state goes to the store first and comes back
// on the next use.
func TestIdleHostsEvictedAndRestored(t *testing.T) {
	store := newMemoryStore()
	p := NewPacer(WithStore(store), WithIdleEviction(10*time.Minute), WithBaseDelay(time.Second))
	defer p.Close()
	p.ObserveAt(p.ReserveAt("idle.test", t0), Outcome{Status: 503}, t0) // adaptive delay 1.5s
	p.ReserveAt("busy.test", t0.Add(9*time.Minute))

	if got := p.evictIdleAt(t0.Add(10 * time.Minute)); got != 1 {
		t.Fatalf("evicted %d hosts, want 1 (idle.test)", got)
	}
	if _, ok := p.HostAt("idle.test", t0); ok {
		t.Error("idle.test still in memory")
	}
	if _, ok := p.HostAt("busy.test", t0); !ok {
		t.Error("busy.test, used 1 min ago, was evicted")
	}
	p.ReserveAt("idle.test", t0.Add(11*time.Minute))
	if st, _ := p.HostAt("idle.test", t0.Add(11*time.Minute)); st.AdaptiveDelay != 1500*time.Millisecond {
		t.Errorf("restored adaptive delay %v, want the stored 1.5s", st.AdaptiveDelay)
	}
}

// A host inside a Retry-After window stays in memory however long it is unused.
func TestHeldHostNotEvicted(t *testing.T) {
	p := NewPacer(WithIdleEviction(time.Minute), WithMaxRetryAfter(time.Hour))
	p.ObserveAt(p.ReserveAt("held.test", t0), Outcome{Status: 429, Header: header("Retry-After", "1800")}, t0)
	if got := p.evictIdleAt(t0.Add(10 * time.Minute)); got != 0 {
		t.Errorf("evicted %d hosts during a Retry-After window, want 0", got)
	}
}

// A crawl of many hosts sweeps as it grows: memory stays bounded by the active hosts.
func TestEvictionSweepsAsHostsGrow(t *testing.T) {
	p := NewPacer(WithIdleEviction(time.Minute))
	for i := range 20_000 {
		p.ReserveAt("h"+strconv.Itoa(i), t0.Add(time.Duration(i)*10*time.Millisecond))
	}
	// Hosts 0..~14 000 were last used over a minute before the last; sweeps removed most of them.
	if n := len(p.Hosts()); n > 12_000 {
		t.Errorf("%d hosts in memory after 20 000 over 200 s with a 1 min idle time, want sweeps to have removed most idle ones", n)
	}
}

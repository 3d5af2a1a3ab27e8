package ext

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"sync"
	"testing"
	"testing/synctest"
	"time"
)

// heldShared is a SharedStore that admits every departure and answers with the model it holds, as
// redisstore does; it records when each host's state was written, and its keys expire ttl after their
// last write when ttl is set (as redisstore.WithTTL's: HostTTL).
type heldShared struct {
	*memoryStore
	ttl    time.Duration
	mu     sync.Mutex
	writes map[string][]time.Time
}

func newHeldShared(ttl time.Duration) *heldShared {
	return &heldShared{memoryStore: newMemoryStore(), ttl: ttl, writes: map[string][]time.Time{}}
}

func (s *heldShared) HostTTL() time.Duration { return s.ttl }

func (s *heldShared) Admit(ctx context.Context, host string, _ time.Duration) (Admission, error) {
	st, _, _ := s.LoadHost(ctx, host)
	return Admission{OK: true, AdaptiveDelay: st.AdaptiveDelay, KnownLimit: st.KnownLimit, RefusedInterval: st.RefusedInterval,
		ModelVersion: st.ModelVersion, Noise: st.Noise}, nil
}

func (s *heldShared) Departed(context.Context, string, time.Duration) error { return nil }
func (s *heldShared) Refused(context.Context, string, uint64) error         { return nil }
func (s *heldShared) CheckLost(context.Context) (bool, error)               { return false, nil }

func (s *heldShared) SaveHosts(ctx context.Context, states []StoredHost) error {
	s.mu.Lock()
	for _, st := range states {
		s.writes[st.Host] = append(s.writes[st.Host], time.Now())
	}
	s.mu.Unlock()
	return s.memoryStore.SaveHosts(ctx, states)
}

// forget drops host's state, as a key that expired or was evicted.
func (s *heldShared) forget(host string) {
	s.memoryStore.mu.Lock()
	delete(s.memoryStore.hosts, host)
	s.memoryStore.mu.Unlock()
}

// writesOf returns when host's state was written, as offsets from t0.
func (s *heldShared) writesOf(host string, t0 time.Time) []time.Duration {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []time.Duration
	for _, at := range s.writes[host] {
		out = append(out, at.Sub(t0))
	}
	return out
}

// departEvery departs to host as soon as the pacer lets it, until a departure is after end.
func departEvery(t *testing.T, p *Pacer, host string, end time.Time) {
	t.Helper()
	for !time.Now().After(end) {
		_, release, err := p.Wait(t.Context(), host)
		if err != nil {
			t.Fatal(err)
		}
		release()
	}
}

// Issue 35: on a shared store, whose admission records every departure, the write-behind flush leaves
// out a host whose state changed only by its departures (the next departure it would store): one write
// when the host is first flushed, then none while it departs every second; a change of the state (a
// 503 raises the adaptive delay) is written, and the unchanged state after it is not written again.
func TestSharedStoreUnchangedStateNotWrittenAgain(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := newHeldShared(0)
		p := NewPacer(WithStore(s), WithBaseDelay(time.Second), WithJitter(0), WithoutRobots())
		defer p.Close()
		t0 := time.Now()
		time.Sleep(250 * time.Millisecond)
		departEvery(t, p, "h.test", t0.Add(5*time.Second)) // departures at 0.25, 1.25, …, 5.25 s; flushes at 1, 2, …
		time.Sleep(1250 * time.Millisecond)                // the flush at 6 s
		if got := s.writesOf("h.test", t0); len(got) != 1 || got[0] != time.Second {
			t.Fatalf("h.test written at %v, want once, at the first flush (1s): only its departures changed since", got)
		}
		p.ObserveAt(p.ReserveAt("h.test", time.Now()), Outcome{Status: http.StatusServiceUnavailable}, time.Now()) // at 6.5 s
		time.Sleep(3 * time.Second)
		got := s.writesOf("h.test", t0)
		if len(got) != 2 || got[1] != 6500*time.Millisecond {
			t.Fatalf("h.test written at %v, want again once, when the 503 raised its delay (6.5s)", got)
		}
		if st, _, _ := s.LoadHost(t.Context(), "h.test"); st.AdaptiveDelay <= time.Second {
			t.Errorf("stored delay %v, want the raised one", st.AdaptiveDelay)
		}
	})
}

// Issue 35: a shared store whose keys expire (HostTTL, redisstore.WithTTL) is written again once half
// of the TTL has passed since the last write, unchanged state or not, so that an active host's key
// never expires: TTL 4 s, departures every second, flushes every second: written at 1, 3 and 5 s.
func TestSharedStoreWithTTLWritesUnchangedStateAgain(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := newHeldShared(4 * time.Second)
		p := NewPacer(WithStore(s), WithBaseDelay(time.Second), WithJitter(0), WithoutRobots())
		defer p.Close()
		t0 := time.Now()
		time.Sleep(250 * time.Millisecond)
		departEvery(t, p, "h.test", t0.Add(5*time.Second)) // departures at 0.25, 1.25, …, 5.25 s
		time.Sleep(250 * time.Millisecond)
		want := []time.Duration{time.Second, 3 * time.Second, 5 * time.Second}
		if got := s.writesOf("h.test", t0); len(got) != len(want) || got[0] != want[0] || got[1] != want[1] || got[2] != want[2] {
			t.Errorf("h.test written at %v, want at %v", got, want)
		}
	})
}

// Issue 35: a state the shared store no longer holds (its key expired or was evicted: the admission
// answers with no adaptive delay) is written again at the next flush, though it did not change.
func TestSharedStoreStateLostByTheStoreWrittenAgain(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := newHeldShared(0)
		p := NewPacer(WithStore(s), WithBaseDelay(time.Second), WithJitter(0), WithoutRobots())
		defer p.Close()
		t0 := time.Now()
		time.Sleep(250 * time.Millisecond)
		departEvery(t, p, "h.test", t0.Add(1500*time.Millisecond)) // departures at 0.25, 1.25, 2.25 s; written at 1 s
		s.forget("h.test")
		departEvery(t, p, "h.test", t0.Add(2500*time.Millisecond)) // departs at 3.25 s, told of no model
		time.Sleep(time.Second)
		if got := s.writesOf("h.test", t0); len(got) != 2 || got[0] != time.Second || got[1] != 4*time.Second {
			t.Errorf("h.test written at %v, want at 1s and again at 4s, the flush after an admission found its state gone", got)
		}
		if st, ok, _ := s.LoadHost(t.Context(), "h.test"); !ok || st.AdaptiveDelay != time.Second {
			t.Errorf("stored %+v (ok %v), want the state back", st, ok)
		}
	})
}

// wiredShared is a heldShared that ends a departure pending at its admission's instant at less cost
// (DepartedAtAdmission, as redisstore does), and records how each departure was ended.
type wiredShared struct {
	*heldShared
	ended []string // "admission", or "departed" (Departed, with the wire instant's ago)
}

func (s *wiredShared) Departed(context.Context, string, time.Duration) error {
	s.mu.Lock()
	s.ended = append(s.ended, "departed")
	s.mu.Unlock()
	return nil
}

func (s *wiredShared) DepartedAtAdmission(context.Context, string) error {
	s.mu.Lock()
	s.ended = append(s.ended, "admission")
	s.mu.Unlock()
	return nil
}

// Issue 35: a fleet departure whose request reached the wire at its admission (within the 1 ms slack)
// is ended with the store's DepartedAtAdmission; one whose dial took 50 ms, with Departed (its wire
// instant moves the last departure).
func TestFleetDepartureEndedAtItsWireInstant(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		n := newFakeNet(t)
		_, base := n.host("w.test", slowPage(0))
		var dialDelay time.Duration
		n.tr.DialContext = func(ctx context.Context, network, addr string) (net.Conn, error) {
			time.Sleep(dialDelay)
			return n.dial(ctx, network, addr)
		}
		s := &wiredShared{heldShared: newHeldShared(0)}
		c, p := pacedCollector(n, WithBaseDelay(time.Second), WithoutRobots(), WithStore(s))
		defer p.Close()
		c.Async = false
		for i, d := range []time.Duration{0, 50 * time.Millisecond} {
			dialDelay = d
			if err := c.Visit(fmt.Sprintf("%s/p/%d", base, i)); err != nil {
				t.Fatal(err)
			}
			synctest.Wait()
		}
		s.mu.Lock()
		defer s.mu.Unlock()
		if fmt.Sprint(s.ended) != "[admission departed]" {
			t.Errorf("departures ended by %v, want [admission departed]: the first at its admission, the second 50 ms after", s.ended)
		}
	})
}

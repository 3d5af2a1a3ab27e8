package ext

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/collypace/ext/audit"
	"github.com/collypace/ext/internal/capacity"
	"github.com/rs/zerolog"
)

// A crawler stopped during a host's Retry-After window and started again on the same store sends
// nothing to that host before the window ends.
func TestRestartDuringRetryAfterWindow(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		n := newFakeNet(t)
		var refused atomic.Bool
		h, base := n.host("ra.test", func(w http.ResponseWriter, r *http.Request) {
			if r.URL.Path == "/robots.txt" {
				http.NotFound(w, r)
				return
			}
			if !refused.Swap(true) {
				w.Header().Set("Retry-After", "30")
				w.WriteHeader(http.StatusTooManyRequests)
				return
			}
			fmt.Fprint(w, "ok")
		})
		store := newMemoryStore()
		c1, p1 := pacedCollector(n, WithBaseDelay(time.Second), WithMaxRetries(0), WithStore(store))
		visitAll(t, c1, base, 1)
		refusedAt := h.log()[1].at
		if err := p1.Close(); err != nil {
			t.Fatal(err)
		}

		time.Sleep(5 * time.Second) // the restart
		c2, p2 := pacedCollector(n, WithBaseDelay(time.Second), WithStore(store))
		defer p2.Close()
		visitAll(t, c2, base+"/again", 2)
		log := h.log()
		if len(log) < 3 {
			t.Fatalf("arrivals = %v", log)
		}
		for _, a := range log[2:] {
			if a.path != "/robots.txt" && a.at.Before(refusedAt.Add(33*time.Second)) {
				t.Errorf("%s arrived %v after the refusal, inside the 33s window", a.path, a.at.Sub(refusedAt))
			}
		}
		first := log[2] // robots.txt, read first: a departure like any other
		if got := first.at.Sub(refusedAt); got != 33*time.Second {
			t.Errorf("first request after the restart (%s) came %v after the refusal, want 33s", first.path, got)
		}
	})
}

// Deferred requests survive a restart: a new pacer on the same store drains them.
func TestDeferredRequestsSurviveRestart(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		n := newFakeNet(t)
		var down atomic.Bool
		down.Store(true)
		h, base := n.host("park.test", flakySite(&down))
		store := newMemoryStore()
		breaker := WithBreaker(BreakerPolicy{Failures: 1, Cooldown: time.Minute})
		c1, p1 := pacedCollector(n, WithBaseDelay(time.Second), WithMaxRetries(0), WithStore(store), breaker)
		visitAll(t, c1, base, 3)
		_ = p1.Close()

		down.Store(false)
		time.Sleep(time.Minute)
		c2, p2 := pacedCollector(n, WithBaseDelay(time.Second), WithStore(store), breaker)
		defer p2.Close()
		if st, _ := p2.Host("park.test"); st.Host != "" {
			t.Fatal("host known before use")
		}
		if got, err := p2.Drain(t.Context(), c2); got != 2 || err != nil {
			t.Fatalf("Drain after the restart = %d, %v; want the 2 deferred", got, err)
		}
		c2.Wait()
		if got := len(h.gaps("/p/")) + 1; got != 3 {
			t.Errorf("server saw %d page requests, want 3 (1 refused + 2 drained)", got)
		}
	})
}

// Stored state that cannot be trusted is repaired or ignored, with an audit event, and the repair is
// written back: the next restart finds nothing to repair (issue 33: a park until 2061 was "repaired" at
// every restart while the row kept it). A park's own row is no repair at all.
func TestCorruptAndStaleStateRepaired(t *testing.T) {
	park := t0.Add(60 * 365 * 24 * time.Hour) // Retry-After: 999999999 s + 10%: past 2061
	for _, tc := range []struct {
		name   string
		state  StoredHost
		check  func(HostSnapshot) string
		intact bool // nothing to repair
	}{
		{"future schema", StoredHost{Version: 99, AdaptiveDelay: time.Hour, HoldUntil: t0.Add(time.Hour)},
			func(s HostSnapshot) string {
				if s.AdaptiveDelay != time.Second || !s.RetryAfterUntil.IsZero() {
					return fmt.Sprintf("delay %v hold %v, want a fresh host", s.AdaptiveDelay, s.RetryAfterUntil)
				}
				return ""
			}, false},
		{"negative delay", StoredHost{Version: StateVersion, AdaptiveDelay: -5 * time.Second},
			func(s HostSnapshot) string {
				if s.AdaptiveDelay != time.Second {
					return fmt.Sprintf("delay %v, want the 1s floor", s.AdaptiveDelay)
				}
				return ""
			}, false},
		{"enormous delay", StoredHost{Version: StateVersion, AdaptiveDelay: 1 << 62},
			func(s HostSnapshot) string {
				if s.AdaptiveDelay != DefaultMaxDelay {
					return fmt.Sprintf("delay %v, want the 30s ceiling", s.AdaptiveDelay)
				}
				return ""
			}, false},
		{"absurd hold", StoredHost{Version: StateVersion, AdaptiveDelay: time.Second, HoldUntil: t0.Add(1000 * time.Hour)},
			func(s HostSnapshot) string {
				if s.RetryAfterUntil.After(t0.Add(maxRateLimitReset)) {
					return fmt.Sprintf("hold until +%v, want at most the 1 h a rate-limit reset could set", s.RetryAfterUntil.Sub(t0))
				}
				return ""
			}, false},
		{"unknown breaker", StoredHost{Version: StateVersion, AdaptiveDelay: time.Second, Breaker: 7},
			func(s HostSnapshot) string {
				if s.Breaker != audit.BreakerClosed {
					return fmt.Sprintf("breaker %v, want closed", s.Breaker)
				}
				return ""
			}, false},
		{"next departure beyond any interval and hold", StoredHost{Version: StateVersion, AdaptiveDelay: time.Second, NextDeparture: t0.Add(time.Hour)},
			func(s HostSnapshot) string {
				if s.NextDeparture.After(t0.Add(time.Minute)) {
					return fmt.Sprintf("next departure +%v, want reset", s.NextDeparture.Sub(t0))
				}
				return ""
			}, false},
		{"parked until 2061", StoredHost{Version: StateVersion, AdaptiveDelay: time.Second, Breaker: audit.BreakerOpen, BreakerChanged: t0.Add(-time.Minute),
			ParkUntil: park, HoldUntil: park, HoldTrigger: audit.TriggerRetryAfter, NextDeparture: park},
			func(s HostSnapshot) string {
				if s.Breaker != audit.BreakerOpen || !s.RetryAfterUntil.Equal(park) || !s.NextDeparture.Equal(park) {
					return fmt.Sprintf("breaker %v, hold until %v, next departure %v; want parked until %v", s.Breaker, s.RetryAfterUntil, s.NextDeparture, park)
				}
				return ""
			}, true},
	} {
		store := newMemoryStore()
		tc.state.Host = "h"
		_ = store.SaveHosts(context.Background(), []StoredHost{tc.state})
		var buf auditBuf
		p := NewPacer(WithStore(store), WithLogger(zerolog.New(&buf)))
		p.now = func() time.Time { return t0 }
		p.host("h")
		st, _ := p.HostAt("h", t0)
		if msg := tc.check(st); msg != "" {
			t.Errorf("%s: %s", tc.name, msg)
		}
		if repaired := findEvent(t, &buf, audit.EventStateRepaired); (repaired == nil) != tc.intact {
			t.Errorf("%s: state_repaired %v, want one: %v", tc.name, repaired, !tc.intact)
		}
		if stored, _, _ := store.LoadHost(context.Background(), "h"); !tc.intact && (stored.HoldUntil.After(t0.Add(maxRateLimitReset)) || stored.Version != StateVersion) {
			t.Errorf("%s: the store still holds the untrusted row (version %d, hold %v)", tc.name, stored.Version, stored.HoldUntil)
		}
		_ = p.Close()
		for restart := 1; restart <= 2; restart++ { // the repaired row is trusted as it was written
			var again auditBuf
			at := t0.Add(time.Duration(restart) * time.Minute)
			p := NewPacer(WithStore(store), WithLogger(zerolog.New(&again)))
			p.now = func() time.Time { return at }
			p.host("h")
			if e := findEvent(t, &again, audit.EventStateRepaired); e != nil {
				t.Errorf("%s: restart %d repaired the row written back: %v", tc.name, restart, e[audit.FieldDetail])
			}
			if st, _ := p.HostAt("h", at); tc.intact {
				if msg := tc.check(st); msg != "" {
					t.Errorf("%s: restart %d: %s", tc.name, restart, msg)
				}
			}
			_ = p.Close()
		}
	}
}

// A row the store cannot decode is ignored with an audit event: the host starts afresh.
func TestUndecodableStateIgnored(t *testing.T) {
	var buf auditBuf
	p := NewPacer(WithStore(brokenStore{memoryStore: newMemoryStore()}), WithLogger(zerolog.New(&buf)))
	defer p.Close()
	if st, _ := p.HostAt("h", t0); st.Host != "" {
		t.Fatal("host exists before use")
	}
	p.host("h")
	if st, _ := p.HostAt("h", t0); st.AdaptiveDelay != time.Second {
		t.Errorf("delay %v, want a fresh host", st.AdaptiveDelay)
	}
	if findEvent(t, &buf, audit.EventStateCorrupt) == nil {
		t.Error("no state_corrupt event")
	}
}

type brokenStore struct{ *memoryStore }

func (brokenStore) LoadHost(context.Context, string) (StoredHost, bool, error) {
	return StoredHost{}, false, fmt.Errorf("row h: column adaptive_delay is 'abc': %w", ErrCorruptState)
}

// Changed state is written behind: after a flush the store holds the adaptive delay.
func TestWriteBehind(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		store := newMemoryStore()
		p := NewPacer(WithStore(store), WithBaseDelay(time.Second))
		p.Observe(p.ReserveAt("h", time.Now()), Outcome{Status: 503})
		time.Sleep(defaultFlushInterval + time.Millisecond)
		st, ok, _ := store.LoadHost(t.Context(), "h")
		if !ok || st.AdaptiveDelay != 1500*time.Millisecond {
			t.Errorf("stored delay %v (ok %v), want 1.5s after one flush", st.AdaptiveDelay, ok)
		}
		_ = p.Close()
	})
}

// flakyShared is a SharedStore that admits every departure, and fails while down.
type flakyShared struct {
	*memoryStore
	down  atomic.Bool
	calls atomic.Int32
}

var errFlakyDown = errors.New("dial unix /tmp/redis.sock: connection refused")

func (f *flakyShared) Admit(context.Context, string, time.Duration) (Admission, error) {
	f.calls.Add(1)
	if f.down.Load() {
		return Admission{}, errFlakyDown
	}
	return Admission{OK: true}, nil
}

func (f *flakyShared) Refused(context.Context, string, uint64) error { return nil }

func (f *flakyShared) Departed(context.Context, string, time.Duration) error {
	if f.down.Load() {
		return errFlakyDown
	}
	return nil
}

func (f *flakyShared) CheckLost(context.Context) (bool, error) { return false, nil }

// Issue 16 item 6: when the shared store fails, the fleet's departures wait for it (one process pacing
// alone would send its share on top of the others'); the stall is named in the audit trail and raised
// once through WithAlert after storeStallBound, and its end is audited when the store answers again.
func TestSharedStoreLossStopsDepartures(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		n := newFakeNet(t)
		h, base := n.host("fleet.test", slowPage(0))
		store := &flakyShared{memoryStore: newMemoryStore()}
		var al alerts
		var buf auditBuf
		c, p := pacedCollector(n, WithBaseDelay(time.Second), WithoutRobots(), WithStore(store), WithAlert(al.add), WithLogger(zerolog.New(&buf)))
		defer p.Close()
		c.Async = false
		store.down.Store(true)
		done := make(chan struct{})
		go func() {
			visitAll(t, c, base+"/a", 3)
			close(done)
		}()
		time.Sleep(5 * time.Second)
		if got := len(h.log()); got != 0 {
			t.Errorf("%d requests departed while the shared store was down, want none", got)
		}
		if fmt.Sprint(al.events()) != "["+string(audit.EventStoreUnavailable)+"]" {
			t.Errorf("alerts = %v, want one store_unavailable", al.events())
		}
		store.down.Store(false)
		<-done
		assertGaps(t, h.gaps("/a/"), time.Second)
		if findEvent(t, &buf, audit.EventStoreRecovered) == nil {
			t.Error("no store_recovered event")
		}
		if len(al.events()) != 1 {
			t.Errorf("alerts = %v, want the one store_unavailable", al.events())
		}
	})
}

// fleetAnswer is a SharedStore that admits every departure and reports fixed fleet delays.
type fleetAnswer struct {
	*memoryStore
	a Admission
}

func (f *fleetAnswer) Admit(context.Context, string, time.Duration) (Admission, error) {
	return f.a, nil
}
func (f *fleetAnswer) Departed(context.Context, string, time.Duration) error { return nil }
func (f *fleetAnswer) Refused(context.Context, string, uint64) error         { return nil }
func (f *fleetAnswer) CheckLost(context.Context) (bool, error)               { return false, nil }

// Issue 15 rule 4: the fleet's model is one model. A pacer adopts the stored model (delay, good and
// refused intervals) when it is newer than its own, whichever way it moves, keeps its own when the
// stored one is older, and writes its own changes through to the store with a newer version.
func TestFleetModelIsOneModel(t *testing.T) {
	store := &fleetAnswer{memoryStore: newMemoryStore(), a: Admission{OK: true,
		AdaptiveDelay: 400 * time.Millisecond, KnownLimit: 400 * time.Millisecond, RefusedInterval: 250 * time.Millisecond, ModelVersion: 7}}
	p := NewPacer(WithStore(store), WithBaseDelay(100*time.Millisecond), WithoutRobots(), WithJitter(0))
	defer p.Close()
	res, release, err := p.Wait(t.Context(), "fleet.test")
	if err != nil {
		t.Fatal(err)
	}
	release()
	h := p.host("fleet.test")
	model := func() (capacity.Bounds, int64) {
		h.mu.Lock()
		defer h.mu.Unlock()
		return h.delay.Bounds(), h.delay.Version()
	}
	if m, v := model(); m != (capacity.Bounds{Delay: 400 * time.Millisecond, Good: 400 * time.Millisecond, Bad: 250 * time.Millisecond}) || v != 7 {
		t.Fatalf("after an admission: model %+v version %d; want the fleet's 400/400/250ms, version 7", m, v)
	}
	// This process learns: a refusal of a departure under the fleet's model, at its good interval, is
	// the edge: good moves one step slower, as in one process. Written through, newer.
	res.gen = h.delay.Gen()
	p.ObserveAt(res, Outcome{Status: 429}, time.Now())
	m, v := model()
	if m.Delay != 408*time.Millisecond || m.Good != 408*time.Millisecond || v <= 7 {
		t.Fatalf("after a refusal: model %+v version %d; want one step slower, 408ms, a newer version", m, v)
	}
	st, ok, _ := store.LoadHost(t.Context(), "fleet.test")
	if !ok || st.AdaptiveDelay != 408*time.Millisecond || st.ModelVersion != v {
		t.Errorf("stored model %v (version %d), want this process's change written through: 408ms, version %d", st.AdaptiveDelay, st.ModelVersion, v)
	}
	// An older stored model is not adopted; a newer one is, even when it is faster.
	if _, release, err = p.Wait(t.Context(), "fleet.test"); err != nil {
		t.Fatal(err)
	}
	release()
	if m2, _ := model(); m2 != m {
		t.Errorf("an older stored model (version 7) replaced this process's newer one: %+v", m2)
	}
	store.a.ModelVersion, store.a.AdaptiveDelay = v+1, 300*time.Millisecond
	h.mu.Lock()
	h.lastDeparture = time.Time{}
	h.mu.Unlock()
	if _, release, err = p.Wait(t.Context(), "fleet.test"); err != nil {
		t.Fatal(err)
	}
	release()
	if m2, v2 := model(); m2.Delay != 300*time.Millisecond || v2 != v+1 {
		t.Errorf("a newer stored model was not adopted: %+v version %d, want 300ms version %d", m2, v2, v+1)
	}
}

// The fleet reads noise as one crawler: a process whose model has backed off on refusals takes the
// fleet's verdict that they do not depend on the pace (another process saw it) at its next admission.
// It enters noise mode (the delay back to twice the floor at most, refusals no longer move it), writes
// the lowered model through, newer, and says so in its trail; a later verdict that the refusals do
// depend on the pace ends noise mode; an earlier verdict changes nothing.
func TestFleetSharesNoiseVerdict(t *testing.T) {
	const base = 100 * time.Millisecond
	var buf auditBuf
	store := &fleetAnswer{memoryStore: newMemoryStore(), a: Admission{OK: true}}
	p := NewPacer(WithStore(store), WithBaseDelay(base), WithoutRobots(), WithJitter(0), WithLogger(zerolog.New(&buf)))
	defer p.Close()
	h := p.host("noisy.test")
	h.mu.Lock()
	h.delay.Restore(900*time.Millisecond, h.delay.Good(), h.delay.Bad(), h.delay.Version()) // backed off on this process's refusals
	version := h.delay.Version()
	h.mu.Unlock()
	depart := func() Reservation {
		t.Helper()
		h.mu.Lock()
		h.lastDeparture = time.Time{}
		h.mu.Unlock()
		res, release, err := p.Wait(t.Context(), "noisy.test")
		if err != nil {
			t.Fatal(err)
		}
		release()
		return res
	}
	verdict := func() (audit.NoiseVerdict, time.Duration, int64) {
		h.mu.Lock()
		defer h.mu.Unlock()
		return h.delay.Verdict(), h.delay.Delay(), h.delay.Version()
	}

	store.a.Noise = audit.NoiseSeen
	res := depart()
	v, delay, ver := verdict()
	if v != audit.NoiseSeen || delay > 2*base || ver <= version {
		t.Fatalf("after the fleet's noise verdict: verdict %d, delay %v, version %d; want noise, at most %v, newer than %d", v, delay, ver, 2*base, version)
	}
	if st, ok, _ := store.LoadHost(t.Context(), "noisy.test"); !ok || st.Noise != audit.NoiseSeen || st.AdaptiveDelay != delay || st.ModelVersion != ver {
		t.Errorf("stored %+v; want the lowered model written through: noise, %v, version %d", st, delay, ver)
	}
	ev := findEvent(t, &buf, audit.EventRefusalsUncorrelated)
	if ev == nil || ev[audit.FieldTrigger] != string(audit.TriggerStore) || !strings.Contains(fmt.Sprint(ev[audit.FieldDetail]), "another process") {
		t.Errorf("%s = %v; want one, trigger store, saying another process saw it", audit.EventRefusalsUncorrelated, ev)
	}
	// In noise mode a refusal no longer backs off, in this process as in the one that saw it.
	res.gen = h.delay.Gen()
	p.ObserveAt(res, Outcome{Status: 429}, time.Now())
	if _, d, _ := verdict(); d != delay {
		t.Errorf("a refusal in noise mode moved the delay: %v → %v", delay, d)
	}

	store.a.Noise = audit.NoiseUndecided // a process that has not seen it wrote since: the verdict stays
	depart()
	if v, _, _ := verdict(); v != audit.NoiseSeen {
		t.Errorf("an earlier verdict (undecided) changed this one: %d", v)
	}
	store.a.Noise = audit.NoiseRefuted
	depart()
	if v, _, _ := verdict(); v != audit.NoiseRefuted {
		t.Errorf("verdict %d after the fleet's refuted, want refuted (noise mode ended)", v)
	}
	if findEvent(t, &buf, audit.EventRefusalsCorrelated) == nil {
		t.Errorf("no %s event when the fleet's verdict ended noise mode", audit.EventRefusalsCorrelated)
	}
}

// A restart keeps the verdict: a host stored as noisy is restored in noise mode (its refusals do not
// move the delay), and the trail says so; an unknown verdict is repaired to undecided.
func TestRestoreKeepsNoiseVerdict(t *testing.T) {
	const base = 100 * time.Millisecond
	for _, c := range []struct {
		stored audit.NoiseVerdict
		want   audit.NoiseVerdict
		event  audit.Event
	}{
		{audit.NoiseSeen, audit.NoiseSeen, audit.EventRefusalsUncorrelated},
		{audit.NoiseRefuted, audit.NoiseRefuted, audit.EventRefusalsCorrelated},
		{7, audit.NoiseUndecided, audit.EventStateRepaired},
	} {
		var buf auditBuf
		store := newMemoryStore()
		st := StoredHost{Host: "r.test", Version: StateVersion, AdaptiveDelay: 150 * time.Millisecond, KnownLimit: base, Noise: c.stored, UpdatedAt: time.Now()}
		if err := store.SaveHosts(t.Context(), []StoredHost{st}); err != nil {
			t.Fatal(err)
		}
		p := NewPacer(WithStore(store), WithBaseDelay(base), WithoutRobots(), WithJitter(0), WithLogger(zerolog.New(&buf)))
		res := p.ReserveAt("r.test", time.Now())
		h := p.host("r.test")
		h.mu.Lock()
		v, delay := h.delay.Verdict(), h.delay.Delay()
		h.mu.Unlock()
		if v != c.want {
			t.Errorf("stored verdict %d: restored %d, want %d", c.stored, v, c.want)
		}
		if findEvent(t, &buf, c.event) == nil {
			t.Errorf("stored verdict %d: no %s event", c.stored, c.event)
		}
		res.gen = h.delay.Gen()
		p.ObserveAt(res, Outcome{Status: 429}, time.Now())
		h.mu.Lock()
		after := h.delay.Delay()
		h.mu.Unlock()
		if moved := after != delay; moved != (c.want != audit.NoiseSeen) {
			t.Errorf("stored verdict %d: a refusal moved the delay %v → %v; want it moved only outside noise mode", c.stored, delay, after)
		}
		p.Close()
	}
}

// scriptedShared is a SharedStore whose answers a test sets per host; it records the states saved.
type scriptedShared struct {
	*memoryStore
	mu     sync.Mutex
	answer func(host string) (Admission, error)
	saved  []StoredHost
	wired  []string
}

func (s *scriptedShared) Admit(_ context.Context, host string, _ time.Duration) (Admission, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.answer(host)
}

func (s *scriptedShared) Refused(context.Context, string, uint64) error { return nil }

func (s *scriptedShared) Departed(_ context.Context, host string, _ time.Duration) error {
	s.mu.Lock()
	s.wired = append(s.wired, host)
	s.mu.Unlock()
	return nil
}

func (s *scriptedShared) CheckLost(context.Context) (bool, error) { return false, nil }

func (s *scriptedShared) SaveHosts(ctx context.Context, states []StoredHost) error {
	s.mu.Lock()
	s.saved = append(s.saved, states...)
	s.mu.Unlock()
	return s.memoryStore.SaveHosts(ctx, states)
}

// Issue 16 item 4: an admission error about one host's record (ErrCorruptState) concerns that host:
// its record is overwritten (Replace), it is audited, no alert is raised, and the other hosts are
// admitted by the store as before.
func TestCorruptAdmissionConcernsItsHost(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		corrupt := true
		s := &scriptedShared{memoryStore: newMemoryStore()}
		s.answer = func(host string) (Admission, error) {
			if host == "bad.test" && corrupt {
				corrupt = false
				return Admission{}, fmt.Errorf("WRONGTYPE: %w", ErrCorruptState)
			}
			return Admission{OK: true}, nil
		}
		var al alerts
		var buf auditBuf
		p := NewPacer(WithStore(s), WithBaseDelay(time.Second), WithJitter(0), WithoutRobots(), WithAlert(al.add), WithLogger(zerolog.New(&buf)))
		defer p.Close()
		for _, host := range []string{"bad.test", "good.test"} {
			_, release, err := p.Wait(t.Context(), host)
			if err != nil {
				t.Fatal(err)
			}
			release()
		}
		if len(al.events()) != 0 {
			t.Errorf("alerts %v, want none: the store is up", al.events())
		}
		if findEvent(t, &buf, audit.EventStateCorrupt) == nil {
			t.Error("no state_corrupt event")
		}
		s.mu.Lock()
		defer s.mu.Unlock()
		if len(s.saved) == 0 || s.saved[0].Host != "bad.test" || !s.saved[0].Replace {
			t.Errorf("saved %+v, want bad.test's record overwritten first", s.saved)
		}
	})
}

// Issue 16 item 5: a store that lost its state (Admission.Lost) gets every host state this process
// knows written back, a hold included, before the pacer asks again.
func TestLostStoreGetsStatesBack(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		lost := false
		s := &scriptedShared{memoryStore: newMemoryStore()}
		s.answer = func(string) (Admission, error) {
			if lost {
				lost = false
				return Admission{Lost: true, Wait: time.Second}, nil
			}
			return Admission{OK: true}, nil
		}
		p := NewPacer(WithStore(s), WithBaseDelay(time.Second), WithJitter(0), WithoutRobots(), WithFlushInterval(time.Hour))
		defer p.Close()
		now := time.Now()
		res := p.ReserveAt("held.test", now)
		p.ObserveAt(res, Outcome{Status: http.StatusTooManyRequests, Header: http.Header{"Retry-After": {"30"}}}, now)
		s.mu.Lock()
		s.saved, lost = nil, true
		s.mu.Unlock()
		start := time.Now()
		_, release, err := p.Wait(t.Context(), "other.test")
		if err != nil {
			t.Fatal(err)
		}
		release()
		if waited := time.Since(start); waited < time.Second {
			t.Errorf("departed %v after the loss was found, want after the store's 1 s grace", waited)
		}
		s.mu.Lock()
		defer s.mu.Unlock()
		var held *StoredHost
		for i := range s.saved {
			if s.saved[i].Host == "held.test" {
				held = &s.saved[i]
			}
		}
		if held == nil || held.HoldUntil.Before(now.Add(30*time.Second)) {
			t.Errorf("written back: %+v; want held.test with its 30 s hold", s.saved)
		}
	})
}

// A hold is stored with its true cause and restored under it: a robots.txt outage's hold comes back
// as one (robots_unavailable, trigger robots), not as a Retry-After window, and an unreachable host's
// hold (this process's own: nothing was learned of the host) is not stored at all.
func TestHoldStoredAndRestoredUnderItsCause(t *testing.T) {
	t0 := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	for _, tc := range []struct {
		trigger audit.Trigger
		stored  bool
		event   audit.Event
	}{
		{audit.TriggerRobots, true, audit.EventRobotsUnavailable},
		{audit.TriggerRetryAfter, true, audit.EventRetryAfterHonoured},
		{audit.TriggerRateLimit, true, audit.EventRateLimitApplied},
		{audit.TriggerUnreachable, false, ""},
	} {
		t.Run(string(tc.trigger), func(t *testing.T) {
			store := newMemoryStore()
			p1 := NewPacer(WithStore(store), WithFlushInterval(time.Hour))
			p1.now = func() time.Time { return t0 }
			h := p1.hostAt("h.test", t0)
			h.mu.Lock()
			h.holdUntil, h.holdTrigger = t0.Add(10*time.Second), tc.trigger
			h.mu.Unlock()
			h.markDirty(p1)
			if err := p1.Close(); err != nil {
				t.Fatal(err)
			}
			st, _, _ := store.LoadHost(t.Context(), "h.test")
			if got := !st.HoldUntil.IsZero(); got != tc.stored || tc.stored && st.HoldTrigger != tc.trigger {
				t.Fatalf("stored hold %v (%q), want stored %v under %q", st.HoldUntil, st.HoldTrigger, tc.stored, tc.trigger)
			}
			if !tc.stored {
				return
			}
			var buf auditBuf
			p2 := NewPacer(WithStore(store), WithFlushInterval(time.Hour), WithLogger(zerolog.New(&buf)))
			defer p2.Close()
			p2.now = func() time.Time { return t0.Add(time.Second) }
			p2.hostAt("h.test", t0.Add(time.Second)) // restored
			s, _ := p2.HostAt("h.test", t0.Add(time.Second))
			if s.Trigger != tc.trigger || !s.RetryAfterUntil.Equal(t0.Add(10*time.Second)) {
				t.Errorf("restored hold until %v under %q, want %v under %q", s.RetryAfterUntil, s.Trigger, t0.Add(10*time.Second), tc.trigger)
			}
			e := findEvent(t, &buf, tc.event)
			if e == nil || e[audit.FieldTrigger] != string(tc.trigger) || e[audit.FieldWindowEnd] == nil {
				t.Errorf("restore event %v, want %s with trigger %s and its window; trail:\n%s", e, tc.event, tc.trigger, buf.String())
			}
		})
	}
}

// In a fleet, a hold's audit event says when the hold was in the shared store (shared), from which the
// other processes read it, no earlier than when it took effect here (window_start); a process alone,
// whose hold no other process reads, says no such instant.
func TestHoldSaysWhenTheFleetCouldReadIt(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		for _, fleet := range []bool{true, false} {
			var buf auditBuf
			opts := []Option{WithLogger(zerolog.New(&buf)), WithBaseDelay(100 * time.Millisecond), WithoutRobots()}
			if fleet {
				opts = append(opts, WithStore(newSimShared().view(1)))
			}
			p := NewPacer(opts...)
			res, release, err := p.Wait(t.Context(), "h")
			if err != nil {
				t.Fatal(err)
			}
			p.Observe(res, Outcome{Status: 429, Header: header("Retry-After", "2")})
			release()
			ev := findEvent(t, &buf, audit.EventRetryAfterHonoured)
			if ev == nil {
				t.Fatalf("fleet %v: no %s event", fleet, audit.EventRetryAfterHonoured)
			}
			shared, has := ev[audit.FieldShared].(string)
			if has != fleet {
				t.Errorf("fleet %v: shared = %q (present %v), want present only in a fleet", fleet, shared, has)
			}
			if has {
				sh, err1 := time.Parse(time.RFC3339Nano, shared)
				ws, err2 := time.Parse(time.RFC3339Nano, ev[audit.FieldWindowStart].(string))
				if err1 != nil || err2 != nil || sh.Before(ws) {
					t.Errorf("shared %s, window_start %v: want both instants, shared not before", shared, ev[audit.FieldWindowStart])
				}
			}
			_ = p.Close()
		}
	})
}

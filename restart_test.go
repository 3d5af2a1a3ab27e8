package ext

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/collypace/ext/audit"
	"github.com/rs/zerolog"
)

// sessionMem is a sessionStore in memory: the memory store with a record of its sessions, as
// sqlitestore keeps them.
type sessionMem struct {
	*memoryStore
	mu       sync.Mutex
	sessions map[string]time.Time
	fail     bool // BeginSession fails
}

func newSessionMem() *sessionMem {
	return &sessionMem{memoryStore: newMemoryStore(), sessions: map[string]time.Time{}}
}

func (s *sessionMem) BeginSession(_ context.Context, id string, at time.Time) (bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.fail {
		return false, errors.New("disk I/O error")
	}
	unclean := false
	for other := range s.sessions {
		if other != id {
			unclean = true
			delete(s.sessions, other)
		}
	}
	s.sessions[id] = at
	return unclean, nil
}

func (s *sessionMem) TouchSession(_ context.Context, id string, at time.Time) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.sessions[id] = at
	return nil
}

func (s *sessionMem) EndSession(_ context.Context, id string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.sessions, id)
	return nil
}

// Issue 33, item 2: a process killed at any instant loses the departures it wrote behind in its last
// flush interval. The pacer started after it on the store (which says the one before never closed)
// counts its own start as a departure to every host: a host the dead process sent to within the
// last interval, stored or not, is held its interval from the start. After a Close nothing is held
// but what the store says.
func TestRestartAfterACrashIsADeparture(t *testing.T) {
	for _, crash := range []bool{true, false} {
		t.Run(map[bool]string{true: "crash", false: "clean"}[crash], func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				const floor = 300 * time.Millisecond
				store := newSessionMem()
				opts := []Option{WithStore(store), WithBaseDelay(floor), WithJitter(0)}
				depart := func(p *Pacer, host string) time.Time {
					t.Helper()
					res, release, err := p.Wait(t.Context(), host)
					if err != nil {
						t.Fatal(err)
					}
					release()
					return res.At
				}
				start := time.Now()
				first := NewPacer(opts...)
				depart(first, "seen.test")
				time.Sleep(time.Second + time.Millisecond) // written behind: the store has seen it
				last := depart(first, "seen.test")         // not written yet
				depart(first, "new.test")                  // the store never saw it
				time.Sleep(50 * time.Millisecond)
				if !crash {
					if err := first.Close(); err != nil {
						t.Fatal(err)
					}
				}
				var buf auditBuf
				restart := time.Now()
				second := NewPacer(append(opts, WithLogger(zerolog.New(&buf)))...)
				defer second.Close()
				if crash { // the dead process's write-behind loop must end with the bubble; its session stays
					first.persist.session = nil
					defer first.Close()
				}
				want := map[string]time.Time{"seen.test": last.Add(floor), "new.test": last.Add(floor), "other.test": restart}
				if crash {
					for host := range want {
						want[host] = restart.Add(floor)
					}
				}
				for _, host := range []string{"other.test", "seen.test", "new.test"} { // by the time each may go
					if got := depart(second, host); !got.Equal(want[host]) {
						t.Errorf("%s: first departure after the restart at +%v, want +%v", host, got.Sub(start), want[host].Sub(start))
					}
				}
				if held := findEvent(t, &buf, audit.EventRestartHeld); (held != nil) != crash {
					t.Errorf("restart_held event %v, want one: %v", held, crash)
				}
			})
		})
	}
}

// After a crash, each host is held its own interval from the start: its Crawl-delay, its learnt
// delay, or a later departure or hold the store keeps (explicit instants).
func TestRestartHoldsEachHostItsInterval(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		store := newSessionMem()
		if _, err := store.BeginSession(t.Context(), "killed", time.Now()); err != nil {
			t.Fatal(err)
		}
		now := time.Now()
		_ = store.SaveHosts(t.Context(), []StoredHost{
			{Host: "crawl.test", Version: StateVersion, AdaptiveDelay: time.Second, CrawlDelay: 5 * time.Second, NextDeparture: now.Add(-time.Hour)},
			{Host: "learnt.test", Version: StateVersion, AdaptiveDelay: 3 * time.Second, NextDeparture: now.Add(-time.Hour)},
			{Host: "later.test", Version: StateVersion, AdaptiveDelay: time.Second, NextDeparture: now.Add(4 * time.Second)},
			{Host: "held.test", Version: StateVersion, AdaptiveDelay: time.Second, HoldUntil: now.Add(20 * time.Second), HoldTrigger: audit.TriggerRetryAfter,
				NextDeparture: now.Add(20 * time.Second)},
		})
		p := NewPacer(WithStore(store), WithJitter(0))
		defer p.Close()
		for host, want := range map[string]time.Duration{"crawl.test": 5 * time.Second, "learnt.test": 3 * time.Second, "later.test": 4 * time.Second,
			"held.test": 20 * time.Second, "fresh.test": time.Second} {
			if _, ok := p.AdmitAt(host, now.Add(want-time.Millisecond)); ok {
				t.Errorf("%s admitted %v after the restart, want no sooner than %v", host, want-time.Millisecond, want)
			}
			if res, ok := p.AdmitAt(host, now.Add(want)); !ok {
				t.Errorf("%s not admitted %v after the restart (next at +%v)", host, want, res.At.Sub(now))
			}
		}
	})
}

// A store that cannot say whether the pacer before ended cleanly is taken to say it did not.
func TestRestartHoldsWhenTheStoreCannotSay(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		store := newSessionMem()
		store.fail = true
		var buf auditBuf
		now := time.Now()
		p := NewPacer(WithStore(store), WithJitter(0), WithLogger(zerolog.New(&buf)))
		defer p.Close()
		if _, ok := p.AdmitAt("a.test", now.Add(999*time.Millisecond)); ok {
			t.Error("admitted within the floor of the start")
		}
		if e := findEvent(t, &buf, audit.EventRestartHeld); e == nil || !strings.Contains(e[audit.FieldDetail].(string), "disk I/O error") {
			t.Errorf("restart_held = %v, want one naming the store's error", e)
		}
	})
}

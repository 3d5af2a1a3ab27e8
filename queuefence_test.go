package ext

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/collypace/ext/audit"
	"github.com/gocolly/colly/v2"
	"github.com/rs/zerolog"
)

// fencedFrontier is memFrontier with a store's admission, as redisstore has it: every departure is
// admitted (the pacer's own schedule spaces them here), a departure under a lease only while its
// token is not below the host's fence and its Until has not passed. fence sets a host's fence, as a
// grant to another member would; answerAfter delays every answer (a process paused after the store
// decided).
type fencedFrontier struct {
	*memFrontier
	mu          sync.Mutex
	fences      map[string]int64
	answerAfter time.Duration
	admitted    []string // the hosts of the departures admitted under a lease
}

var (
	_ Frontier    = (*fencedFrontier)(nil)
	_ SharedStore = (*fencedFrontier)(nil)
)

func newFencedFrontier(ttl time.Duration) *fencedFrontier {
	return &fencedFrontier{memFrontier: newMemFrontier(ttl), fences: map[string]int64{}}
}

func (f *fencedFrontier) fence(host string, token int64) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.fences[host] = token
}

func (f *fencedFrontier) Admit(context.Context, string, time.Duration) (Admission, error) {
	return Admission{OK: true}, nil
}

func (f *fencedFrontier) FrontierAdmit(_ context.Context, l Lease, _ time.Duration) (Admission, error) {
	f.mu.Lock()
	fence, wait := f.fences[l.Host], f.answerAfter
	lost := l.Token < fence || !time.Now().Before(l.Until)
	if !lost {
		f.fences[l.Host] = max(fence, l.Token)
		f.admitted = append(f.admitted, l.Host)
	}
	f.mu.Unlock()
	time.Sleep(wait)
	if lost {
		return Admission{LeaseLost: true, Fence: fence}, nil
	}
	return Admission{OK: true}, nil
}

func (f *fencedFrontier) Departed(context.Context, string, time.Duration) error { return nil }
func (f *fencedFrontier) Refused(context.Context, string, uint64) error         { return nil }
func (f *fencedFrontier) CheckLost(context.Context) (bool, error)               { return false, nil }

// takenLeft is how many of host's requests were handed out and not done: they go to its next holder.
func (f *fencedFrontier) takenLeft(host string) int {
	f.memFrontier.mu.Lock()
	defer f.memFrontier.mu.Unlock()
	return len(f.taken[host]) + len(f.queued[host])
}

// fencedCrawl crawls 8 pages of one host every 300 ms with one worker on f, calls after (from the
// collector's OnScraped) once the third page is done, and returns the host's arrivals, the audit trail,
// and the errors OnError saw with whether they were Deferred.
func fencedCrawl(t *testing.T, f *fencedFrontier, after func(c *colly.Collector), opts ...Option) (*fakeHost, *auditBuf, []string) {
	return fencedCrawlOf(t, f, slowPage(10*time.Millisecond), after, opts...)
}

// fencedCrawlOf is fencedCrawl of a host that answers with page.
func fencedCrawlOf(t *testing.T, f *fencedFrontier, page http.HandlerFunc, after func(c *colly.Collector), opts ...Option) (*fakeHost, *auditBuf, []string) {
	n := newFakeNet(t)
	h, base := n.host("a.test", page)
	var buf auditBuf
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	c := colly.NewCollector(colly.StdlibContext(ctx))
	p := AdaptivePacing(c, append([]Option{WithTransport(n.tr), WithJitter(0), WithBaseDelay(300 * time.Millisecond), WithoutRobots(), WithStore(f),
		WithLogger(zerolog.New(&buf))}, opts...)...)
	defer p.Close()
	var errs []string
	c.OnError(func(r *colly.Response, err error) {
		errs = append(errs, fmt.Sprintf("%s deferred %v: %v", r.Request.URL.Path, p.Deferred(r), err))
	})
	scraped := 0
	c.OnScraped(func(*colly.Response) {
		if scraped++; scraped == 3 {
			after(c)
		}
	})
	q := NewQueue(p, 1)
	for i := range 8 {
		if err := q.AddURL(fmt.Sprintf("%s/p/%d", base, i)); err != nil {
			t.Fatal(err)
		}
	}
	if err := q.Run(c); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Run = %v, want the context's end: the host's other requests are its next holder's", err)
	}
	return h, &buf, errs
}

// Issue 33, item 1: a member whose lease passed to another member while it did not look (a pause: its
// renewals say nothing yet) sends nothing more to the host. The store refuses the next departure under
// the old token; the request is neither sent nor marked done, its OnError says Deferred, and the
// requests the member had taken go back to the frontier; fleet_lease_lost says so once, with what it
// gave back.
func TestFleetQueueSendsNothingUnderALeaseThatMoved(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFencedFrontier(2 * time.Second)
		h, buf, errs := fencedCrawl(t, f, func(*colly.Collector) { f.fence("a.test", 1<<40) })
		if got := len(pageArrivals(h)); got != 3 {
			t.Errorf("%d pages sent, want 3: none after the lease moved", got)
		}
		if left := f.takenLeft("a.test"); left != 5 {
			t.Errorf("%d requests left in the frontier, want 5 (none marked done unsent)", left)
		}
		if len(errs) != 1 || !strings.Contains(errs[0], "/p/3 deferred true") || !strings.Contains(errs[0], ErrLeaseLost.Error()) {
			t.Errorf("OnError saw %q, want /p/3, deferred, with the lease lost", errs)
		}
		lost := 0
		for _, e := range events(t, buf) {
			switch audit.Event(e[audit.FieldEvent].(string)) {
			case audit.EventFleetLeaseLost:
				lost++
				if e[audit.FieldTargetDomain] != "a.test" || e[audit.FieldFleetGivenBack] != float64(4) || !strings.Contains(e[audit.FieldDetail].(string), "leased to another member") {
					t.Errorf("fleet_lease_lost = %v, want a.test, 4 given back, the lease moved", e)
				}
			case audit.EventDepartureAbandoned:
				if e[audit.FieldTrigger] != string(audit.TriggerFleet) {
					t.Errorf("departure_abandoned = %v, want trigger fleet", e)
				}
			}
		}
		if lost != 1 {
			t.Errorf("%d fleet_lease_lost events, want 1:\n%s", lost, buf.String())
		}
	})
}

// A member paused after the store admitted its departure (the answer arrives once the lease has run
// out, its renewals paused too) does not send it: the lease no longer holds by its own clock. Nor
// does one paused between its admission and the wire (here, a user's OnRequestHeaders callback that
// outlasts the lease): the transport looks again.
func TestFleetQueueSendsNothingAfterAPauseBeyondItsLease(t *testing.T) {
	for _, where := range []string{"admission", "before the wire"} {
		t.Run(where, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				f := newFencedFrontier(2 * time.Second)
				var paused bool
				h, buf, errs := fencedCrawl(t, f, func(c *colly.Collector) {
					f.memFrontier.mu.Lock()
					f.renewFails = true // the whole process pauses: its heartbeat too
					f.memFrontier.mu.Unlock()
					if where == "admission" {
						f.mu.Lock()
						f.answerAfter = 3 * time.Second
						f.mu.Unlock()
						return
					}
					c.OnRequestHeaders(func(*colly.Request) {
						if !paused {
							paused = true
							time.Sleep(3 * time.Second)
						}
					})
				})
				if got := len(pageArrivals(h)); got != 3 {
					t.Errorf("%d pages sent, want 3: none after the pause", got)
				}
				if left := f.takenLeft("a.test"); left != 5 {
					t.Errorf("%d requests left in the frontier, want 5", left)
				}
				if len(errs) != 1 || !strings.Contains(errs[0], "deferred true") {
					t.Errorf("OnError saw %q, want one request, deferred", errs)
				}
				if findEvent(t, buf, audit.EventFleetLeaseLost) == nil {
					t.Errorf("no fleet_lease_lost event:\n%s", buf.String())
				}
			})
		})
	}
}

// A member paused while a request was in flight, past its lease (its heartbeat paused too), reads on
// resuming an answer that asks for a retry (here a 503 that came once the lease had run out): the
// retry is the frontier's, which hands the request to the host's next holder as it does every request
// taken and not done. The member neither queues it again (a retry is queued even though its key was,
// and was sent a third time after issue 33's 20 s pause, the next holder having sent it already) nor
// marks it done; OnError says Deferred, and fleet_lease_lost says what went back.
func TestFleetQueueLeavesARetryAfterItsLeaseToTheFrontier(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFencedFrontier(2 * time.Second)
		page := func(w http.ResponseWriter, r *http.Request) {
			if r.URL.Path == "/p/3" {
				time.Sleep(3 * time.Second) // the member's lease runs out meanwhile
				w.WriteHeader(http.StatusServiceUnavailable)
				return
			}
			time.Sleep(10 * time.Millisecond)
		}
		h, buf, errs := fencedCrawlOf(t, f, page, func(*colly.Collector) {
			f.memFrontier.mu.Lock()
			f.renewFails = true // the whole process pauses: its heartbeat too
			f.memFrontier.mu.Unlock()
		})
		if got := len(pageArrivals(h)); got != 4 {
			t.Errorf("%d pages sent, want 4: /p/3 once, nothing after its lease ended", got)
		}
		f.memFrontier.mu.Lock()
		var handedOut, queued int
		for _, d := range f.taken["a.test"] {
			if strings.HasSuffix(d.URL, "/p/3") {
				handedOut++
			}
		}
		for _, d := range f.queued["a.test"] {
			if strings.HasSuffix(d.URL, "/p/3") {
				queued++
			}
		}
		f.memFrontier.mu.Unlock()
		if handedOut != 1 || queued != 0 {
			t.Errorf("/p/3 in the frontier: handed out %d, queued again %d; want still handed out (its next holder is handed it again), not queued", handedOut, queued)
		}
		if len(errs) != 1 || !strings.Contains(errs[0], "/p/3 deferred true") {
			t.Errorf("OnError saw %q, want /p/3, deferred", errs)
		}
		if findEvent(t, buf, audit.EventFleetLeaseLost) == nil {
			t.Errorf("no fleet_lease_lost event:\n%s", buf.String())
		}
	})
}

// A lease's token and ends, as a Queue keeps them: it holds until its local end (never later than the
// frontier's), or until it is marked lost, and the first reason stays.
func TestFleetLeaseHolds(t *testing.T) {
	l := newFleetLease(Lease{Host: "a.test", Token: 7, Until: t0.Add(2 * time.Second)}, t0, 2*time.Second)
	if ok, _ := l.holds(t0.Add(1999 * time.Millisecond)); !ok {
		t.Error("a lease does not hold before its end")
	}
	if ok, why := l.holds(t0.Add(2 * time.Second)); ok || !strings.Contains(why, "ran out") {
		t.Errorf("at its end: holds %v (%s), want ran out", ok, why)
	}
	l = newFleetLease(Lease{Host: "a.test", Token: 7, Until: t0.Add(2 * time.Second)}, t0, 2*time.Second)
	l.renewed(t0.Add(3*time.Second), t0.Add(time.Second), 2*time.Second)
	if ok, _ := l.holds(t0.Add(2500 * time.Millisecond)); !ok {
		t.Error("a renewed lease does not hold past its first end")
	}
	if got := l.lease(); got.Token != 7 || !got.Until.Equal(t0.Add(3*time.Second)) {
		t.Errorf("lease() = %+v, want token 7 until t0+3s", got)
	}
	l.markLost("moved")
	l.markLost("later reason")
	if ok, why := l.holds(t0); ok || why != "moved" {
		t.Errorf("a lost lease: holds %v (%s), want the first reason", ok, why)
	}
}

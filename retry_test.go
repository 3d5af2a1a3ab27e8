package ext

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/collypace/ext/audit"
	"github.com/gocolly/colly/v2"
	"github.com/rs/zerolog"
)

// refusingHost answers 429 + Retry-After: 1 to every page request.
func refusingHost(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path == "/robots.txt" {
		http.NotFound(w, r)
		return
	}
	w.Header().Set("Retry-After", "1")
	w.WriteHeader(http.StatusTooManyRequests)
}

// refuseOnce answers 429 + Retry-After: 1 to the first request of each key (method, path and body),
// then 200 with a page; it records every key it receives, in order.
type refuseOnce struct {
	mu   sync.Mutex
	seen []string
}

func (s *refuseOnce) serve(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path == "/robots.txt" {
		http.NotFound(w, r)
		return
	}
	body, _ := io.ReadAll(r.Body)
	key := strings.TrimSpace(r.Method + " " + r.URL.Path + " " + string(body))
	s.mu.Lock()
	first := !slices.Contains(s.seen, key)
	s.seen = append(s.seen, key)
	s.mu.Unlock()
	if first && r.URL.Path != "/" {
		w.Header().Set("Retry-After", "1")
		w.WriteHeader(http.StatusTooManyRequests)
		return
	}
	fmt.Fprint(w, "<html><body>ok</body></html>")
}

func (s *refuseOnce) count(key string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for _, k := range s.seen {
		if k == key {
			n++
		}
	}
	return n
}

// Two requests to one URL are two requests: a POST with another body, and a revisit of a GET, made
// from the same page (so sharing its Context), each refused once, each leave and are retried on their own.
func TestRetryDoesNotDropAnotherRequestToTheSameURL(t *testing.T) {
	for _, async := range []bool{true, false} {
		t.Run(fmt.Sprintf("async=%v", async), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				n := newFakeNet(t)
				srv := &refuseOnce{}
				_, base := n.host("search.test", srv.serve)
				c, _ := pacedCollector(n, WithBaseDelay(100*time.Millisecond), WithoutRobots())
				c.Async = async
				c.AllowURLRevisit = true
				c.OnResponse(func(r *colly.Response) {
					if r.Request.URL.Path != "/" {
						return
					}
					_ = r.Request.Post(base+"/search", map[string]string{"q": "a"})
					_ = r.Request.Post(base+"/search", map[string]string{"q": "b"})
					_ = r.Request.Visit(base + "/x")
					_ = r.Request.Visit(base + "/x")
				})
				_ = c.Visit(base + "/")
				c.Wait()
				for key, want := range map[string]int{"POST /search q=a": 2, "POST /search q=b": 2, "GET /x": 3} {
					if got := srv.count(key); got != want {
						t.Errorf("%q reached the host %d times, want %d (arrivals %v)", key, got, want, srv.seen)
					}
				}
			})
		})
	}
}

// The ordinary Colly retry line, an OnError that calls Retry on every error, ends: the copy of a
// refusal the pacer retries is dropped before it leaves and never reaches OnError again.
func TestUnguardedRetryInOnErrorEnds(t *testing.T) {
	for _, async := range []bool{true, false} {
		t.Run(fmt.Sprintf("async=%v", async), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				n := newFakeNet(t)
				srv := &refuseOnce{}
				_, base := n.host("retry.test", srv.serve)
				var buf auditBuf
				c, _ := pacedCollector(n, WithBaseDelay(100*time.Millisecond), WithoutRobots(), WithLogger(zerolog.New(&buf)))
				c.Async = async
				var errs atomic.Int32
				c.OnError(func(r *colly.Response, _ error) {
					if errs.Add(1) < 100 { // bounded, so that a regression fails rather than hangs
						_ = r.Request.Retry()
					}
				})
				_ = c.Visit(base + "/p/0")
				c.Wait()
				if got := errs.Load(); got != 1 {
					t.Errorf("OnError ran %d times, want 1 (the refusal; its duplicate is dropped silently)", got)
				}
				if got := srv.count("GET /p/0"); got != 2 {
					t.Errorf("the host saw %d requests, want 2 (the refusal and the pacer's retry)", got)
				}
				if findEvent(t, &buf, audit.EventRetryDuplicate) == nil {
					t.Error("no retry_duplicate event for the dropped copy")
				}
			})
		})
	}
}

// The README's advice works as written: an OnError that retries only when !pacer.Retrying(resp), on
// the final failure, sends its retry (1 + MaxRetries + 1 arrivals), and sees that retry's failure as
// final in its turn: the pacer does not retry past its bound.
func TestGuardedRetryAfterPacerGivesUpIsSent(t *testing.T) {
	for _, async := range []bool{true, false} {
		t.Run(fmt.Sprintf("async=%v", async), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				n := newFakeNet(t)
				h, base := n.host("refusing.test", refusingHost)
				c, p := pacedCollector(n, WithBaseDelay(100*time.Millisecond), WithoutRobots(), WithMaxRetries(2))
				c.Async = async
				var finals, userRetries atomic.Int32
				c.OnError(func(r *colly.Response, _ error) {
					if p.Retrying(r) {
						return
					}
					finals.Add(1)
					if userRetries.Add(1) == 1 {
						_ = r.Request.Retry()
					}
				})
				_ = c.Visit(base + "/p/0")
				c.Wait()
				if got := len(h.log()); got != 4 {
					t.Errorf("the host saw %d requests, want 4 (1 + 2 pacer retries + the user's)", got)
				}
				if got := finals.Load(); got != 2 {
					t.Errorf("OnError saw %d final failures, want 2 (the pacer's last, then the user's retry)", got)
				}
			})
		})
	}
}

// An OnError callback with its own limit of 3 that calls Retry on every refusal shares the pacer's
// counter while the pacer retries: in Async mode a refused URL reaches the host 1 + 3 times, not
// 1 + 3 + 3. In sync mode Colly runs the pacer's retries inside its OnError, so the callback first
// sees the final failure, with its own count at 0: its three retries come after the pacer's.
func TestUserRetryDoesNotDoubleRetries(t *testing.T) {
	for _, tc := range []struct {
		async bool
		want  int
	}{{true, 4}, {false, 7}} {
		t.Run(fmt.Sprintf("async=%v", tc.async), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				n := newFakeNet(t)
				h, base := n.host("refusing.test", refusingHost)
				c, _ := pacedCollector(n, WithBaseDelay(100*time.Millisecond), WithoutRobots())
				c.Async = tc.async
				c.OnError(func(r *colly.Response, err error) {
					tries, _ := r.Ctx.GetAny("user_tries").(int)
					if tries < 3 {
						r.Ctx.Put("user_tries", tries+1)
						_ = r.Request.Retry()
					}
				})
				_ = c.Visit(base + "/p/0") // in sync mode, the refusal's error
				c.Wait()
				if got := len(h.log()); got != tc.want {
					t.Errorf("%d arrivals for one refused URL, want %d", got, tc.want)
				}
			})
		})
	}
}

// An OnError registered before AdaptivePacing would see refusals before the pacer decides on them:
// that is reported once, in the audit trail and to WithAlert. Registered after, nothing is reported.
func TestOnErrorBeforePacerIsReported(t *testing.T) {
	for _, before := range []bool{true, false} {
		t.Run(fmt.Sprintf("before=%v", before), func(t *testing.T) {
			var buf auditBuf
			var alerts []Alert
			c := colly.NewCollector()
			if before {
				c.OnError(func(*colly.Response, error) {})
			}
			AdaptivePacing(c, WithLogger(zerolog.New(&buf)), WithAlert(func(a Alert) { alerts = append(alerts, a) }))
			c.OnError(func(*colly.Response, error) {})
			ev := findEvent(t, &buf, audit.EventCallbacksBeforePacer)
			if (ev != nil) != before || (len(alerts) == 1) != before {
				t.Errorf("event %v, alerts %v; want reported = %v", ev, alerts, before)
			}
			if before && alerts[0].Event != audit.EventCallbacksBeforePacer {
				t.Errorf("alert %v, want %s", alerts[0], audit.EventCallbacksBeforePacer)
			}
		})
	}
}

// A request whose wait the crawl's end cut short reaches OnError with an error that wraps
// context.Canceled; a Retry of it is dropped (the crawl is over), so OnError is not entered again.
func TestCancelledWaitIsNotAFailure(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		n := newFakeNet(t)
		h, base := n.host("cancel.test", slowPage(0))
		c, p := pacedCollector(n, WithBaseDelay(10*time.Second), WithoutRobots())
		ctx, cancel := context.WithCancel(t.Context())
		c.Context = ctx
		var cancelled, other atomic.Int32
		c.OnError(func(r *colly.Response, err error) {
			if errors.Is(err, context.Canceled) && !p.Retrying(r) {
				cancelled.Add(1)
			} else {
				other.Add(1)
			}
			_ = r.Request.Retry()
		})
		go func() {
			time.Sleep(time.Second)
			cancel()
		}()
		visitAll(t, c, base, 3)
		if got := len(h.log()); got != 1 {
			t.Errorf("server saw %d requests, want only the first", got)
		}
		if cancelled.Load() != 2 || other.Load() != 0 {
			t.Errorf("OnError saw %d cancelled waits and %d other errors, want 2 and 0", cancelled.Load(), other.Load())
		}
	})
}

// The fate of an attempt decides what a copy of it is: a duplicate while the pacer retries it, the
// user's own (and counted) once the pacer gave up; the pacer's bound counts every attempt sent; a new
// request sharing the header map but not the URL is not a copy.
func TestTriesDecideAndClaim(t *testing.T) {
	now := time.Unix(1000, 0)
	u, _ := url.Parse("http://a.test/p")
	other, _ := url.Parse("http://a.test/q")
	req := func(h http.Header, u *url.URL) *colly.Request {
		return &colly.Request{Method: "GET", URL: u, Headers: &h}
	}
	var tr tries
	first := req(http.Header{}, u)
	if !tr.claim(first, now) {
		t.Fatal("a new request was refused")
	}
	r1, n, ok := tr.decide(first, 2, now)
	if !ok || n != 1 {
		t.Fatalf("decide = %d, %v; want retry 1", n, ok)
	}
	own := req(http.Header{}, u)
	tr.follow(*own.Headers, target(own), r1, now)
	if tr.claim(req(*first.Headers, u), now) {
		t.Error("a copy of an attempt the pacer retries was let go")
	}
	if !tr.claim(req(*first.Headers, other), now) {
		t.Error("a new request to another URL sharing the header map was dropped")
	}
	if !tr.claim(own, now) {
		t.Error("the pacer's own copy was refused")
	}
	if _, n, ok := tr.decide(own, 2, now); !ok || n != 2 {
		t.Errorf("second decide = %d, %v; want retry 2", n, ok)
	}
	third := req(http.Header{}, u)
	tr.follow(*third.Headers, target(third), r1, now)
	if _, n, ok := tr.decide(third, 2, now); ok || n != 2 {
		t.Errorf("decide at the bound = %d, %v; want no retry after 2", n, ok)
	}
	if !tr.claim(third, now) {
		t.Error("the user's retry after the pacer gave up was dropped")
	}
	if got := tr.retriesOf(*third.Headers); got != 3 {
		t.Errorf("retries after the user's retry = %d, want 3", got)
	}
	rebuilt := req(http.Header{}, u)
	tr.adopt(*rebuilt.Headers, 2, now)
	if !tr.claim(rebuilt, now) || tr.retriesOf(*rebuilt.Headers) != 2 {
		t.Errorf("a rebuilt request's carried count was not adopted: %d", tr.retriesOf(*rebuilt.Headers))
	}
	tr.forget(*rebuilt.Headers)
	if got := tr.retriesOf(*rebuilt.Headers); got != 0 {
		t.Errorf("a forgotten attempt still counts %d retries", got)
	}
}

// Requests made with Collector.Request and one header map shared by several URLs are several
// requests: after one of them is refused and retried, the others still leave.
func TestSharedHeaderMapIsNotARetry(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		n := newFakeNet(t)
		srv := &refuseOnce{}
		_, base := n.host("shared.test", srv.serve)
		c, _ := pacedCollector(n, WithBaseDelay(100*time.Millisecond), WithoutRobots())
		c.Async = false
		shared := http.Header{"Accept": {"text/html"}}
		for i := range 3 {
			_ = c.Request("GET", fmt.Sprintf("%s/p/%d", base, i), nil, nil, shared)
		}
		c.Wait()
		for i := range 3 {
			if got := srv.count(fmt.Sprintf("GET /p/%d", i)); got != 2 {
				t.Errorf("/p/%d reached the host %d times, want 2 (refused once, retried)", i, got)
			}
		}
	})
}

// A request rebuilt from a capture (a deferral, the Queue) goes on counting its attempts: the count it
// carries is adopted for its new header map before it is sent, never put in its Context, and the
// method and URL Colly gives it in OnRequest become its own.
func TestRebuiltRequestKeepsItsRetryCount(t *testing.T) {
	p := NewPacer(WithMaxRetries(2))
	c := colly.NewCollector()
	d := DeferredRequest{Host: "a.test", Method: "GET", URL: "http://a.test", Ctx: map[string]string{retriesCtxKey: "2", "k": "v"}}
	r, err := p.buildRequest(c, d)
	if err != nil {
		t.Fatal(err)
	}
	if got := r.Ctx.Get(retriesCtxKey); got != "" {
		t.Errorf("the retry count reached the request's Context: %q", got)
	}
	if r.Ctx.Get("k") != "v" {
		t.Error("the request's own Context values were not kept")
	}
	sent, _ := url.Parse("http://a.test/") // as Colly normalizes it
	if !p.tries.claim(&colly.Request{Method: "GET", URL: sent, Headers: r.Headers}, t0) {
		t.Fatal("the rebuilt request was dropped")
	}
	if _, n, ok := p.tries.decide(&colly.Request{Method: "GET", URL: sent, Headers: r.Headers}, 2, t0); ok || n != 2 {
		t.Errorf("decide after a refusal = retry %d, %v; want no retry: 2 were sent before the capture", n, ok)
	}
}

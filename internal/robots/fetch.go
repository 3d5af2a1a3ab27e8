package robots

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"sync"
	"time"

	"github.com/collypace/ext/internal/robotstxt"
)

// Reading robots.txt from its origin through the pacer's transport, its network time bounded apart
// from its wait for a departure slot.

// FetchTimeout bounds the network part of one robots.txt fetch: each hop from its departure to its
// response, and the body. The wait for its departure slot is not counted (a Crawl-delay, a Retry-After
// window or the backoff of an unavailable robots.txt would otherwise read as an unreachable host),
// whatever the transport.
const FetchTimeout = 10 * time.Second

// MaxRedirects is how many redirects a robots.txt fetch follows (RFC 9309 §2.3.1.2: at least five).
const MaxRedirects = 5

// errNoAnswer is why a robots.txt fetch is cut off: no answer within FetchTimeout. It is a deadline
// (a transport error, a refusal like any timeout), not the crawler cancelling.
var errNoAnswer = fmt.Errorf("no answer within %v: %w", FetchTimeout, context.DeadlineExceeded)

// fetchKey marks the context of the pacer's own robots.txt fetch; its value is the fetch's *clock.
type fetchKey struct{}

// Fetching reports whether ctx is that of the pacer's own robots.txt fetch.
func Fetching(ctx context.Context) bool { return ctx.Value(fetchKey{}) != nil }

// Departed tells the robots.txt fetch ctx belongs to, if it is one, that a hop departed: its network
// time counts from here. It reports whether ctx is a robots.txt fetch's.
func Departed(ctx context.Context) bool {
	c, ok := ctx.Value(fetchKey{}).(*clock)
	if ok {
		c.arm()
	}
	return ok
}

// get fetches origin's robots.txt through rt (the pacer's transport: a departure like any other) and
// returns its status and (size-limited) body.
func get(ctx context.Context, rt http.RoundTripper, origin, agent string) (int, []byte, error) {
	// Time the network, not the wait for a departure slot, whatever the transport: each hop from its
	// departure (the pacer's transport arms the clock the fetch's context carries: Departed) to its end
	// (the body, for the last one). The countdown pauses when a hop goes to the pacer.
	clock := &clock{}
	ctx, cancel := context.WithCancelCause(context.WithValue(ctx, fetchKey{}, clock))
	defer cancel(nil)
	clock.cancel = cancel
	defer clock.stop()
	hop := roundTrip(func(r *http.Request) (*http.Response, error) {
		clock.pause()
		return rt.RoundTrip(r)
	})
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, origin+"/robots.txt", nil)
	if err != nil {
		return 0, nil, err
	}
	if agent != "" {
		req.Header.Set("User-Agent", agent)
	}
	client := &http.Client{
		Transport: hop,
		CheckRedirect: func(_ *http.Request, via []*http.Request) error {
			if len(via) > MaxRedirects {
				return http.ErrUseLastResponse
			}
			return nil
		},
	}
	resp, err := client.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, robotstxt.MaxBody+1))
	return resp.StatusCode, body, err
}

type roundTrip func(*http.Request) (*http.Response, error)

func (f roundTrip) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// clock cuts a robots.txt fetch off after FetchTimeout of network time. The fetch's context carries
// it (fetchKey), for the pacer's transport to arm when a hop departs (Departed).
type clock struct {
	mu     sync.Mutex // protects timer
	timer  *time.Timer
	cancel context.CancelCauseFunc
}

// arm starts (or restarts) the countdown.
func (c *clock) arm() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.timer == nil {
		c.timer = time.AfterFunc(FetchTimeout, func() { c.cancel(errNoAnswer) })
		return
	}
	c.timer.Reset(FetchTimeout)
}

// pause stops the countdown until the next arm.
func (c *clock) pause() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.timer != nil {
		c.timer.Stop()
	}
}

func (c *clock) stop() { c.pause() }

package ext

import (
	"context"
	"errors"
	"net"
	"net/http"
	"syscall"
	"testing"
	"testing/synctest"
	"time"

	"github.com/collypace/ext/audit"
	"github.com/gocolly/colly/v2"
	"github.com/rs/zerolog"
)

// A host that cannot be reached at all (connection refused, a name that does not resolve) fails its
// requests at once: OnError gets the network's error, not "Aborted before Do Request", and nothing waits
// for a robots.txt that no retry will reach soon.
func TestUnreachableHostFailsFast(t *testing.T) {
	closed, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	refused := "http://" + closed.Addr().String()
	closed.Close()
	noName := &http.Transport{DialContext: func(context.Context, string, string) (net.Conn, error) {
		return nil, &net.OpError{Op: "dial", Net: "tcp", Err: &net.DNSError{Err: "no such host", Name: "misspelt.example", IsNotFound: true}}
	}}
	for _, tc := range []struct {
		name, url string
		tr        http.RoundTripper
		is        func(error) bool
	}{
		{"connection refused", refused + "/", http.DefaultTransport, func(err error) bool { return errors.Is(err, syscall.ECONNREFUSED) }},
		{"no such host", "http://misspelt.example/", noName, func(err error) bool {
			var dns *net.DNSError
			return errors.As(err, &dns) && dns.IsNotFound
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second) // a bound, not a measure
			defer cancel()
			c := colly.NewCollector()
			c.Context = ctx
			p := AdaptivePacing(c, WithTransport(tc.tr))
			var got error
			c.OnError(func(r *colly.Response, err error) {
				if !p.Retrying(r) && !p.Deferred(r) {
					got = err
				}
			})
			for range 2 { // the second request fails from what the first learnt
				got = nil
				_ = c.Visit(tc.url)
				if ctx.Err() != nil {
					t.Fatal("the request waited for the bound instead of failing")
				}
				if got == nil || !tc.is(got) || errors.Is(got, colly.ErrAbortedBeforeRequest) {
					t.Fatalf("OnError got %v, want the network's error", got)
				}
				c.AllowURLRevisit = true
			}
		})
	}
}

// roundTripFunc is a RoundTripper that is not an *http.Transport.
type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// The robots.txt timeout counts the network time of each hop, from its departure, whatever the
// transport: a read that waits 20 s in the pacer (a restored Retry-After window) is not cut off at 10 s
// as an unanswered robots.txt, through a wrapping RoundTripper as through an *http.Transport.
func TestRobotsTimeoutCountsFromDepartureWithAnyTransport(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		n := newFakeNet(t)
		h, base := n.host("held.test", robotsSite(http.StatusOK, "User-agent: *\nCrawl-delay: 2\n", nil))
		for _, tr := range []http.RoundTripper{n.tr, roundTripFunc(n.tr.RoundTrip)} {
			t0 := time.Now()
			store := newMemoryStore()
			held := StoredHost{Host: "held.test", Version: StateVersion, AdaptiveDelay: time.Second,
				HoldUntil: t0.Add(20 * time.Second), HoldTrigger: audit.TriggerRetryAfter}
			if err := store.SaveHosts(t.Context(), []StoredHost{held}); err != nil {
				t.Fatal(err)
			}
			var buf auditBuf
			c := colly.NewCollector()
			p := AdaptivePacing(c, WithTransport(tr), WithJitter(0), WithStore(store), WithLogger(zerolog.New(&buf)))
			if err := c.Visit(base + "/"); err != nil {
				t.Errorf("%T: Visit: %v", tr, err)
			}
			if e := findEvent(t, &buf, audit.EventRobotsUnavailable); e != nil {
				t.Errorf("%T: robots.txt read as unavailable: %v", tr, e[audit.FieldDetail])
			}
			if s, _ := p.Host("held.test"); s.CrawlDelay != 2*time.Second {
				t.Errorf("%T: Crawl-delay %v, want the 2s robots.txt asks for", tr, s.CrawlDelay)
			}
			var read time.Time
			for _, a := range h.log() {
				if a.path == "/robots.txt" {
					read = a.at
				}
			}
			if read.Before(t0.Add(20 * time.Second)) {
				t.Errorf("%T: robots.txt read at t0+%v, inside the window", tr, read.Sub(t0))
			}
			p.Close()
		}
	})
}

package ext

import (
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptrace"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/collypace/ext/audit"
	"github.com/gocolly/colly/v2"
	"github.com/rs/zerolog"
)

// requestRecorder answers every request with an empty 200 and keeps the requests it saw.
type requestRecorder struct {
	mu   sync.Mutex
	seen []*http.Request
}

func (r *requestRecorder) RoundTrip(req *http.Request) (*http.Response, error) {
	r.mu.Lock()
	r.seen = append(r.seen, req)
	r.mu.Unlock()
	return &http.Response{StatusCode: http.StatusOK, Header: http.Header{}, Body: io.NopCloser(strings.NewReader("")), Request: req}, nil
}

// Colly's client Timeout (10 s by default) bounds a request to a host that never answers: the pacer's
// transport waits on the request's context, which net/http ends at the client's deadline, and the user's
// OnError sees a timeout. The pacer relies on no net/http heuristic for it (issue 34): its RoundTripper
// is installed under its own type.
func TestClientTimeoutEndsHangingRequest(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		n := newFakeNet(t)
		_, base := n.host("hang.test", func(w http.ResponseWriter, r *http.Request) {
			if r.URL.Path == "/robots.txt" {
				http.NotFound(w, r)
				return
			}
			select { // no answer until the client gives up (or an hour, so the bubble always ends)
			case <-r.Context().Done():
			case <-time.After(time.Hour):
			}
		})
		c, p := pacedCollector(n, WithBaseDelay(0), WithMaxRetries(0))
		var (
			mu    sync.Mutex
			fails []error
		)
		c.OnResponse(func(*colly.Response) { t.Error("a page arrived from a host that never answers") })
		c.OnError(func(_ *colly.Response, err error) {
			mu.Lock()
			defer mu.Unlock()
			fails = append(fails, err)
		})
		if err := c.Visit(base + "/page"); err != nil {
			t.Fatal(err)
		}
		c.Wait()
		_ = p.Close()
		if len(fails) != 1 {
			t.Fatalf("OnError saw %d errors (%v), want the one request's", len(fails), fails)
		}
		var ne net.Error
		if !errors.As(fails[0], &ne) || !ne.Timeout() {
			t.Errorf("OnError saw %v, want a timeout", fails[0])
		}
	})
}

// The pacer traces a hop (a ClientTrace on its context, so net/http copies the request) only when the
// host's next departure counts from its wire instant: with an interval. Without one it is not traced,
// and its departure is still audited, with its URL.
func TestHopTracedOnlyWhenAnIntervalCountsFromIt(t *testing.T) {
	for _, tc := range []struct {
		base   time.Duration
		traced bool
	}{{0, false}, {time.Millisecond, true}} {
		inner := &requestRecorder{}
		var buf auditBuf
		c := colly.NewCollector()
		AdaptivePacing(c, WithTransport(inner), WithoutRobots(), WithBaseDelay(tc.base), WithJitter(0), WithLogger(zerolog.New(&buf)))
		if err := c.Visit("http://trace.test/page"); err != nil {
			t.Fatal(err)
		}
		if len(inner.seen) != 1 {
			t.Fatalf("base %v: %d requests reached the inner transport, want 1", tc.base, len(inner.seen))
		}
		trace := httptrace.ContextClientTrace(inner.seen[0].Context())
		if got := trace != nil && trace.WroteHeaders != nil; got != tc.traced {
			t.Errorf("base %v: hop traced %v, want %v", tc.base, got, tc.traced)
		}
		departures := 0
		for _, e := range events(t, &buf) {
			if e[audit.FieldEvent] == string(audit.EventDelayApplied) && e[audit.FieldURL] == "http://trace.test/page" {
				departures++
			}
		}
		if departures != 1 {
			t.Errorf("base %v: %d departure events for the page, want 1", tc.base, departures)
		}
	}
}

package ext

import (
	"io"
	"net/http"
	"net/http/httptrace"
	"strings"
	"sync"
	"testing"
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

// Colly's client has a Timeout: net/http enforces it on the request's context for the pacer's
// transport, as it does for its own, rather than with a goroutine, a timer and the deprecated
// Request.Cancel per request. The inner transport sees the deadline on the context and no Cancel.
func TestClientTimeoutOnTheContext(t *testing.T) {
	inner := &requestRecorder{}
	c := colly.NewCollector()
	AdaptivePacing(c, WithTransport(inner), WithoutRobots(), WithBaseDelay(0))
	before := time.Now()
	if err := c.Visit("http://timeout.test/page"); err != nil {
		t.Fatal(err)
	}
	if len(inner.seen) != 1 {
		t.Fatalf("%d requests reached the inner transport, want 1", len(inner.seen))
	}
	req := inner.seen[0]
	//lint:ignore SA1019 the test checks that net/http leaves the deprecated field unset
	if req.Cancel != nil {
		t.Error("the request carries a Cancel channel: net/http treats the pacer's transport as one that ignores contexts")
	}
	deadline, ok := req.Context().Deadline()
	if !ok || deadline.Before(before.Add(9*time.Second)) || deadline.After(time.Now().Add(10*time.Second)) {
		t.Errorf("context deadline %v (set: %v), want Colly's 10 s client timeout from the request", deadline, ok)
	}
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

package auditreport

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/collypace/ext"
	"github.com/collypace/ext/audit"
	"github.com/gocolly/colly/v2"
	"github.com/rs/zerolog"
)

const crawlPages = 6

// crawlTrail crawls a loopback server that publishes a Crawl-delay of 100 ms and answers one page 429
// with Retry-After: 1 once, paced by ext.AdaptivePacing, and returns the audit trail and the server's
// host key. The trail is made once and shared by the tests.
var crawlTrail = sync.OnceValues(func() ([]byte, string) {
	var mu sync.Mutex
	refused := false
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/robots.txt" {
			fmt.Fprint(w, "User-agent: *\nCrawl-delay: 0.1\n")
			return
		}
		var n int
		fmt.Sscanf(r.URL.Path, "/p/%d", &n)
		mu.Lock()
		refuse := n == 2 && !refused
		refused = refused || refuse
		mu.Unlock()
		if refuse {
			w.Header().Set("Retry-After", "1")
			w.WriteHeader(http.StatusTooManyRequests)
			return
		}
		w.Header().Set("Content-Type", "text/html")
		fmt.Fprint(w, "<html><body>")
		for i := 0; i < crawlPages; i++ {
			fmt.Fprintf(w, `<a href="/p/%d">%d</a>`, i, i)
		}
		fmt.Fprint(w, "</body></html>")
	}))
	defer srv.Close()
	var audit bytes.Buffer
	c := colly.NewCollector(colly.Async(true))
	c.IgnoreRobotsTxt = false
	ext.AdaptivePacing(c, ext.WithBaseDelay(50*time.Millisecond), ext.WithJitter(0.1), ext.WithMaxInFlight(2),
		ext.WithLogger(zerolog.New(zerolog.SyncWriter(&audit))), ext.WithPipelineID("loopback"))
	c.OnHTML("a[href]", func(e *colly.HTMLElement) { _ = e.Request.Visit(e.Attr("href")) })
	_ = c.Visit(srv.URL + "/p/0")
	c.Wait()
	return audit.Bytes(), srv.Listener.Addr().String() // every request has ended: nothing writes any more
})

func checkBytes(t *testing.T, tol Tolerance, trails ...[]byte) *Report {
	t.Helper()
	tr := &Trail{}
	for i, b := range trails {
		if err := tr.Read(bytes.NewReader(b), fmt.Sprintf("trail%d.jsonl", i+1)); err != nil {
			t.Fatal(err)
		}
	}
	return Check(tr, tol)
}

// A real crawl of a loopback server, with a Retry-After and a Crawl-delay, reports no violation.
func TestRealCrawlIsClean(t *testing.T) {
	trail, key := crawlTrail()
	r := checkBytes(t, DefaultTolerance, trail)
	var md bytes.Buffer
	if err := r.WriteMarkdown(&md); err != nil {
		t.Fatal(err)
	}
	if !r.OK() || len(r.Warnings) > 0 {
		t.Errorf("violations or skipped lines in a real crawl's trail:\n%s\n%s", md.String(), trail)
	}
	h := r.host(key)
	if h == nil {
		t.Fatalf("no host %s in the report:\n%s", key, md.String())
	}
	// robots.txt, six pages, one of them twice.
	if len(h.Departures) < crawlPages+1 {
		t.Errorf("%d departures, want at least %d:\n%s", len(h.Departures), crawlPages+1, md.String())
	}
	if len(h.Windows) != 1 || !h.hasConstraint(ConstraintCrawlDelay) {
		t.Errorf("want one Retry-After window and the Crawl-delay in force, got %d windows, %+v", len(h.Windows), h.Constraints)
	}
	// Schema 2: every departure names its URL, every window its start and end (the core writes them).
	if h.WithoutURL > 0 {
		t.Errorf("%d of %d departures lack url/interval_ms", h.WithoutURL, len(h.Departures))
	}
	for _, w := range h.Windows {
		if w.Derived {
			t.Errorf("window %s lacks window_start/window_end", w.Source)
		}
	}
}

func (r *Report) host(key string) *Host {
	for _, h := range r.Hosts {
		if h.Key == key {
			return h
		}
	}
	return nil
}

func (h *Host) hasConstraint(name string) bool {
	for _, c := range h.Constraints {
		if c.Name == name {
			return true
		}
	}
	return false
}

// mutate rewrites the timestamp of the n-th departure (from 0) of a trail to at(previous departure,
// window start).
func mutate(t *testing.T, trail []byte, n int, at func(prev, windowStart time.Time) time.Time) ([]byte, time.Time) {
	t.Helper()
	tr := &Trail{}
	if err := tr.Read(bytes.NewReader(trail), "crawl.jsonl"); err != nil {
		t.Fatal(err)
	}
	var prev, start, moved time.Time
	for _, e := range tr.Events {
		if w, ok := window(e); ok && start.IsZero() {
			start = w.Start
		}
	}
	var out bytes.Buffer
	i := 0
	for _, l := range bytes.Split(bytes.TrimSpace(trail), []byte("\n")) {
		var m map[string]any
		if err := json.Unmarshal(l, &m); err != nil {
			t.Fatal(err)
		}
		if m[audit.FieldEvent] == string(audit.EventDelayApplied) {
			ts, _ := time.Parse(time.RFC3339Nano, m[audit.FieldTimestamp].(string))
			if i == n {
				moved = at(prev, start)
				m[audit.FieldTimestamp] = moved.Format(time.RFC3339Nano)
			}
			prev = ts
			i++
		}
		b, _ := json.Marshal(m)
		out.Write(append(b, '\n'))
	}
	if moved.IsZero() {
		t.Fatalf("the trail has no departure %d or no window", n)
	}
	return out.Bytes(), moved
}

// The same real trail with one departure moved inside the Retry-After window, or one gap cut under the
// Crawl-delay, reports that departure: host, time and (when the trail records it) URL.
func TestRealCrawlTampered(t *testing.T) {
	trail, key := crawlTrail()
	for _, tc := range []struct {
		name string
		n    int // which departure
		at   func(prev, windowStart time.Time) time.Time
		what string
	}{
		// Departure 6 is the first after the window (robots.txt, five pages, the window, the retry).
		{"inside the window", 6, func(_, ws time.Time) time.Time { return ws.Add(200 * time.Millisecond) }, "window"},
		{"under the Crawl-delay", 3, func(prev, _ time.Time) time.Time { return prev.Add(60 * time.Millisecond) }, ConstraintCrawlDelay},
	} {
		t.Run(tc.name, func(t *testing.T) {
			bad, moved := mutate(t, trail, tc.n, tc.at)
			r := checkBytes(t, DefaultTolerance, bad)
			var found *Violation
			for i, v := range r.Violations {
				if v.Host == key && v.At.Equal(moved) && strings.Contains(v.What, tc.what) {
					found = &r.Violations[i]
				}
			}
			if found == nil {
				t.Fatalf("no violation %q of %s at %s; got %v", tc.what, key, FormatTime(moved), r.Violations)
			}
			if !strings.Contains(found.String(), key) || !strings.Contains(found.String(), FormatTime(moved)) {
				t.Errorf("%q does not name the host and the time", found)
			}
			if found.URL == "" {
				t.Errorf("%q does not name the URL: the trail's departures lack %s", found, audit.FieldURL)
			}
		})
	}
}

// The real trail split line by line between two "processes" is, merged, the same clean schedule.
func TestRealCrawlSplitAndMerged(t *testing.T) {
	trail, key := crawlTrail()
	var a, b bytes.Buffer
	for i, l := range bytes.SplitAfter(trail, []byte("\n")) {
		if i%2 == 0 {
			a.Write(l)
		} else {
			b.Write(l)
		}
	}
	whole, merged := checkBytes(t, DefaultTolerance, trail), checkBytes(t, DefaultTolerance, a.Bytes(), b.Bytes())
	if !merged.OK() || len(merged.host(key).Departures) != len(whole.host(key).Departures) {
		t.Errorf("merged: %v, %d departures, want %d", merged.Violations, len(merged.host(key).Departures), len(whole.host(key).Departures))
	}
}

package scenario

import (
	"context"
	"io"
	"net/http"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

var hrefRE = regexp.MustCompile(`href="([^"]+)"`)

func startHost(t *testing.T, cfg HostConfig) *Host {
	t.Helper()
	h, err := Start(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(h.Close)
	return h
}

func newClient(t *testing.T) *http.Client {
	tr := &http.Transport{}
	t.Cleanup(tr.CloseIdleConnections)
	return &http.Client{Transport: tr, Timeout: 5 * time.Second}
}

func get(t *testing.T, c *http.Client, url string) (*http.Response, string) {
	t.Helper()
	resp, err := c.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp, string(body)
}

// TestCrawlFollowsLinks crawls a host breadth-first and checks every page is reached and logged.
func TestCrawlFollowsLinks(t *testing.T) {
	h := startHost(t, HostConfig{Name: "graph", Pages: 17, Links: 2, Robots: "User-agent: *\n"})
	c := newClient(t)
	if !strings.HasPrefix(h.URL(), "http://127.0.0.1:") || h.URL() != "http://"+h.Key() {
		t.Fatalf("URL %q, key %q", h.URL(), h.Key())
	}
	if resp, body := get(t, c, h.URL()+RobotsPath); resp.StatusCode != 200 || body != "User-agent: *\n" {
		t.Fatalf("robots.txt: %d %q", resp.StatusCode, body)
	}
	seen := map[string]bool{"/": true}
	queue := []string{"/"}
	for len(queue) > 0 && len(seen) <= h.Pages() { // bounded by the page count
		p := queue[0]
		queue = queue[1:]
		resp, body := get(t, c, h.URL()+p)
		if resp.StatusCode != 200 || resp.Header.Get("Date") == "" {
			t.Fatalf("%s: %d, Date %q", p, resp.StatusCode, resp.Header.Get("Date"))
		}
		for _, m := range hrefRE.FindAllStringSubmatch(body, -1) {
			if !seen[m[1]] {
				seen[m[1]] = true
				queue = append(queue, m[1])
			}
		}
	}
	if len(seen) != 17 {
		t.Fatalf("reached %d pages, want 17", len(seen))
	}
	a := h.Arrivals()
	if len(a) != 18 || a[0].Path != RobotsPath || Refused(a) != 0 || PagesOK(a) != 17 || len(PageRequests(a)) != 17 {
		t.Fatalf("arrivals %d (first %q), refused %d, pages OK %d", len(a), a[0].Path, Refused(a), PagesOK(a))
	}
	for i := 1; i < len(a); i++ {
		if a[i].At.Before(a[i-1].At) {
			t.Fatalf("arrivals not sorted at %d", i)
		}
	}
}

func TestSkewedDateOverHTTP(t *testing.T) {
	h := startHost(t, HostConfig{ClockSkew: time.Hour, RetryAfterDate: true,
		Refusals: []Refusal{{Status: 503, First: 1, RetryAfter: 5 * time.Second}}})
	before := time.Now()
	resp, _ := get(t, newClient(t), h.URL()+"/")
	date, err := http.ParseTime(resp.Header.Get("Date"))
	if err != nil {
		t.Fatal(err)
	}
	skew := date.Sub(before)
	if resp.StatusCode != 503 || skew < 59*time.Minute || skew > 61*time.Minute {
		t.Fatalf("status %d, Date %v is %v from local time, want 503 and about +1h", resp.StatusCode, date, skew)
	}
	ra, err := http.ParseTime(resp.Header.Get("Retry-After"))
	if err != nil {
		t.Fatal(err)
	}
	if d := ra.Sub(date); d < 5*time.Second || d > 7*time.Second {
		t.Fatalf("Retry-After - Date = %v, want 5–7 s", d)
	}
	w := h.Windows()
	if len(w) != 1 || !w[0].Until.Equal(ra.Add(-time.Hour)) || InsideWindows(h.Arrivals(), w) != 0 {
		t.Fatalf("windows %+v", w)
	}
}

// TestCloseCutsLatency checks Close interrupts a long latency wait, logs status 0 and leaks nothing.
func TestCloseCutsLatency(t *testing.T) {
	base := runtime.NumGoroutine()
	h, err := Start(HostConfig{Latency: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	tr := &http.Transport{}
	errc := make(chan error, 1)
	go func() {
		resp, err := (&http.Client{Transport: tr}).Get(h.URL() + "/")
		if err == nil {
			resp.Body.Close()
		}
		errc <- err
	}()
	for i := 0; i < 5000 && !requested(h); i++ { // the handler is waiting within 5 s
		time.Sleep(time.Millisecond)
	}
	if !requested(h) {
		t.Fatal("request never arrived")
	}
	closed := make(chan struct{})
	go func() { h.Close(); close(closed) }()
	select {
	case <-closed:
	case <-time.After(5 * time.Second):
		t.Fatal("Close did not cut the latency short")
	}
	if err := <-errc; err == nil {
		t.Error("the client got a response from a closed host")
	}
	tr.CloseIdleConnections()
	if a := h.Arrivals(); len(a) != 1 || a[0].Status != 0 {
		t.Errorf("arrivals %+v, want one with status 0", a)
	}
	h.Close() // idempotent
	n := runtime.NumGoroutine()
	for i := 0; i < 500 && n > base; i++ { // connection goroutines exit within 5 s
		time.Sleep(10 * time.Millisecond)
		n = runtime.NumGoroutine()
	}
	if n > base {
		buf := make([]byte, 1<<16)
		t.Errorf("%d goroutines, %d before:\n%s", n, base, buf[:runtime.Stack(buf, true)])
	}
}

// TestClientGoneCutsLatency checks a client's cancel ends the handler's wait.
func TestClientGoneCutsLatency(t *testing.T) {
	h := startHost(t, HostConfig{Latency: time.Hour})
	ctx, cancel := context.WithCancel(context.Background())
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, h.URL()+"/", nil)
	if err != nil {
		t.Fatal(err)
	}
	go func() {
		for i := 0; i < 5000 && !requested(h); i++ {
			time.Sleep(time.Millisecond)
		}
		cancel()
	}()
	if _, err := newClient(t).Do(req); err == nil {
		t.Fatal("want a canceled request")
	}
	for i := 0; i < 5000 && len(h.Arrivals()) == 0; i++ {
		time.Sleep(time.Millisecond)
	}
	if a := h.Arrivals(); len(a) != 1 || a[0].Status != 0 {
		t.Fatalf("arrivals %+v, want one with status 0", a)
	}
}

func requested(h *Host) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.st.requests > 0
}

func TestDemoSite(t *testing.T) {
	s, err := DemoSite()
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	c := newClient(t)
	if len(s.Hosts) != len(DemoConfigs()) {
		t.Fatalf("%d hosts", len(s.Hosts))
	}
	for _, h := range s.Hosts {
		resp, body := get(t, c, h.URL()+RobotsPath)
		if h.Name() == "crawl-delay" {
			if resp.StatusCode != 200 || !strings.Contains(body, "Crawl-delay: 2") {
				t.Errorf("crawl-delay robots.txt: %d %q", resp.StatusCode, body)
			}
		} else if resp.StatusCode != 404 {
			t.Errorf("%s robots.txt: %d, want 404", h.Name(), resp.StatusCode)
		}
	}
	if resp, _ := get(t, c, s.Host("quota").URL()+"/"); resp.Header.Get("X-RateLimit-Limit") != "10" {
		t.Errorf("quota headers %v", resp.Header)
	}
	if s.Host("nope") != nil {
		t.Error("Host of an unknown name")
	}
}

// TestSentAndAnswered checks that the host logs the client's send time and when a refusal was answered.
func TestSentAndAnswered(t *testing.T) {
	h := startHost(t, HostConfig{Pages: 2, Capacity: &Capacity{Rate: 0.1, Burst: 1, RetryAfter: time.Second}})
	c := newClient(t)
	sent := time.Now()
	for range 2 {
		req, err := http.NewRequest(http.MethodGet, h.URL()+"/", nil)
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set(SentHeader, strconv.FormatInt(sent.UnixNano(), 10))
		resp, err := c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
	}
	a := h.Arrivals()
	if len(a) != 2 || !a[0].Sent.Equal(sent) || a[1].Status != http.StatusTooManyRequests {
		t.Fatalf("arrivals %+v, want two sent at %v, the second refused", a, sent)
	}
	w := h.Windows()
	if len(w) != 1 || w[0].Answered.Before(w[0].Issued) {
		t.Fatalf("windows %+v, want one answered after it was issued", w)
	}
	if got := sentAt(http.Header{SentHeader: {"x"}}); !got.IsZero() {
		t.Errorf("a malformed header parsed as %v", got)
	}
}

// TestQueueWaitLogged: two pages sent together to a host with one worker; the server logs that the
// later one waited for the earlier one's service, and it starts exactly when that service ends.
func TestQueueWaitLogged(t *testing.T) {
	const service = 500 * time.Millisecond
	h := startHost(t, HostConfig{Pages: 2, Workers: 1, Latency: service})
	c := newClient(t)
	var wg sync.WaitGroup
	for i := range 2 {
		wg.Go(func() {
			if resp, err := c.Get(h.PageURL(i)); err == nil {
				resp.Body.Close()
			}
		})
	}
	wg.Wait()
	a := h.Arrivals()
	if len(a) != 2 || a[0].Status != 200 || a[1].Status != 200 {
		t.Fatalf("arrivals %+v, want two pages served 200", a)
	}
	first, second := a[0], a[1]
	if first.QueueWait > second.QueueWait {
		first, second = second, first
	}
	if first.QueueWait != 0 || !second.At.Add(second.QueueWait).Equal(first.At.Add(service)) {
		t.Errorf("waits %v and %v: want the first served at once and the second when its service ends (%v after it arrived)",
			first.QueueWait, second.QueueWait, service)
	}
}

// TestFlakyTimeoutOverHTTP checks a Flaky timeout answers nothing: the client's own timeout ends it,
// the arrival is logged with status 0, and the retry is served.
func TestFlakyTimeoutOverHTTP(t *testing.T) {
	h := startHost(t, HostConfig{Flaky: &Flaky{Fraction: 1, Kinds: []FlakyKind{FlakyTimeout}}})
	c := newClient(t)
	c.Timeout = 100 * time.Millisecond
	if resp, err := c.Get(h.URL() + "/"); err == nil {
		resp.Body.Close()
		t.Fatalf("first attempt answered %d, want a timeout", resp.StatusCode)
	}
	c.Timeout = 10 * time.Second
	if resp, body := get(t, c, h.URL()+"/"); resp.StatusCode != http.StatusOK || body == "" {
		t.Fatalf("retry: %d, want 200 with a page", resp.StatusCode)
	}
	for i := 0; i < 5000 && len(h.Arrivals()) < 2; i++ {
		time.Sleep(time.Millisecond)
	}
	if a := h.Arrivals(); len(a) != 2 || a[0].Status != 0 || a[1].Status != http.StatusOK {
		t.Fatalf("arrivals %+v, want a dropped one, then one served", a)
	}
}

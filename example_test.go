package ext_test

import (
	"context"
	"fmt"
	"log"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/collypace/ext"
	"github.com/gocolly/colly/v2"
)

// site serves pages (path → HTML) and 404 for anything else, robots.txt included.
func site(pages map[string]string) *httptest.Server {
	return httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, ok := pages[r.URL.Path]
		if !ok {
			http.NotFound(w, r)
			return
		}
		w.Header().Set("Content-Type", "text/html")
		fmt.Fprint(w, body)
	}))
}

// A collector paced at one request every 20 ms per host: the pacer spaces the starts of requests,
// whatever the response time, and shows each host's interval and what sets it.
func ExampleAdaptivePacing() {
	srv := site(map[string]string{
		"/":  `<a href="/a">a</a> <a href="/b">b</a>`,
		"/a": `<a href="/c">c</a>`,
		"/b": `no links`,
		"/c": `<a href="/">home</a>`,
	})
	defer srv.Close()

	c := colly.NewCollector()
	pacer := ext.AdaptivePacing(c, // right after NewCollector, before your callbacks
		ext.WithBaseDelay(20*time.Millisecond), // the floor: never faster than this per host
		ext.WithJitter(0),                      // no random extra, for a fixed interval
	)
	c.OnHTML("a[href]", func(e *colly.HTMLElement) { e.Request.Visit(e.Attr("href")) })
	c.OnResponse(func(r *colly.Response) { fmt.Println(r.StatusCode, r.Request.URL.Path) })
	if err := c.Visit(srv.URL + "/"); err != nil {
		log.Fatal(err)
	}
	c.Wait()

	for _, h := range pacer.Hosts() { // one host here: 127.0.0.1 and the server's port
		fmt.Println(h.Interval, h.Trigger, h.Refusals)
	}
	// Output:
	// 200 /
	// 200 /a
	// 200 /c
	// 200 /b
	// 20ms base 0
}

// The host-aware Queue crawls two hosts with two workers: each worker takes the request whose host
// can depart soonest, so neither waits on one host while the other is ready.
func ExampleQueue() {
	a := site(map[string]string{"/1": "a1", "/2": "a2", "/3": "a3"})
	defer a.Close()
	b := site(map[string]string{"/1": "b1", "/2": "b2"})
	defer b.Close()

	c := colly.NewCollector() // a Queue needs a synchronous collector: its workers are the goroutines
	pacer := ext.AdaptivePacing(c, ext.WithBaseDelay(20*time.Millisecond))
	var mu sync.Mutex
	var fetched []string
	c.OnResponse(func(r *colly.Response) {
		mu.Lock()
		defer mu.Unlock()
		fetched = append(fetched, string(r.Body))
	})

	q := ext.NewQueue(pacer, 2)
	for _, u := range []string{a.URL + "/1", a.URL + "/2", a.URL + "/3", b.URL + "/1", b.URL + "/2"} {
		if err := q.AddURL(u); err != nil {
			log.Fatal(err)
		}
	}
	if err := q.Run(c); err != nil { // returns once the queue is empty
		log.Fatal(err)
	}

	slices.Sort(fetched) // the two hosts' pages interleave as the schedule allows
	fmt.Println(fetched, q.Size())
	// Output: [a1 a2 a3 b1 b2] 0
}

// Wait and Observe pace any HTTP client. A 429 with Retry-After holds the host: no request departs
// before the window (here 2 s plus the 10% safety buffer) ends, and the adaptive delay doubles.
// The explicit-time forms (ObserveAt, HostAt, AdmitAt) show the schedule without waiting for it.
func ExamplePacer_Wait() {
	var calls atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if calls.Add(1) == 1 {
			w.Header().Set("Retry-After", "2")
			w.WriteHeader(http.StatusTooManyRequests)
			return
		}
		fmt.Fprint(w, "ok")
	}))
	defer srv.Close()
	client := srv.Client()

	pacer := ext.NewPacer(ext.WithBaseDelay(100*time.Millisecond), ext.WithJitter(0))
	u, err := url.Parse(srv.URL)
	if err != nil {
		log.Fatal(err)
	}
	host := ext.DefaultHostKey(u)

	res, release, err := pacer.Wait(context.Background(), host) // the first request departs at once
	if err != nil {
		log.Fatal(err)
	}
	resp, err := client.Get(srv.URL)
	if err != nil {
		log.Fatal(err)
	}
	resp.Body.Close()
	release()
	now := time.Now()
	v := pacer.ObserveAt(res, ext.Outcome{Status: resp.StatusCode, Header: resp.Header, Latency: now.Sub(res.At)}, now)
	fmt.Println(resp.StatusCode, "refused:", v.Refused, "retry:", v.Retry)

	st, _ := pacer.HostAt(host, now)
	fmt.Println("held for", st.RetryAfterUntil.Sub(now), "by", st.Trigger)
	fmt.Println("adaptive delay", st.AdaptiveDelay)

	_, ok := pacer.AdmitAt(host, now.Add(2*time.Second))
	fmt.Println("may depart 2s later:", ok)
	_, ok = pacer.AdmitAt(host, now.Add(2200*time.Millisecond))
	fmt.Println("may depart 2.2s later:", ok)
	// Output:
	// 429 refused: true retry: true
	// held for 2.2s by retry_after
	// adaptive delay 150ms
	// may depart 2s later: false
	// may depart 2.2s later: true
}

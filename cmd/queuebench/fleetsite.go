package main

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
)

// hostClass is a kind of host in the fleet crawl: how many, how often each may be sent to (its
// floor, set by a host policy), how long each answers, and how many pages each has.
type hostClass struct {
	Name     string
	Hosts    int
	Interval time.Duration
	Latency  time.Duration
	Pages    int
	URLLen   int // each page's URL padded to this many characters (0: "http://<host>/p/<n>", about 25)
}

// fleetHost is the key of host i of class c ("c<class>-h<i>.test"); the host policies match by class.
func fleetHost(c, i int) string { return fmt.Sprintf("c%d-h%03d.test", c, i) }

// fleetURLs lists every page of the crawl, host by host in turns.
func fleetURLs(classes []hostClass) []string {
	var out []string
	for c, hc := range classes {
		for i := range hc.Hosts {
			for p := range hc.Pages {
				out = append(out, pageURL(hc, c, i, p))
			}
		}
	}
	return out
}

// pageURL is the URL of page p of host i of class c, padded to hc.URLLen characters.
func pageURL(hc hostClass, c, i, p int) string {
	u := fmt.Sprintf("http://%s/p/%d", fleetHost(c, i), p)
	if pad := hc.URLLen - len(u) - 1; pad > 0 {
		u += "/" + strings.Repeat("x", pad)
	}
	return u
}

// fleetArrival is one page request as the servers saw it.
type fleetArrival struct {
	url    string
	worker int       // the process that sent it (its X-Queuebench-Worker header)
	at     time.Time // when it arrived
	done   time.Time // when its answer was written (zero while serving)
}

// fleetSite is one loopback server playing every host of the crawl, told apart by the Host header:
// each page answers after its class's latency, and every arrival is logged.
type fleetSite struct {
	srv     *httptest.Server
	classes []hostClass

	mu       sync.Mutex // protects arrivals
	arrivals []*fleetArrival
}

// workerHeader names, in each request, the process that sent it.
const workerHeader = "X-Queuebench-Worker"

func startFleetSite(classes []hostClass) *fleetSite {
	s := &fleetSite{classes: classes}
	s.srv = httptest.NewServer(http.HandlerFunc(s.serve))
	return s
}

func (s *fleetSite) serve(w http.ResponseWriter, r *http.Request) {
	host := strings.TrimSuffix(r.Host, ":80")
	var c, i int
	if _, err := fmt.Sscanf(host, "c%d-h%d.test", &c, &i); err != nil || c < 0 || c >= len(s.classes) {
		http.NotFound(w, r)
		return
	}
	worker, _ := strconv.Atoi(r.Header.Get(workerHeader))
	a := &fleetArrival{url: "http://" + host + r.URL.Path, worker: worker, at: time.Now()}
	s.mu.Lock()
	s.arrivals = append(s.arrivals, a)
	s.mu.Unlock()
	if r.URL.Path == "/robots.txt" {
		fmt.Fprint(w, fleetRobotsTxt)
		return
	}
	time.Sleep(s.classes[c].Latency)
	fmt.Fprint(w, "<html><body>page</body></html>")
	s.mu.Lock()
	a.done = time.Now()
	s.mu.Unlock()
}

// log returns a copy of the arrivals, by arrival time.
// waitFirst returns once a page sent by process worker has arrived, or at deadline, or when ctx ends.
func (s *fleetSite) waitFirst(ctx context.Context, worker int, deadline time.Time) {
	for ctx.Err() == nil && time.Now().Before(deadline) {
		s.mu.Lock()
		arrived := slices.ContainsFunc(s.arrivals, func(a *fleetArrival) bool { return a.worker == worker })
		s.mu.Unlock()
		if arrived {
			return
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func (s *fleetSite) log() []fleetArrival {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]fleetArrival, len(s.arrivals))
	for i, a := range s.arrivals {
		out[i] = *a
	}
	slices.SortFunc(out, func(a, b fleetArrival) int { return a.at.Compare(b.at) })
	return out
}

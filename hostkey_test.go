package ext

import (
	"fmt"
	"sort"
	"testing"
	"testing/synctest"
	"time"
)

// Two hosts under one registrable domain share one schedule with ByRegistrableDomain, measured at the
// servers; each keeps its own robots.txt, and the schedule keeps the larger Crawl-delay of the two.
func TestRegistrableDomainSharesOneSchedule(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		n := newFakeNet(t)
		a, baseA := n.host("a.example.test", robotsSite(200, "User-agent: *\nCrawl-delay: 2\n", nil))
		b, baseB := n.host("b.example.test", robotsSite(200, "User-agent: *\nAllow: /\n", nil))
		c, p := pacedCollector(n, WithBaseDelay(time.Second), WithHostKey(ByRegistrableDomain))
		for i := range 4 {
			for _, base := range []string{baseA, baseB} {
				if err := c.Visit(fmt.Sprintf("%s/p/%d", base, i)); err != nil {
					t.Fatal(err)
				}
				if i == 0 && base == baseA {
					// a.example.test's robots.txt is read first, whatever order the Async visits'
					// goroutines would run in: from then on its Crawl-delay paces both names.
					synctest.Wait()
				}
			}
		}
		c.Wait()
		var all []arrival
		for _, h := range []*fakeHost{a, b} {
			log := h.log()
			robots := 0
			for _, x := range log {
				if x.path == "/robots.txt" {
					robots++
				}
			}
			if robots != 1 || len(log) != 5 {
				t.Errorf("%s: %d robots.txt fetches, %d requests; want its own robots.txt once and 4 pages", h.name, robots, len(log))
			}
			all = append(all, log...)
		}
		sort.SliceStable(all, func(i, j int) bool { return all[i].at.Before(all[j].at) })
		for i := 1; i < len(all); i++ {
			// The first two departures are the robots.txt of each host: the Crawl-delay is known once
			// a.example.test's is read, and applies from the next departure on.
			want := 2 * time.Second
			if i == 1 {
				want = time.Second
			}
			if gap := all[i].at.Sub(all[i-1].at); gap < want {
				t.Errorf("gap %d between %s and %s at the servers = %v, want ≥ %v (one schedule, the larger Crawl-delay)", i, all[i-1].path, all[i].path, gap, want)
			}
		}
		if st, ok := p.Host("example.test"); !ok || st.CrawlDelay != 2*time.Second {
			t.Errorf("host example.test: %+v %v, want one host with the Crawl-delay of 2s", st, ok)
		}
	})
}

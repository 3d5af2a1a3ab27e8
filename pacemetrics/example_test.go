package pacemetrics_test

import (
	"bufio"
	"fmt"
	"log"
	"net/http"
	"net/http/httptest"
	"strings"
	"time"

	"github.com/collypace/ext"
	"github.com/collypace/ext/pacemetrics"
	"github.com/gocolly/colly/v2"
)

// A crawler with adaptive pacing whose metrics are served on /metrics.
func Example() {
	c := colly.NewCollector(colly.Async(true))
	m := pacemetrics.New(pacemetrics.WithTopHosts(20)) // the 20 busiest hosts get series of their own
	pacer := ext.AdaptivePacing(c, ext.WithObserver(m))
	m.Watch(pacer)

	http.Handle("/metrics", m.Handler()) // or prometheus.MustRegister(m)
	go func() { log.Println(http.ListenAndServe("127.0.0.1:9090", nil)) }()

	c.OnHTML("a[href]", func(e *colly.HTMLElement) { e.Request.Visit(e.Attr("href")) })
	c.Visit("https://example.org/")
	c.Wait()
}

// Hosts get series of their own while places are free, then the busiest keep them; the others count
// under host="other".
func ExampleCollector_Handler() {
	m := pacemetrics.New(pacemetrics.WithTopHosts(1))
	m.Departed("a.example", time.Second)
	m.Departed("a.example", time.Second)
	m.Departed("b.example", time.Second)
	scrape := func() {
		rec := httptest.NewRecorder()
		m.Handler().ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/metrics", nil))
		sc := bufio.NewScanner(rec.Body)
		for sc.Scan() {
			if strings.HasPrefix(sc.Text(), "collypace_departures_total") {
				fmt.Println(sc.Text())
			}
		}
	}
	scrape() // a.example took the free place at its first event; b.example counts under "other"
	m.Departed("a.example", time.Second)
	m.Departed("b.example", time.Second)
	fmt.Println("--")
	scrape()
	// Output:
	// collypace_departures_total{host="a.example"} 2
	// collypace_departures_total{host="other"} 1
	// --
	// collypace_departures_total{host="a.example"} 3
	// collypace_departures_total{host="other"} 2
}

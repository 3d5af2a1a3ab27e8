// Command quickstart is the README's quick start, kept here so that it compiles: a test checks that
// the README shows this file as it is.
package main

import (
	"context"
	"errors"
	"fmt"
	"log"
	"os"
	"time"

	"github.com/collypace/ext"
	"github.com/gocolly/colly/v2"
	"github.com/rs/zerolog"
)

func main() {
	auditFile, err := os.Create("audit.jsonl")
	if err != nil {
		log.Fatal(err)
	}
	defer auditFile.Close()

	c := colly.NewCollector(colly.Async(true), colly.AllowedDomains("example.org"))
	pacer := ext.AdaptivePacing(c, // right after NewCollector, before your callbacks
		ext.WithBaseDelay(500*time.Millisecond), // the floor: never faster than this per host
		ext.WithLogger(zerolog.New(auditFile)),  // the audit trail, one JSON object per line
	)
	c.OnHTML("a[href]", func(e *colly.HTMLElement) { e.Request.Visit(e.Attr("href")) })
	c.OnError(func(r *colly.Response, err error) {
		// Retrying: the pacer sends it again; Deferred: its host is parked, it is kept; Canceled: the crawl ended.
		if !pacer.Retrying(r) && !pacer.Deferred(r) && !errors.Is(err, context.Canceled) {
			log.Printf("gave up on %s: %v", r.Request.URL, err)
		}
	})
	c.Visit("https://example.org/")
	c.Wait()
	for _, h := range pacer.Hosts() {
		fmt.Println(h.Host, h.Interval, h.Trigger)
	}
}

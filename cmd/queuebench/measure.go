package main

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"strings"
	"sync/atomic"
	"time"

	"github.com/collypace/ext"
	"github.com/gocolly/colly/v2"
	"github.com/gocolly/colly/v2/queue"
)

// mode is a way to run the crawl.
type mode string

const (
	collyQueue mode = "Colly queue + AdaptivePacing"
	hostQueue  mode = "ext.Queue (host-aware)"
)

// result is one run's measurements, at the server.
type result struct {
	mode        mode
	pages       int64
	refused     int64         // pages answered 429, each retried
	wall        time.Duration // from the start to the last page served
	peakGorout  int           // goroutines running Colly code (workers, or one per request in Async mode), sampled
	boundedStop bool          // stopped at cfg.bound before the end
}

// measure crawls every URL of a fresh site with the given queue.
func measure(ctx context.Context, cfg config, m mode) (result, error) {
	s := startSite(cfg)
	defer s.srv.Close()
	tr := s.transport()
	defer tr.CloseIdleConnections()

	ctx, cancel := context.WithTimeout(ctx, cfg.bound)
	defer cancel()
	// Colly's revisit check stays on: a refused URL must come back as a retry, not be dropped as visited.
	c := colly.NewCollector(colly.StdlibContext(ctx))
	p := ext.AdaptivePacing(c, ext.WithTransport(tr), ext.WithBaseDelay(cfg.baseDelay), ext.WithJitter(0),
		ext.WithMaxDelay(cfg.crawlDelay), ext.WithMaxCrawlDelay(2*cfg.crawlDelay))
	defer p.Close()

	var peak atomic.Int64
	stop := make(chan struct{})
	sampled := make(chan struct{})
	go func() {
		defer close(sampled)
		t := time.NewTicker(200 * time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-stop:
				return
			case <-t.C:
				if g := int64(crawlerGoroutines(m)); g > peak.Load() {
					peak.Store(g)
				}
			}
		}
	}()

	start := time.Now()
	var err error
	switch m {
	case collyQueue:
		var q *queue.Queue
		if q, err = queue.New(cfg.workers, &queue.InMemoryQueueStorage{MaxSize: len(s.urls()) + 1}); err == nil {
			for _, u := range s.urls() {
				if err = q.AddURL(u); err != nil {
					break
				}
			}
			if err == nil {
				go func() { <-ctx.Done(); q.Stop() }()
				err = q.Run(c)
			}
		}
	case hostQueue:
		q := ext.NewQueue(p, cfg.workers)
		for _, u := range s.urls() {
			if err = q.AddURL(u); err != nil {
				break
			}
		}
		if err == nil {
			if err = q.Run(c); ctx.Err() != nil && errors.Is(err, ctx.Err()) {
				err = nil // a bounded stop with URLs left: reported as boundedStop
			}
		}
	}
	close(stop)
	<-sampled
	if err != nil {
		return result{}, fmt.Errorf("%s: %w", m, err)
	}
	r := result{mode: m, pages: s.pages.Load(), refused: s.refused.Load(), peakGorout: int(peak.Load()), boundedStop: ctx.Err() != nil}
	if last := s.last.Load(); last > 0 {
		r.wall = time.Unix(0, last).Sub(start)
	}
	return r, nil
}

// crawlerGoroutines counts the goroutines of run m that have a Colly request in their stack: the
// crawl's own, not the connections' or the server's, and not the other run's (told apart by the
// queue's frames: both runs share this process).
func crawlerGoroutines(m mode) int {
	marker := "gocolly/colly/v2/queue.independentRunner"
	if m == hostQueue {
		marker = "collypace/ext.(*Queue).Run"
	}
	buf := make([]byte, 8<<20)
	buf = buf[:runtime.Stack(buf, true)]
	n := 0
	for _, g := range strings.Split(string(buf), "\n\n") {
		if strings.Contains(g, marker) && strings.Contains(g, "gocolly/colly/v2.(*Collector).fetch") {
			n++
		}
	}
	return n
}

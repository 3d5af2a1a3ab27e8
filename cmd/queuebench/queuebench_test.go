package main

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"
)

// A small run of both queues: every page served, those refused once too (issue 10 item 16: the
// host-aware queue lost them), the crawl's goroutines bounded by the workers, and the table printed. Times are not asserted (2 noisy cores): the benchmark program reports them.
func TestQueuesFetchEverything(t *testing.T) {
	cfg := config{hosts: 30, slow: 2, refusing: 2, pages: 3, workers: 3, crawlDelay: 300 * time.Millisecond,
		baseDelay: 20 * time.Millisecond, bound: time.Minute}
	for _, m := range []mode{hostQueue, collyQueue} {
		r, err := measure(context.Background(), cfg, m)
		if err != nil {
			t.Fatal(err)
		}
		if r.pages != int64(cfg.hosts*cfg.pages) || r.boundedStop {
			t.Errorf("%s: %d pages (stopped at the bound: %v), want %d", m, r.pages, r.boundedStop, cfg.hosts*cfg.pages)
		}
		if r.refused != int64(cfg.refusing) {
			t.Errorf("%s: %d pages refused, want %d (one per refusing host)", m, r.refused, cfg.refusing)
		}
		if r.peakGorout > cfg.workers {
			t.Errorf("%s: %d goroutines running requests, want at most the %d workers", m, r.peakGorout, cfg.workers)
		}
	}
	var out bytes.Buffer
	writeTable(&out, cfg, []result{{mode: hostQueue, pages: 90, wall: time.Second}})
	if !strings.Contains(out.String(), "| ext.Queue (host-aware) | 90 / 90 |") {
		t.Errorf("table:\n%s", out.String())
	}
}

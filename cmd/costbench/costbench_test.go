package main

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"
)

// A small run: every page of both crawls is fetched (crawl fails otherwise) and the table printed.
// Costs are not asserted (2 noisy cores): the program reports them.
func TestCostbenchFetchesEverything(t *testing.T) {
	var out bytes.Buffer
	if err := run(context.Background(), config{pages: 300, hosts: 10, runs: 1, bound: time.Minute}, &out); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"| bare Colly |", "| paced Colly |", "paced / bare CPU:", "allocations and", "connections per crawl", "paired: "} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("no %q in the report:\n%s", want, out.String())
		}
	}
}

// The paired ratio is the median of each round's own ratio, per request: a round run at half speed
// weighs as much as any other.
func TestPairedRatioIsTheMedianOfEachRoundsRatio(t *testing.T) {
	bare := []sample{{cpu: 100, pages: 1}, {cpu: 400, pages: 2}, {cpu: 300, pages: 1}}
	paced := []sample{{cpu: 110, pages: 1}, {cpu: 180, pages: 1}, {cpu: 310, pages: 1}}
	// Per request: 1.10, 180/200 = 0.90, 310/300 ≈ 1.033.
	if got := pairedRatio(bare, paced); got < 1.033 || got > 1.034 {
		t.Errorf("paired ratio %.4f, want the middle round's 1.033", got)
	}
}

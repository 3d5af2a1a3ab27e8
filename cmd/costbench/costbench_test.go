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
	for _, want := range []string{"| bare Colly |", "| paced Colly |", "paced / bare CPU:", "allocations and"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("no %q in the report:\n%s", want, out.String())
		}
	}
}

package main

import (
	"bytes"
	"context"
	"flag"
	"io"
	"os"
	"strings"
	"testing"
)

// TestDefaultsInFreshDirectory runs what a newcomer runs first, `go run ./example_crawler`
// with no flags, in a directory holding nothing yet. Its relative default paths for the state file and
// the audit trail must work, and the demo crawl must finish.
func TestDefaultsInFreshDirectory(t *testing.T) {
	t.Chdir(t.TempDir())
	fs := flag.NewFlagSet("example_crawler", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	o, err := parseFlags(fs, nil)
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	if err := run(context.Background(), o, &out); err != nil {
		t.Fatalf("run with the default flags: %v\n%s", err, out.String())
	}
	if !strings.Contains(out.String(), "summary: crawl finished") {
		t.Errorf("the demo crawl did not finish:\n%s", out.String())
	}
	if !strings.Contains(out.String(), "No violation") {
		t.Errorf("the pace report found a violation in the demo crawl:\n%s", out.String())
	}
	for _, f := range []string{o.state, o.audit, "audit.html"} {
		if fi, err := os.Stat(f); err != nil || fi.Size() == 0 {
			t.Errorf("%s after the crawl: %v", f, err)
		}
	}
}

package main

import (
	"flag"
	"io"
	"os"
	"testing"
)

func TestParseFlags(t *testing.T) {
	tests := []struct {
		args    []string
		out, md string
	}{
		{nil, "docs/bench", "BENCHMARKS.md"},
		{[]string{"-short"}, "", ""},                                  // a short run leaves the committed report alone…
		{[]string{"-scenarios", "outage"}, "", ""},                    // …and so does a subset…
		{[]string{"-short", "-out", "x", "-md", "y.md"}, "x", "y.md"}, // …unless asked
	}
	for _, tt := range tests {
		fs := flag.NewFlagSet("pacebench", flag.ContinueOnError)
		fs.SetOutput(io.Discard)
		o, err := parseFlags(fs, tt.args)
		if err != nil || o.out != tt.out || o.md != tt.md {
			t.Errorf("%q: out %q, md %q, err %v; want %q, %q", tt.args, o.out, o.md, err, tt.out, tt.md)
		}
	}
	fs := flag.NewFlagSet("pacebench", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	if _, err := parseFlags(fs, []string{"-format", "gif"}); err == nil {
		t.Error("-format gif should be refused")
	}
}

// TestParseFlagsLongReal: -long picks the long size and leaves the committed report alone; -real
// selects the real limiters, besides the scenarios named; -short and -long exclude each other.
func TestParseFlagsLongReal(t *testing.T) {
	tests := []struct {
		args      []string
		size      size
		scenarios string
		md        string
	}{
		{[]string{"-long"}, sizeLong, "all", ""},
		{[]string{"-real"}, sizeFull, "real", ""},
		{[]string{"-real", "-scenarios", "quota"}, sizeFull, "quota,real", ""},
		{[]string{"-long", "-real"}, sizeLong, "real", ""},
		{[]string{"-long", "-md", "LONG.md"}, sizeLong, "all", "LONG.md"},
	}
	for _, tt := range tests {
		fs := flag.NewFlagSet("pacebench", flag.ContinueOnError)
		fs.SetOutput(io.Discard)
		o, err := parseFlags(fs, tt.args)
		if err != nil || o.size() != tt.size || o.scenarios != tt.scenarios || o.md != tt.md {
			t.Errorf("%q: size %v, scenarios %q, md %q, err %v; want %v, %q, %q", tt.args, o.size(), o.scenarios, o.md, err, tt.size, tt.scenarios, tt.md)
		}
	}
	fs := flag.NewFlagSet("pacebench", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	if _, err := parseFlags(fs, []string{"-short", "-long"}); err == nil {
		t.Error("-short -long should be refused")
	}
}

// TestMain lets the test binary serve as a fleet worker, as the pacebench binary does: the fleet
// scenarios re-execute os.Executable().
func TestMain(m *testing.M) {
	if isWorker(os.Args) {
		os.Exit(workerMain(os.Stdin, os.Stdout, os.Stderr))
	}
	os.Exit(m.Run())
}

package main

import (
	"bytes"
	"errors"
	"flag"
	"io"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestBadFlagPrintsUsageAndExits2: a bad flag, unknown or with a value the crawler or the
// pacer cannot use (which would otherwise become option_invalid and a default), prints the error and
// the usage, and the built program exits 2 without crawling. `go run` turns any failure into its own
// status 1 and prints "exit status 2".
func TestBadFlagPrintsUsageAndExits2(t *testing.T) {
	bin := filepath.Join(t.TempDir(), "example_crawler")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	for _, tc := range []struct {
		args []string
		err  string
	}{
		{[]string{"-nonsense"}, "flag provided but not defined: -nonsense"},
		{[]string{"-pages", "x"}, `invalid value "x" for flag -pages`},
		{[]string{"-jitter", "NaN"}, "WithJitter(NaN)"}, // passes the crawler's own checks; the pacer sets it aside
		{[]string{"-max-retries", "-1"}, "-max-retries at least 0"},
		{[]string{"-url", "ftp://example.org/"}, "want an absolute http or https URL"},
		{[]string{"stray"}, "unexpected arguments"},
	} {
		var stdout, stderr bytes.Buffer
		cmd := exec.Command(bin, tc.args...)
		cmd.Dir = t.TempDir() // nothing may be written, but if it were, not here
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		err := cmd.Run()
		var exit *exec.ExitError
		if !errors.As(err, &exit) || exit.ExitCode() != 2 {
			t.Errorf("%q: %v, want exit status 2", tc.args, err)
		}
		if s := stderr.String(); !strings.Contains(s, tc.err) || !strings.Contains(s, "Usage:") || !strings.Contains(s, "-max-inflight") {
			t.Errorf("%q: stderr lacks the error %q or the usage:\n%s", tc.args, tc.err, s)
		}
		if stdout.Len() > 0 {
			t.Errorf("%q: it started crawling:\n%s", tc.args, stdout.String())
		}
	}
	var stderr bytes.Buffer
	run := exec.Command("go", "run", ".", "-nonsense")
	run.Stderr = &stderr
	if err := run.Run(); err == nil || !strings.Contains(stderr.String(), "Usage:") || !strings.Contains(stderr.String(), "exit status 2") {
		t.Errorf("go run . -nonsense: %v\n%s", err, stderr.String())
	}
}

// TestDefaultRunLeavesNoUntrackedFile: what a run with the default flags writes (the audit trail, its
// HTML report, the SQLite state and its journal files) is ignored by git, whether the crawler runs from
// the repository's root (the README's `go run ./example_crawler`) or from its own directory.
func TestDefaultRunLeavesNoUntrackedFile(t *testing.T) {
	fs := flag.NewFlagSet("example_crawler", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	o, err := parseFlags(fs, nil)
	if err != nil {
		t.Fatal(err)
	}
	written := []string{o.audit, reportPath(o.audit), o.state, o.state + "-wal", o.state + "-shm"} // WAL mode
	for _, dir := range []string{"..", "."} {
		for _, f := range written {
			p := filepath.Join(dir, f)
			if err := exec.Command("git", "check-ignore", "-q", "--no-index", p).Run(); err != nil {
				t.Errorf("%s is not ignored by git (git check-ignore: %v): a default run leaves it untracked in the repository", p, err)
			}
		}
	}
}

package scenario

import (
	"errors"
	"fmt"
	"net/http"
	"testing"
	"time"
)

// A Flaky host refuses about Fraction of the pages on their first attempt, at any rate, and serves
// every retry; which pages is reproducible from the seed.
func TestFlakyFirstAttemptsOnly(t *testing.T) {
	cfg := HostConfig{Pages: 300, Flaky: &Flaky{Fraction: 1.0 / 3, Seed: 7, RetryAfter: 2 * time.Second}}
	s := mustState(t, cfg)
	refused := map[string]bool{}
	for i := range 300 {
		r := s.decideAt(t0, PagePath(i)) // all at once: the rate does not matter
		switch r.status {
		case http.StatusTooManyRequests:
			refused[PagePath(i)] = true
			if r.header.Get("Retry-After") != "2" {
				t.Fatalf("page %d: Retry-After %q, want 2", i, r.header.Get("Retry-After"))
			}
		case http.StatusOK:
		default:
			t.Fatalf("page %d: %d", i, r.status)
		}
	}
	if n := len(refused); n < 80 || n > 120 {
		t.Errorf("%d of 300 refused, want about 100", n)
	}
	for path := range refused {
		if r := s.decideAt(t0, path); r.status != http.StatusOK {
			t.Errorf("retry of %s: %d, want 200", path, r.status)
		}
	}
	again := mustState(t, cfg)
	for i := range 300 {
		if r := again.decideAt(t0.Add(time.Hour), PagePath(i)); (r.status != http.StatusOK) != refused[PagePath(i)] {
			t.Fatalf("page %d: another run with the same seed decided %d", i, r.status)
		}
	}
}

func TestFlakyKinds(t *testing.T) {
	s := mustState(t, HostConfig{Pages: 300, Flaky: &Flaky{Fraction: 1, Seed: 1,
		Kinds: []FlakyKind{FlakyTooMany, FlakyUnavailable, FlakyTimeout}}})
	seen := map[string]int{}
	for i := range 300 {
		r := s.decideAt(t0, PagePath(i))
		switch {
		case r.hang > 0 && r.status == 0:
			if r.hang != defaultFlakyHold {
				t.Fatalf("timeout held %v, want %v", r.hang, defaultFlakyHold)
			}
			seen["timeout"]++
		case r.status == 503 && r.header.Get("Retry-After") == "":
			seen["503"]++
		case r.status == 429 && r.header.Get("Retry-After") == "": // no RetryAfter configured
			seen["429"]++
		default:
			t.Fatalf("page %d: %d, Retry-After %q, hang %v", i, r.status, r.header.Get("Retry-After"), r.hang)
		}
	}
	for _, k := range []string{"429", "503", "timeout"} {
		if seen[k] < 60 {
			t.Errorf("kinds drawn %v: want each about a third", seen)
			break
		}
	}
	if len(s.windows) != 0 {
		t.Errorf("%d Retry-After windows logged, want none", len(s.windows))
	}
}

func TestFlakyConfig(t *testing.T) {
	for _, f := range []Flaky{{Fraction: -0.1}, {Fraction: 1.1}, {Fraction: 0.5, Hold: -time.Second}, {Fraction: 0.5, Kinds: []FlakyKind{3}}} {
		if _, err := (HostConfig{Flaky: &f}).normalized(); !errors.Is(err, errConfig) {
			t.Errorf("%+v: %v, want a config error", f, err)
		}
	}
	got := HostConfig{Pages: 30, Flaky: &Flaky{Fraction: 1.0 / 3, Kinds: []FlakyKind{FlakyTooMany, FlakyUnavailable, FlakyTimeout}, RetryAfter: 2 * time.Second}}.Describe()
	if want := "30 pages, 33% of first attempts refused at any rate (429 Retry-After 2s, 503, timeout)"; got != want {
		t.Errorf("Describe = %q, want %q", got, want)
	}
	if got := fmt.Sprint(FlakyKind(9)); got != "unknown" {
		t.Errorf("FlakyKind(9) = %q", got)
	}
}

package ratelimit

import (
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"
)

// FuzzParse checks the invariants of Parse on any field
// values; an empty input means the field is absent and a newline separates
// several fields of a name.
func FuzzParse(f *testing.F) {
	epoch := "1741082700" // raT0 + 5 min
	for _, s := range [][8]string{
		{"100", "50", "60", "", "", "", "", ""},
		{"5000", "0", epoch, "", "", "", "", ""},
		{"", "50", epoch + "000", "", "", "", "", ""},
		{"", "3", "1.5", "", "", "", "", ""},
		{"10", "11", "60", "", "", "", "", ""},
		{"", "5\n6", "10", "", "", "", "", ""},
		{"", "", "", "10, 10;w=1", "5", "10", "", ""},
		{"", "", "", "", "", "", `"default";r=5;t=10`, ""},
		{"", "", "", "", "", "", `"default";r=5`, `"default";q=100;w=60`},
		{"", "", "", "", "", "", `"burst";r=0;t=1, "daily";r=100;t=3600`, ""},
		{"", "", "", "", "", "", `"a" ; t = 10 ;r=5;pk=:cHJvamVjdA==:`, ""},
		{"", "", "", "", "", "", `"a";r=1.5;t=-1, b;r="5"`, `"a";q=0`},
		{"", "0", "0", "", "0", "0", `x;r=0;t=0`, ""},
		{"", "99999999999999999999", "99999999999999999999.9999", "", "", "", "", ""},
	} {
		f.Add(s[0], s[1], s[2], s[3], s[4], s[5], s[6], s[7])
	}
	const limit = 24 * time.Hour
	f.Fuzz(func(t *testing.T, xLim, xRem, xRst, dLim, dRem, dRst, sf, pol string) {
		h := http.Header{}
		for _, kv := range [][2]string{
			{"X-RateLimit-Limit", xLim}, {"X-RateLimit-Remaining", xRem}, {"X-RateLimit-Reset", xRst},
			{"RateLimit-Limit", dLim}, {"RateLimit-Remaining", dRem}, {"RateLimit-Reset", dRst},
			{"RateLimit", sf}, {"RateLimit-Policy", pol},
		} {
			if kv[1] != "" {
				for _, v := range strings.Split(kv[1], "\n") {
					h.Add(kv[0], v)
				}
			}
		}
		sig, found, errs := Parse(h, raT0, limit)
		for _, err := range errs {
			if !errors.Is(err, ErrInvalid) || len(err.Error()) > 500 {
				t.Fatalf("err = %q: want ErrInvalid and a bounded length", err)
			}
		}
		if !found {
			if sig != (Signal{}) {
				t.Fatalf("sig = %+v without found", sig)
			}
			return
		}
		reset := sig.Reset.Sub(raT0)
		switch {
		case reset <= 0 || reset > limit:
			t.Fatalf("Reset = %v, want within (now, now+%v]", sig.Reset, limit)
		case !sig.Exhausted && (sig.Interval <= 0 || sig.Interval > reset):
			t.Fatalf("Interval = %v, want within (0, the reset in %v]", sig.Interval, reset)
		case !sig.Exhausted && !sig.Until.Equal(sig.Reset):
			t.Fatalf("Until = %v, want the reset %v", sig.Until, sig.Reset)
		case sig.Exhausted && (sig.Interval < 0 || (sig.Interval > 0) != sig.Until.After(sig.Reset)):
			t.Fatalf("exhausted: Interval = %v until %v after the reset %v: want an interval only for a next window", sig.Interval, sig.Until, sig.Reset)
		case sig.Source != SourceX && sig.Source != SourceDraft && sig.Source != SourceSF:
			t.Fatalf("Source = %q", sig.Source)
		}
	})
}

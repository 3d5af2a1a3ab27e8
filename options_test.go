package ext

import (
	"context"
	"errors"
	"fmt"
	"math"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/collypace/ext/audit"
	"github.com/collypace/ext/internal/hostkey"
	"github.com/gocolly/colly/v2"
	"github.com/rs/zerolog"
)

// issue 10 item 17: a malformed host pattern fails loudly at construction: NewPacerErr returns it,
// NewPacer reports it (audit event and alert) and crawls with the defaults.
func TestInvalidHostPatternFailsLoudly(t *testing.T) {
	for _, pattern := range []string{"[", "a.example.com[", ""} {
		p, err := NewPacerErr(WithHostPolicy(pattern, HostPolicy{BaseDelay: 5 * time.Second}))
		if p != nil || !errors.Is(err, ErrInvalidOption) || !strings.Contains(err.Error(), fmt.Sprintf("%q", pattern)) {
			t.Errorf("NewPacerErr(WithHostPolicy(%q)) = pacer %v, %v; want ErrInvalidOption naming the pattern", pattern, p != nil, err)
		}
	}
	var buf auditBuf
	var got alerts
	p := NewPacer(WithAlert(got.add), WithLogger(zerolog.New(&buf)), WithHostPolicy("[", HostPolicy{BaseDelay: 5 * time.Second}))
	ev := findEvent(t, &buf, audit.EventOptionInvalid)
	if ev == nil || !strings.Contains(ev[audit.FieldDetail].(string), `WithHostPolicy("[")`) || ev["level"] != "error" {
		t.Errorf("option_invalid event %v, want one at error level naming the pattern", ev)
	}
	if a := got.events(); len(a) != 1 || a[0] != audit.EventOptionInvalid {
		t.Errorf("alerts %v, want one option_invalid", a)
	}
	if pol := p.cfg.policyFor("x.test"); pol.BaseDelay != DefaultBaseDelay {
		t.Errorf("base delay %v, want the default", pol.BaseDelay)
	}
}

// issue 10 item 17: a pattern matches the host key, and the host name without its port.
func TestHostPolicyPatternMatchesHostAndPort(t *testing.T) {
	p, err := NewPacerErr(
		WithHostPolicy("api.example.com:8443", HostPolicy{BaseDelay: 2 * time.Second}),
		WithHostPolicy("127.0.0.1", HostPolicy{BaseDelay: 3 * time.Second}),
		WithHostPolicy("*.example.com", HostPolicy{BaseDelay: 4 * time.Second}),
		WithHostPolicy(`\[::1\]`, HostPolicy{BaseDelay: 5 * time.Second}),
	)
	if err != nil {
		t.Fatal(err)
	}
	for key, want := range map[string]time.Duration{
		"api.example.com:8443": 2 * time.Second,
		"api.example.com":      4 * time.Second, // not the port-specific rule
		"127.0.0.1":            3 * time.Second,
		"127.0.0.1:8080":       3 * time.Second,
		"a.example.com:8080":   4 * time.Second,
		"[::1]:8080":           5 * time.Second,
		"[::1]":                5 * time.Second,
		"127.0.0.2:8080":       DefaultBaseDelay,
		"example.com":          DefaultBaseDelay,
	} {
		if got := p.cfg.policyFor(key).BaseDelay; got != want {
			t.Errorf("host %s: base delay %v, want %v", key, got, want)
		}
	}
}

// failingSaves is a store whose writes fail.
type failingSaves struct{ *memoryStore }

var errDiskFull = errors.New("disk full")

func (failingSaves) SaveHosts(context.Context, []StoredHost) error { return errDiskFull }

// issue 10 item 18: Close returns the error of its final flush, every time it is called.
func TestCloseReturnsFinalFlushError(t *testing.T) {
	p := NewPacer(WithStore(failingSaves{newMemoryStore()}), WithFlushInterval(time.Hour))
	p.ObserveAt(p.ReserveAt("h", t0), Outcome{Status: http.StatusServiceUnavailable}, t0)
	for range 2 {
		if err := p.Close(); !errors.Is(err, errDiskFull) || !strings.HasPrefix(err.Error(), "ext: ") {
			t.Errorf("Close() = %v, want the final flush's error", err)
		}
	}
	if err := NewPacer(WithStore(newMemoryStore())).Close(); err != nil {
		t.Errorf("Close() = %v with a working store", err)
	}
}

// scalars prints the settings of c that options change, to compare configurations.
func scalars(c config) string {
	_, nop := c.observer.(nopObserver)
	return fmt.Sprint(c.baseDelay, c.maxDelay, c.jitter, c.maxInFlight, c.maxRetries, c.retryAfterBuffer, c.maxRetryAfter,
		c.maxCrawlDelay, c.flushInterval, c.breaker, len(c.policies), c.transport == http.DefaultTransport, nop, c.hostKey != nil)
}

// issue 10 item 18: one rule for invalid option values, every option: NewPacerErr returns each as an
// error wrapping ErrInvalidOption; NewPacer keeps the default and reports it; nothing panics.
func TestInvalidOptionValuesOneRule(t *testing.T) {
	defaults := scalars(defaultConfig())
	for name, o := range map[string]Option{
		"WithBaseDelay":           WithBaseDelay(-time.Second),
		"WithMaxDelay":            WithMaxDelay(0),
		"WithJitter":              WithJitter(1.5),
		"WithJitter NaN":          WithJitter(math.NaN()),
		"WithMaxInFlight":         WithMaxInFlight(0),
		"WithMaxRetries":          WithMaxRetries(-1),
		"WithRetryAfterBuffer":    WithRetryAfterBuffer(-0.1),
		"WithMaxRetryAfter":       WithMaxRetryAfter(-time.Minute),
		"WithMaxCrawlDelay":       WithMaxCrawlDelay(0),
		"WithHostPolicy pattern":  WithHostPolicy("[a-", HostPolicy{}),
		"WithHostPolicy negative": WithHostPolicy("*", HostPolicy{MaxInFlight: -1}),
		"WithHostKey":             WithHostKey(nil),
		"WithTransport":           WithTransport(nil),
		"WithFlushInterval":       WithFlushInterval(-time.Second),
		"WithBreaker":             WithBreaker(BreakerPolicy{Cooldown: -time.Minute, Threshold: time.Minute}),
		"WithObserver":            WithObserver(nil),
	} {
		p, err := NewPacerErr(o)
		if p != nil || !errors.Is(err, ErrInvalidOption) || !strings.HasPrefix(err.Error(), "ext: invalid option: With") {
			t.Errorf("%s: NewPacerErr = pacer %v, %v; want ErrInvalidOption", name, p != nil, err)
		}
		var buf auditBuf
		p = NewPacer(WithLogger(zerolog.New(&buf)), o)
		if got := scalars(p.cfg); got != defaults {
			t.Errorf("%s: settings %s, want the defaults %s", name, got, defaults)
		}
		if findEvent(t, &buf, audit.EventOptionInvalid) == nil {
			t.Errorf("%s: no option_invalid event", name)
		}
	}
	// Edge values that are valid.
	if _, err := NewPacerErr(WithBaseDelay(0), WithJitter(0), WithJitter(1), WithMaxRetries(0), WithRetryAfterBuffer(0),
		WithBreaker(BreakerPolicy{Failures: -1}), WithIdleEviction(0), WithStore(nil), WithAlert(nil), WithRobotsAgent("")); err != nil {
		t.Errorf("valid edge values rejected: %v", err)
	}
	// The Queue's options follow the same rule, reported through the pacer.
	var buf auditBuf
	p := NewPacer(WithLogger(zerolog.New(&buf)))
	q := NewQueue(p, 0, WithQueueMemory(-1))
	if q.workers != 1 || q.maxMem != defaultQueueMemory {
		t.Errorf("queue: %d workers, memory %d; want 1 and the default", q.workers, q.maxMem)
	}
	if n := strings.Count(buf.String(), `"event":"option_invalid"`); n != 2 {
		t.Errorf("%d option_invalid events for the queue, want 2", n)
	}
}

// The option_invalid report says what applies: a later valid value of the same option, or the
// default; WithAlert sees it wherever it stands among the options.
func TestInvalidOptionReportSaysWhatApplies(t *testing.T) {
	var buf auditBuf
	var alerts []Alert
	p := NewPacer(WithBaseDelay(-1), WithBaseDelay(2*time.Second), WithMaxRetries(-1),
		WithLogger(zerolog.New(&buf)), WithAlert(func(a Alert) { alerts = append(alerts, a) }))
	if got := p.cfg.policyFor("x.test").BaseDelay; got != 2*time.Second {
		t.Errorf("base delay %v, want the later valid 2s", got)
	}
	if len(alerts) != 2 {
		t.Fatalf("%d alerts, want 2 (WithAlert given last)", len(alerts))
	}
	if d := alerts[0].Detail; !strings.Contains(d, "WithBaseDelay(2s), given after it, applies") {
		t.Errorf("detail %q: want the later value named as the one that applies", d)
	}
	if d := alerts[1].Detail; !strings.Contains(d, "the default 3 applies") {
		t.Errorf("detail %q: want the default named", d)
	}
}

// An invalid value given after a valid one of the same option leaves the valid one in force, and the
// option_invalid report names it, not the default.
func TestInvalidOptionAfterValidNamesTheEarlierValue(t *testing.T) {
	var buf auditBuf
	c := colly.NewCollector()
	p := AdaptivePacing(c, WithBaseDelay(100*time.Millisecond), WithLogger(zerolog.New(&buf)), WithTransport(http.DefaultTransport),
		WithBaseDelay(-time.Second), WithTransport(nil))
	if got := p.cfg.policyFor("x.test").BaseDelay; got != 100*time.Millisecond {
		t.Fatalf("base delay %v, want the earlier valid 100ms", got)
	}
	var details []string
	for _, e := range events(t, &buf) {
		if e[audit.FieldEvent] == string(audit.EventOptionInvalid) {
			details = append(details, e[audit.FieldDetail].(string))
		}
	}
	want := []string{"WithBaseDelay(100ms), given before it, applies", "WithTransport(*http.Transport), given before it, applies"}
	if len(details) != len(want) {
		t.Fatalf("option_invalid details %q, want %d", details, len(want))
	}
	for i, d := range details {
		if !strings.Contains(d, want[i]) || strings.Contains(d, "default") {
			t.Errorf("detail %q: want %q, and no default named", d, want[i])
		}
	}
}

// A base delay above the max delay, valid alone, is reported (NewPacerErr: an error); the max delay is
// raised to it, globally and in a host policy.
func TestBaseDelayAboveMaxDelayIsReported(t *testing.T) {
	for _, tc := range []struct {
		name string
		opts []Option
		key  string
	}{
		{"global", []Option{WithBaseDelay(2 * time.Minute), WithMaxDelay(time.Second)}, "x.test"},
		{"policy", []Option{WithHostPolicy("slow.test", HostPolicy{BaseDelay: 2 * time.Minute})}, "slow.test"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := NewPacerErr(tc.opts...); !errors.Is(err, ErrInvalidOption) {
				t.Errorf("NewPacerErr = %v, want ErrInvalidOption", err)
			}
			var alerts []Alert
			p := NewPacer(append(tc.opts, WithAlert(func(a Alert) { alerts = append(alerts, a) }))...)
			if len(alerts) != 1 || !strings.Contains(alerts[0].Detail, "raised") {
				t.Errorf("alerts %v, want one saying the max delay is raised", alerts)
			}
			if pol := p.cfg.policyFor(tc.key); pol.MaxDelay != 2*time.Minute {
				t.Errorf("max delay %v, want raised to the 2m base", pol.MaxDelay)
			}
		})
	}
}

// Host keys given to the explicit-time and blocking methods are normalized as DefaultHostKey does:
// every spelling of one host shares its schedule.
func TestHostKeysGivenAreNormalized(t *testing.T) {
	p := NewPacer(WithBaseDelay(time.Second), WithJitter(0), WithoutRobots())
	t0 := time.Unix(1000, 0)
	p.ReserveAt("A.Example.COM.", t0)
	if r := p.ReserveAt("a.example.com", t0); !r.At.Equal(t0.Add(time.Second)) {
		t.Errorf("second departure at %v, want %v: one host, one schedule", r.At, t0.Add(time.Second))
	}
	if _, ok := p.HostAt("a.EXAMPLE.com", t0); !ok {
		t.Error("HostAt does not find the host under another spelling")
	}
	if got := hostkey.Normalize("Bücher.Example:8080"); got != "xn--bcher-kva.example:8080" {
		t.Errorf("hostkey.Normalize = %q", got)
	}
}

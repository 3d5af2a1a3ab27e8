package main

import (
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/collypace/ext/audit"
)

// progress prints the crawl's state every tick: on a terminal it redraws a table in place (ANSI),
// otherwise it prints a plain line for each host whose state changed (deferrals and the circuit
// breaker only once they matter).
type progress struct {
	out   io.Writer
	tty   bool
	tr    *tracker
	start time.Time
	drawn int               // lines of the last table (tty)
	last  map[string]string // last line printed per host (plain)
}

func newProgress(out io.Writer, tr *tracker, start time.Time) *progress {
	return &progress{out: out, tty: isTerminal(out), tr: tr, start: start, last: map[string]string{}}
}

// isTerminal reports whether out is a character device that understands ANSI escapes.
func isTerminal(out io.Writer) bool {
	f, ok := out.(*os.File)
	if !ok || os.Getenv("TERM") == "dumb" {
		return false
	}
	fi, err := f.Stat()
	return err == nil && fi.Mode()&os.ModeCharDevice != 0
}

// run draws every tick until stop is closed, then draws once more.
func (p *progress) run(stop <-chan struct{}, tick time.Duration) {
	t := time.NewTicker(tick)
	defer t.Stop()
	for {
		select {
		case <-stop:
			p.draw(time.Now())
			return
		case now := <-t.C:
			p.draw(now)
		}
	}
}

// draw prints the state at now.
func (p *progress) draw(now time.Time) {
	views := p.tr.snapshot()
	elapsed := now.Sub(p.start).Round(time.Second)
	if !p.tty {
		for _, v := range views {
			line := v.name + ": " + progressLine(v, now)
			if p.last[v.key] != line {
				p.last[v.key] = line
				_, _ = fmt.Fprintf(p.out, "[%4s] %s\n", elapsed, line)
			}
		}
		return
	}
	width := nameWidth(views)
	var b strings.Builder
	if p.drawn > 0 {
		fmt.Fprintf(&b, "\x1b[%dA", p.drawn) // back to the table's first line
	}
	done, left := 0, 0
	for _, v := range views {
		done, left = done+v.done, left+v.left
	}
	fmt.Fprintf(&b, "\x1b[2K%s elapsed · %d pages done · %d left\n", elapsed, done, left)
	fmt.Fprintf(&b, "\x1b[2K%-*s %5s %5s %8s  %-24s %3s %8s %7s %4s %8s  %s\n", width, "host", "done", "left", "interval", "trigger",
		"in", "refusals", "retries", "lost", "deferred", "breaker")
	for _, v := range views {
		fmt.Fprintf(&b, "\x1b[2K%-*s %5d %5d %8s  %-24s %3d %8d %7d %4d %8d  %s\n", width, v.name, v.done, v.left,
			interval(v), trigger(v, now), v.status.InFlight, v.status.Refusals, v.status.Retries, v.failed, v.deferred, v.status.Breaker)
	}
	p.drawn = 2 + len(views)
	_, _ = io.WriteString(p.out, b.String())
}

// progressLine is a host's state as one plain line.
func progressLine(v hostView, now time.Time) string {
	line := fmt.Sprintf("%d done, %d left, interval %s (%s), %d in flight, %d refusals, %d retries, %d lost",
		v.done, v.left, interval(v), trigger(v, now), v.status.InFlight, v.status.Refusals, v.status.Retries, v.failed)
	if v.deferred > 0 || v.status.Breaker != audit.BreakerClosed {
		line += fmt.Sprintf(", %d deferred, breaker %s", v.deferred, v.status.Breaker)
	}
	return line
}

// interval is the host's current interval, or "-" before its first request.
func interval(v hostView) string {
	if !v.paced {
		return "-"
	}
	return fmtDuration(v.status.Interval)
}

// trigger is what sets the host's interval, with the time left on a hold.
func trigger(v hostView, now time.Time) string {
	if !v.paced {
		return "waiting"
	}
	s := v.status
	if s.RetryAfterUntil.After(now) {
		return fmt.Sprintf("%s, %s left", s.Trigger, fmtDuration(s.RetryAfterUntil.Sub(now)))
	}
	return string(s.Trigger)
}

// nameWidth is the width of the host column.
func nameWidth(views []hostView) int {
	w := len("host")
	for _, v := range views {
		w = max(w, len(v.name))
	}
	return w
}

// fmtDuration prints d for people: "850ms", "2.1s", "1m5s".
func fmtDuration(d time.Duration) string {
	switch {
	case d < time.Second:
		return d.Round(time.Millisecond).String()
	case d < time.Minute:
		return d.Round(100 * time.Millisecond).String()
	default:
		return d.Round(time.Second).String()
	}
}

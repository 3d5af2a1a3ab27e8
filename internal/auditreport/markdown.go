package auditreport

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/collypace/ext/audit"
)

// maxListed bounds the violations and deferred URLs a summary lists one by one.
const maxListed = 10

// WriteSummary writes a short plain-text summary: one row per host, the verdict and the first
// violations.
func (r *Report) WriteSummary(w io.Writer) error {
	pw := &printer{w: w}
	pw.printf("pace report of %s: %d events, %d hosts, %d departures\n", strings.Join(r.Files, ", "), r.Events, len(r.Hosts), r.Departures())
	tw := tabwriter.NewWriter(pw, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintf(tw, "host\tdepartures\tmin gap\tmedian gap\tconstraint\twindows\tinside\tverdict\t\n")
	for _, h := range r.Hosts {
		fmt.Fprintf(tw, "%s\t%d\t%s\t%s\t%s\t%d\t%d\t%s\t\n", h.Title(), len(h.Departures), gapOrDash(h, h.MinGap()), gapOrDash(h, h.MedianGap()),
			strongest(h), len(h.Windows), inside(h), h.verdict(r.Violations))
	}
	_ = tw.Flush()
	r.writeVerdict(pw, "")
	for i, v := range r.Violations {
		if i == maxListed {
			pw.printf("  … and %d more\n", len(r.Violations)-maxListed)
			break
		}
		pw.printf("  %s\n", v)
	}
	if n := len(r.Unhosted); n > 0 {
		e := r.Unhosted[0]
		pw.printf("%d event(s) of no host (the pacer's own), first: %s %s: %s\n", n, FormatTime(e.At), e.Name, e.Detail)
	}
	if len(r.Warnings) > 0 {
		pw.printf("%d line(s) skipped, first: %s\n", len(r.Warnings), r.Warnings[0])
	}
	return pw.err
}

// WriteMarkdown writes the full report.
func (r *Report) WriteMarkdown(w io.Writer) error {
	pw := &printer{w: w}
	pw.printf("# Pacing report\n\n")
	pw.printf("Trails: %s (%d events, merged as one schedule per host).\n", md(strings.Join(r.Files, ", ")), r.Events)
	pw.printf("A gap may fall short of a constraint by %s or %.1f %% of it, whichever is larger (timestamps are taken by the crawler); "+
		"a departure at or after a window's start and before its end is a violation.\n\n", FormatDuration(r.Tolerance.Abs), r.Tolerance.Frac*100)
	r.writeVerdict(pw, "**")
	pw.printf("\n")
	for _, v := range r.Violations {
		pw.printf("- %s\n", md(v.String()))
	}
	if len(r.Violations) > 0 {
		pw.printf("\n")
	}
	if len(r.Hosts) > 0 {
		pw.printf("| host | departures | first | last | min gap | median gap | strongest constraint | windows | inside | verdict |\n")
		pw.printf("|---|--:|---|---|--:|--:|--:|--:|--:|---|\n")
	}
	for _, h := range r.Hosts {
		first, last := "-", "-"
		if n := len(h.Departures); n > 0 {
			first, last = FormatTime(h.Departures[0].At), FormatTime(h.Departures[n-1].At)
		}
		pw.printf("| %s | %d | %s | %s | %s | %s | %s | %d | %d | %s |\n", md(h.Title()), len(h.Departures), first, last,
			gapOrDash(h, h.MinGap()), gapOrDash(h, h.MedianGap()), strongest(h), len(h.Windows), inside(h), h.verdict(r.Violations))
	}
	for _, h := range r.Hosts {
		h.writeMarkdown(pw)
	}
	if len(r.Unhosted) > 0 {
		pw.printf("\n## Events of no host\n\nThe pacer's own (no target_domain): not a host's schedule, not checked against one.\n\n")
		for _, e := range r.Unhosted {
			pw.printf("- %s %s (%s): %s\n", FormatTime(e.At), e.Name, e.Trigger, md(e.Detail))
		}
	}
	if len(r.Warnings) > 0 {
		pw.printf("\n## Skipped lines\n\n")
		for _, w := range r.Warnings {
			pw.printf("- %s\n", md(w.String()))
		}
	}
	return pw.err
}

// NoDepartures is the verdict on a trail without a departure.
const NoDepartures = "No departure in the trail: it proves nothing about the crawl (an empty file, lines that are not audit events, or the wrong file)"

func (r *Report) writeVerdict(pw *printer, strong string) {
	if !r.Proves() && r.OK() {
		pw.printf("%s%s%s.\n", strong, NoDepartures, strong)
		return
	}
	if r.OK() {
		pw.printf("%sNo violation%s: no departure inside a window or an open breaker, no gap under a constraint, no bypass.\n", strong, strong)
		return
	}
	pw.printf("%s%d violation(s)%s:\n", strong, len(r.Violations), strong)
}

func (h *Host) writeMarkdown(pw *printer) {
	pw.printf("\n## %s\n\n", md(h.Title()))
	pw.printf("%d departures", len(h.Departures))
	if n := len(h.Departures); n > 0 {
		pw.printf(", first %s, last %s", FormatTime(h.Departures[0].At), FormatTime(h.Departures[n-1].At))
	}
	if len(h.Pipelines) > 0 {
		pw.printf("; pipelines: %s", md(strings.Join(h.Pipelines, ", ")))
	}
	pw.printf(".\n")
	if h.WithoutURL > 0 {
		pw.printf("%d departure(s) lack the schema 2 fields (url, interval_ms): their Crawl-delay comes from crawl_delay_applied events, "+
			"their rate-limit interval is unknown.\n", h.WithoutURL)
	}
	if len(h.Constraints) > 0 {
		pw.printf("\n| constraint | in force | gaps | min gap | median gap | under it |\n|---|--:|--:|--:|--:|--:|\n")
		for _, c := range h.Constraints {
			pw.printf("| %s | %s | %d | %s | %s | %d |\n", c.Name, fmtRange(c.Least, c.Most), c.Gaps, FormatDuration(c.MinGap), FormatDuration(c.MedianGap), c.Short)
		}
	}
	if len(h.Windows) > 0 {
		pw.printf("\n| window | start | end | length | status | departures inside |\n|---|---|---|--:|--:|---|\n")
		for _, w := range h.Windows {
			in := "none"
			if len(w.Inside) > 0 {
				urls := make([]string, len(w.Inside))
				for i, d := range w.Inside {
					urls[i] = FormatTime(d.At) + " " + d.URL
				}
				in = strings.Join(urls, "; ")
			}
			kind := w.Kind
			if w.Derived {
				kind += " (from computed_delay_ms)"
			}
			pw.printf("| %s | %s | %s | %s | %d | %s |\n", kind, FormatTime(w.Start), FormatTime(w.End), FormatDuration(w.End.Sub(w.Start)), w.Status, md(in))
		}
	}
	if len(h.NonCompliant) > 0 || h.NonCompliantDepartures > 0 {
		pw.printf("\nNot compliant (compliance_flag=false):\n\n")
		for _, e := range h.NonCompliant {
			pw.printf("- %s %s (%s): %s\n", FormatTime(e.At), e.Name, e.Trigger, md(e.Detail))
		}
		if h.NonCompliantDepartures > 0 {
			pw.printf("- %d departure(s) flagged: a published constraint was not honoured in full (see above)\n", h.NonCompliantDepartures)
		}
	}
	if len(h.Bypassed) > 0 {
		pw.printf("\nPacing bypassed (a violation: requests left without the pacer's transport):\n\n")
		for _, e := range h.Bypassed {
			pw.printf("- %s %s: %s\n", FormatTime(e.At), md(e.Pipeline), md(e.Detail))
		}
	}
	if len(h.Breaker) > 0 {
		pw.printf("\nBreaker open (binds the departures of the process it opened in):\n\n")
		for _, b := range h.Breaker {
			pw.printf("- %s, %s, %s; %d departure(s) inside: %s\n", md(b.Process), FormatTime(b.Opened), b.ending(), len(b.Inside), md(b.Detail))
		}
	}
	if len(h.Deferred) > 0 {
		pw.printf("\nDeferred (%d):\n\n", len(h.Deferred))
		for _, d := range h.Deferred {
			pw.printf("- %s\n", md(d))
		}
	}
}

// ending says how a breaker period ended.
func (b BreakerPeriod) ending() string {
	switch b.EndedBy {
	case "":
		return "open at the end of the trail"
	case audit.EventBreakerHalfOpen:
		return "probe " + FormatTime(b.Ended) + " (" + FormatDuration(b.Ended.Sub(b.Opened)) + ")"
	}
	return "closed " + FormatTime(b.Ended) + " (" + FormatDuration(b.Ended.Sub(b.Opened)) + ")"
}

// verdict is "ok", the number of the host's violations, or "no departure" for a host whose events
// include none: as for a whole trail (Proves), nothing about its pace is shown.
func (h *Host) verdict(vs []Violation) string {
	n := 0
	for _, v := range vs {
		if v.Host == h.Key {
			n++
		}
	}
	switch {
	case n == 0 && len(h.Departures) == 0:
		return "no departure"
	case n == 0:
		return "ok"
	}
	return fmt.Sprintf("%d VIOLATION(S)", n)
}

// strongest is the largest constraint in force over the host's gaps, named.
func strongest(h *Host) string {
	var best ConstraintStat
	for _, c := range h.Constraints {
		if c.Most > best.Most || best.Name == "" {
			best = c
		}
	}
	if best.Name == "" {
		return "-"
	}
	return FormatDuration(best.Most) + " " + best.Name
}

func inside(h *Host) int {
	n := 0
	for _, w := range h.Windows {
		n += len(w.Inside)
	}
	return n
}

func gapOrDash(h *Host, d time.Duration) string {
	if len(h.Departures) < 2 {
		return "-"
	}
	return FormatDuration(d)
}

func fmtRange(a, b time.Duration) string {
	if a == b {
		return FormatDuration(a)
	}
	return FormatDuration(a) + " – " + FormatDuration(b)
}

// md makes text from the trail safe in a Markdown table cell or list item.
var md = strings.NewReplacer("|", `\|`, "\n", " ", "\r", " ", "<", "&lt;", ">", "&gt;", "`", "\\`", "*", `\*`, "_", `\_`, "[", `\[`).Replace

// printer writes formatted text and keeps the first error.
type printer struct {
	w   io.Writer
	err error
}

func (p *printer) Write(b []byte) (int, error) {
	if p.err != nil {
		return 0, p.err
	}
	n, err := p.w.Write(b)
	p.err = err
	return n, err
}

func (p *printer) printf(format string, args ...any) {
	_, _ = fmt.Fprintf(p, format, args...)
}

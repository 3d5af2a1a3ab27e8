package main

import (
	"fmt"
	"io"
	"text/tabwriter"
	"time"

	"github.com/collypace/ext/internal/scenario"
)

// gapStats are a host's start-to-start gaps and its wall time, measured at the server (demo) or at
// the client's transport (-url).
type gapStats struct {
	n            int // gaps measured
	mean, median time.Duration
	wall         time.Duration // first request to last
	early        int           // requests inside a Retry-After window the server announced; -1 if unknown
}

// serverGaps measures at the demo host, from the arrivals it logged.
func serverGaps(h *scenario.Host) gapStats {
	a := scenario.PageRequests(h.Arrivals())
	g := scenario.Gaps(a)
	return gapStats{n: len(g), mean: scenario.Mean(g), median: scenario.Median(g), wall: scenario.Span(a),
		early: scenario.InsideWindows(a, h.Windows())}
}

// clientGaps measures at the client, from the departures the recorder noted.
func clientGaps(departures []time.Time) gapStats {
	a := make([]scenario.Arrival, len(departures))
	for i, d := range departures {
		a[i] = scenario.Arrival{At: d}
	}
	g := scenario.Gaps(a)
	return gapStats{n: len(g), mean: scenario.Mean(g), median: scenario.Median(g), wall: scenario.Span(a), early: -1}
}

// fmt prints a gap, or "-" when there is none.
func (gs gapStats) fmt(d time.Duration) string {
	if gs.n == 0 {
		return "-"
	}
	return fmtDuration(d)
}

// writeSummary prints the final table, one row per host, and the totals.
func writeSummary(out io.Writer, views []hostView, rec *recorder, wall time.Duration, outcome string, audit *auditFile, auditPath string) {
	where := "client"
	if len(views) > 0 && views[0].server != nil {
		where = "server"
	}
	_, _ = fmt.Fprintf(out, "\nsummary: %s after %s\n\n", outcome, fmtDuration(wall))
	tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', tabwriter.AlignRight)
	width := nameWidth(views)
	_, _ = fmt.Fprintf(tw, "%-*s\tpages\tlost\tdeferred\tleft\trefusals\tretries\tearly\tgap mean\tgap p50\tbase\thost asks\tfinal interval\twall\t\n", width, "host")
	var pages, lost, refusals int64
	for _, v := range views {
		var gs gapStats
		if v.server != nil {
			gs = serverGaps(v.server)
		} else {
			gs = clientGaps(rec.departures(v.key))
		}
		early := "-"
		if gs.early >= 0 {
			early = fmt.Sprint(gs.early)
		}
		_, _ = fmt.Fprintf(tw, "%-*s\t%d\t%d\t%d\t%d\t%d\t%d\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t\n", width, v.name, v.done, v.failed, v.deferred, v.left,
			v.status.Refusals, v.status.Retries, early, gs.fmt(gs.mean), gs.fmt(gs.median),
			fmtDuration(v.status.BaseDelay), asked(v), finalInterval(v), fmtDuration(gs.wall))
		pages, lost, refusals = pages+int64(v.done), lost+int64(v.failed), refusals+v.status.Refusals
	}
	_ = tw.Flush()
	_, _ = fmt.Fprintf(out, "\n%d pages, %d lost, %d refusals in %s; %d audit events in %s\n", pages, lost, refusals, fmtDuration(wall), audit.events.Load(), auditPath)
	_, _ = fmt.Fprintf(out, "gap: time between request starts, measured at the %s. Pacing aims at max(base, what the host asks);\n"+
		"a static LimitRule{Delay} would add each response's latency on top. early: requests sent inside a Retry-After window.\n", where)
}

// asked is the interval the host asked for, and how.
func asked(v hostView) string {
	switch {
	case v.asked <= 0:
		return "-"
	case v.asked == v.status.CrawlDelay:
		return fmtDuration(v.asked) + " crawl-delay"
	default:
		return fmtDuration(v.asked) + " rate limit"
	}
}

// finalInterval is the host's interval at the end, with its trigger.
func finalInterval(v hostView) string {
	if !v.paced {
		return "-"
	}
	return fmtDuration(v.status.Interval) + " " + string(v.status.Trigger)
}

package main

import (
	"fmt"
	"io"
	"time"
)

// writeTable prints the results as a Markdown table.
func writeTable(out io.Writer, cfg config, rs []result) {
	ideal := cfg.ideal()
	urls := cfg.hosts * cfg.pages
	_, _ = fmt.Fprintln(out, "| queue | pages | refused (429), retried | total time | vs ideal | peak goroutines running requests |")
	_, _ = fmt.Fprintln(out, "|---|---|---|---|---|---|")
	for _, r := range rs {
		total := r.wall.Round(100 * time.Millisecond).String()
		if r.boundedStop {
			total = "> " + cfg.bound.String() + " (stopped at the bound)"
		}
		_, _ = fmt.Fprintf(out, "| %s | %d / %d | %d | %s | %+.0f%% | %d (%d workers) |\n",
			r.mode, r.pages, urls, r.refused, total, 100*(float64(r.wall)/float64(ideal)-1), r.peakGorout, cfg.workers)
	}
}

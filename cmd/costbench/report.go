package main

import (
	"fmt"
	"io"
	"time"
)

// writeTable prints the medians of both kinds as a Markdown table, and the pacer's own cost.
func writeTable(out io.Writer, cfg config, bare, paced summary, paired float64) {
	_, _ = fmt.Fprintln(out, "| crawl | CPU per request (median) | min – max | allocations per request | bytes per request | wall per crawl | connections per crawl |")
	_, _ = fmt.Fprintln(out, "|---|---:|---:|---:|---:|---:|---:|")
	for _, r := range []struct {
		name string
		s    summary
	}{{"bare Colly", bare}, {"paced Colly", paced}} {
		_, _ = fmt.Fprintf(out, "| %s | %s | %s – %s | %.1f | %.0f | %s | %.0f |\n", r.name, us(r.s.cpu), us(r.s.cpuMin), us(r.s.cpuMax),
			r.s.allocs, r.s.bytes, r.s.wall.Round(time.Millisecond), r.s.conns)
	}
	ratio := float64(paced.cpu) / float64(bare.cpu)
	_, _ = fmt.Fprintf(out, "\npaced / bare CPU: %.3f× (target ≤ 1.03×); the pacer's own CPU: %s per request (target ≤ 3 µs); "+
		"%+.1f allocations and %+.0f bytes per request\n",
		ratio, us(paced.cpu-bare.cpu), paced.allocs-bare.allocs, paced.bytes-bare.bytes)
	_, _ = fmt.Fprintf(out, "paired: median of each round's paced / bare CPU %.3f×\n", paired)
	_, _ = fmt.Fprintln(out, "(one invocation lands within about ±1.5% of the median of many on 2 shared cores: "+
		"BENCHMARKS.md reports the median of ten invocations)")
}

// us formats d in microseconds.
func us(d time.Duration) string {
	return fmt.Sprintf("%.2f µs", float64(d)/float64(time.Microsecond))
}

package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"sort"
	"strings"
	"time"
)

// A diagnostic of where a fleet crawl's Redis time goes, by script: with QUEUEBENCH_SLOWLOG set, every
// node logs every command (SLOWLOG at 0 µs) over the crawl, and the crawl's entries are summed by
// script (EVALSHA's SHA, named by its keys and argument count) or by command, a page. The times are
// wall times inside the server, so inflated by a loaded machine, and the logging costs CPU itself:
// read them in proportion, and measure CPU without it.

// slowlogOn reports whether the diagnostic is asked for.
func slowlogOn() bool { return os.Getenv("QUEUEBENCH_SLOWLOG") != "" }

// startSlowlog makes every node log every command, its log emptied.
func (r *fleetRedis) startSlowlog(ctx context.Context) error {
	for _, c := range r.nodes {
		if err := c.ConfigSet(ctx, "slowlog-max-len", "2000000").Err(); err != nil {
			return err
		}
		if err := c.ConfigSet(ctx, "slowlog-log-slower-than", "0").Err(); err != nil {
			return err
		}
		if err := c.SlowLogReset(ctx).Err(); err != nil {
			return err
		}
	}
	return nil
}

// writeSlowlog prints the nodes' logs summed by script or command, a page, and stops the logging.
func (r *fleetRedis) writeSlowlog(ctx context.Context, out io.Writer, pages int) error {
	type sum struct {
		calls int
		total time.Duration
	}
	sums := map[string]*sum{}
	for _, c := range r.nodes {
		_ = c.ConfigSet(ctx, "slowlog-log-slower-than", "-1").Err()
		entries, err := c.SlowLogGet(ctx, -1).Result()
		if err != nil {
			return err
		}
		for _, e := range entries {
			name := scriptName(e.Args)
			if name == "" {
				continue
			}
			s := sums[name]
			if s == nil {
				s = &sum{}
				sums[name] = s
			}
			s.calls++
			s.total += e.Duration
		}
	}
	names := make([]string, 0, len(sums))
	for n := range sums {
		names = append(names, n)
	}
	sort.Slice(names, func(i, j int) bool { return sums[names[i]].total > sums[names[j]].total })
	p := float64(max(pages, 1))
	_, _ = fmt.Fprintf(out, "SLOWLOG by script or command, %d pages: calls a page × µs a call = µs a page\n", pages)
	for _, n := range names {
		s := sums[n]
		_, _ = fmt.Fprintf(out, "  %-40s %6.3f × %6.1f = %6.1f\n", n, float64(s.calls)/p, float64(s.total.Microseconds())/float64(s.calls), float64(s.total.Microseconds())/p)
	}
	return nil
}

// scriptName names a logged command: a script by its keys and argument count (and SHA), another
// command by its name; "" for the diagnostic's own.
func scriptName(args []string) string {
	if len(args) == 0 {
		return ""
	}
	cmd := strings.ToLower(args[0])
	switch cmd {
	case "slowlog", "config", "info", "memory", "scan":
		return ""
	case "evalsha", "eval":
	default:
		return cmd
	}
	if len(args) < 4 {
		return cmd
	}
	sha, key := args[1], args[3]
	if len(sha) > 6 {
		sha = sha[:6]
	}
	kind := key
	if i := strings.LastIndex(key, ":"); i >= 0 {
		kind = key[i+1:]
	}
	if strings.Contains(key, ":host:") {
		kind = "host"
	}
	return fmt.Sprintf("script %s keys %s %s argc %d", sha, args[2], kind, len(args))
}

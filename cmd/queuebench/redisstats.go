package main

import (
	"context"
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/collypace/ext/internal/redisproc"
	"github.com/redis/go-redis/v9"
)

// What a fleet crawl costs Redis, read from Redis's own counters on each node: INFO cpu (user + system
// seconds), INFO commandstats (calls and µs by command, the commands scripts run counted too) before
// and after the crawl, and MEMORY USAGE of the frontier's seen-set keys at the end.

// nodeCounters is what one Redis node counted since it started.
type nodeCounters struct {
	cpu   float64          // used_cpu_user + used_cpu_sys, seconds
	calls map[string]int64 // command → calls
	usec  map[string]int64 // command → µs spent in it
}

// readCounters reads a node's INFO cpu and INFO commandstats.
func readCounters(ctx context.Context, c *redis.Client) (nodeCounters, error) {
	info, err := c.Info(ctx, "cpu", "commandstats").Result()
	if err != nil {
		return nodeCounters{}, err
	}
	n := nodeCounters{calls: map[string]int64{}, usec: map[string]int64{}}
	for line := range strings.SplitSeq(info, "\n") {
		line = strings.TrimSpace(line)
		name, value, ok := strings.Cut(line, ":")
		if !ok {
			continue
		}
		switch {
		case name == "used_cpu_user" || name == "used_cpu_sys":
			f, err := strconv.ParseFloat(value, 64)
			if err != nil {
				return nodeCounters{}, fmt.Errorf("INFO cpu: %s: %w", line, err)
			}
			n.cpu += f
		case strings.HasPrefix(name, "cmdstat_"):
			cmd := strings.TrimPrefix(name, "cmdstat_")
			for field := range strings.SplitSeq(value, ",") {
				k, v, _ := strings.Cut(field, "=")
				switch k {
				case "calls":
					n.calls[cmd], _ = strconv.ParseInt(v, 10, 64)
				case "usec":
					n.usec[cmd], _ = strconv.ParseInt(v, 10, 64)
				}
			}
		}
	}
	return n, nil
}

// since is what the node counted from earlier to n.
func (n nodeCounters) since(earlier nodeCounters) nodeCounters {
	out := nodeCounters{cpu: n.cpu - earlier.cpu, calls: map[string]int64{}, usec: map[string]int64{}}
	for k, v := range n.calls {
		out.calls[k] = v - earlier.calls[k]
	}
	for k, v := range n.usec {
		out.usec[k] = v - earlier.usec[k]
	}
	return out
}

// scriptCalls is how many scripts the node ran (EVALSHA and EVAL).
func (n nodeCounters) scriptCalls() int64 { return n.calls["evalsha"] + n.calls["eval"] }

// commands is how many commands the node ran, a script's own commands counted, the scripts not.
func (n nodeCounters) commands() int64 {
	var total int64
	for k, v := range n.calls {
		if k != "evalsha" && k != "eval" && k != "info" && k != "memory" && k != "scan" {
			total += v
		}
	}
	return total
}

// fleetRedis is the Redis nodes of a fleet crawl, as the counters see them.
type fleetRedis struct {
	addr    string   // the server's, for a single one
	cluster []string // the nodes', for a cluster
	nodes   []*redis.Client
	prefix  string
	stop    func()
}

// read reads every node's counters.
func (r *fleetRedis) read(ctx context.Context) ([]nodeCounters, error) {
	out := make([]nodeCounters, len(r.nodes))
	for i, c := range r.nodes {
		n, err := readCounters(ctx, c)
		if err != nil {
			return nil, fmt.Errorf("redis node %d: %w", i, err)
		}
		out[i] = n
	}
	return out, nil
}

// seenBytes is the memory (MEMORY USAGE, every element counted) of every key of the frontier's seen
// sets, on every node, and how many keys they are.
func (r *fleetRedis) seenBytes(ctx context.Context) (bytes int64, keys int, err error) {
	for _, c := range r.nodes {
		iter := c.Scan(ctx, 0, r.prefix+"frontier{*}:seen*", 1000).Iterator()
		for iter.Next(ctx) {
			n, err := c.MemoryUsage(ctx, iter.Val(), 0).Result()
			if err != nil {
				return 0, 0, err
			}
			bytes += n
			keys++
		}
		if err := iter.Err(); err != nil {
			return 0, 0, err
		}
	}
	return bytes, keys, nil
}

// redisCost is a crawl's cost to Redis, per page sent.
type redisCost struct {
	pages          int
	scripts        int64     // script calls, every node
	commands       int64     // commands, every node (a script's own counted)
	cpu            []float64 // each node's CPU seconds over the crawl
	seenBytes      int64
	seenKeys, urls int
}

func costOf(pages int, delta []nodeCounters) redisCost {
	c := redisCost{pages: pages}
	for _, n := range delta {
		c.scripts += n.scriptCalls()
		c.commands += n.commands()
		c.cpu = append(c.cpu, n.cpu)
	}
	return c
}

// cpuPerPage is the fleet's Redis CPU a page, in µs, every node summed.
func (c redisCost) cpuPerPage() float64 {
	total := 0.0
	for _, s := range c.cpu {
		total += s
	}
	return 1e6 * total / float64(max(c.pages, 1))
}

// nodeShares is each node's share of the fleet's Redis CPU, and the largest.
func (c redisCost) nodeShares() (shares []float64, largest float64) {
	total := 0.0
	for _, s := range c.cpu {
		total += s
	}
	for _, s := range c.cpu {
		share := 0.0
		if total > 0 {
			share = s / total
		}
		shares = append(shares, share)
		largest = max(largest, share)
	}
	return shares, largest
}

// since is each node's counts from earlier to later.
func since(later, earlier []nodeCounters) []nodeCounters {
	out := make([]nodeCounters, len(later))
	for i := range later {
		out[i] = later[i].since(earlier[i])
	}
	return out
}

// startFleetRedis starts the fleet's Redis: one private redis-server on a unix socket (cluster 0), or
// a Redis Cluster of that many masters on 127.0.0.1.
func startFleetRedis(ctx context.Context, cluster int) (*fleetRedis, error) {
	if cluster == 0 {
		srv, err := redisproc.Start(ctx, "queuebench")
		if err != nil {
			return nil, err
		}
		c := redis.NewClient(&redis.Options{Network: "unix", Addr: strings.TrimPrefix(srv.Addr(), "unix://")})
		return &fleetRedis{addr: srv.Addr(), nodes: []*redis.Client{c}, stop: srv.Close}, nil
	}
	cl, err := redisproc.StartCluster(ctx, "queuebench", cluster)
	if err != nil {
		return nil, err
	}
	r := &fleetRedis{cluster: cl.Addrs, stop: cl.Close}
	for _, a := range cl.Addrs {
		r.nodes = append(r.nodes, redis.NewClient(&redis.Options{Addr: a}))
	}
	return r, nil
}

// close closes the clients and stops the servers.
func (r *fleetRedis) close() {
	for _, c := range r.nodes {
		_ = c.Close()
	}
	r.stop()
}

// writeCostTable prints what each fleet crawl cost Redis, from its own counters: over the crawl, a page
// sent (every node's CPU, the scripts run and the commands, a script's own counted); the seen sets'
// memory a URL at the end; and the seeding's CPU and scripts a URL added.
func writeCostTable(out io.Writer, cfg fleetConfig, runs []fleetRun) {
	where := "one redis-server"
	if cfg.cluster > 0 {
		where = fmt.Sprintf("a Redis Cluster of %d masters", cfg.cluster)
	}
	where += fmt.Sprintf(", the frontier in %d shard(s)", cfg.shardCount())
	_, _ = fmt.Fprintf(out, "\nRedis's own counters (INFO cpu, INFO commandstats, MEMORY USAGE), %s:\n\n", where)
	_, _ = fmt.Fprintln(out, "| crawl | pages sent | Redis CPU µs a page | each node's share of it | script calls a page | commands a page | seen set B a URL (keys) | seeding: CPU µs, script calls a URL |")
	_, _ = fmt.Fprintln(out, "|---|---|---|---|---|---|---|---|")
	for _, r := range runs {
		name := "plain"
		if r.kill {
			name = "one process killed"
		}
		c, s := r.cost, r.seedCost
		shares, _ := c.nodeShares()
		var parts []string
		for _, sh := range shares {
			parts = append(parts, fmt.Sprintf("%.0f%%", 100*sh))
		}
		pages := float64(max(c.pages, 1))
		_, _ = fmt.Fprintf(out, "| %s | %d | %.0f | %s | %.2f | %.1f | %.1f (%d) | %.0f, %.2f |\n",
			name, c.pages, c.cpuPerPage(), strings.Join(parts, " / "), float64(c.scripts)/pages, float64(c.commands)/pages,
			float64(c.seenBytes)/float64(max(c.urls, 1)), c.seenKeys, s.cpuPerPage(), float64(s.scripts)/float64(max(s.pages, 1)))
	}
}

package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptrace"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/collypace/ext"
	"github.com/collypace/ext/audit"
	"github.com/collypace/ext/redisstore"
	"github.com/gocolly/colly/v2"
	"github.com/redis/go-redis/v9"
	"github.com/rs/zerolog"
)

// fleetWorkerFlag, as the first argument, makes this program (or its test binary) one process of the
// fleet: it reads a fleetSpec as JSON on stdin, crawls the fleet's frontier, writes a fleetResult as
// JSON on stdout and exits.
const fleetWorkerFlag = "-queuebench-fleet-worker"

// fleetSpec is what one process of the fleet runs.
type fleetSpec struct {
	Index    int // names the process in its requests (workerHeader)
	Redis    string
	Cluster  []string // instead of Redis: a Redis Cluster's nodes
	Shards   int      // the frontier's shards (redisstore.WithFrontierShards; 0: 1)
	Prefix   string
	Site     string // the loopback server's address
	Workers  int
	LeaseTTL time.Duration
	Jitter   float64
	Classes  []hostClass
	Bound    time.Duration
	Audit    string // the process's audit trail, a file
	Robots   bool   // read robots.txt (fleetrobots.go)
}

// fleetResult is what one process reports: its Redis round trips and commands, and when each of its
// requests reached the wire.
type fleetResult struct {
	RoundTrips int64
	Commands   int64
	Sent       int64                // requests its collector sent
	Wire       map[string]time.Time // URL → when its headers were written (the last time, if sent twice)
	Started    map[string]time.Time // URL → when the pacer handed it to the network, its lease checked (the last time)
	Fleet      audit.FleetStats     // its figures as a member of the fleet
}

// memberFigures is an ext.Observer that keeps the process's figures as a fleet member, as its Queue
// tells them (FleetChanged).
type memberFigures struct {
	mu sync.Mutex // protects st
	st audit.FleetStats
}

func (*memberFigures) Departed(string, time.Duration)            {}
func (*memberFigures) Refused(string, audit.Trigger)             {}
func (*memberFigures) RetryAfter(string, time.Duration)          {}
func (*memberFigures) BreakerChanged(string, audit.BreakerState) {}

// FleetChanged records the member's latest figures.
func (m *memberFigures) FleetChanged(st audit.FleetStats) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.st = st
}

func (m *memberFigures) get() audit.FleetStats {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.st
}

// wireLog is the innermost RoundTripper of a fleet process: it notes when each request's headers
// reach the wire (httptrace WroteHeaders, as the pacer's own instant), to tell the pacer's spacing
// from the delivery's when a gap at the servers is short; and when the pacer handed it over, past
// its last lease check, to tell a request sent before a pause from one sent after.
type wireLog struct {
	inner   http.RoundTripper
	mu      sync.Mutex // protects at and started
	at      map[string]time.Time
	started map[string]time.Time
}

func (w *wireLog) RoundTrip(req *http.Request) (*http.Response, error) {
	u := req.URL.String()
	w.mu.Lock()
	w.started[u] = time.Now()
	w.mu.Unlock()
	trace := &httptrace.ClientTrace{WroteHeaders: func() {
		now := time.Now()
		w.mu.Lock()
		w.at[u] = now
		w.mu.Unlock()
	}}
	return w.inner.RoundTrip(req.WithContext(httptrace.WithClientTrace(req.Context(), trace)))
}

// isFleetWorker reports whether the process was started as a process of the fleet.
func isFleetWorker(args []string) bool { return len(args) > 1 && args[1] == fleetWorkerFlag }

// fleetWorkerMain runs one process of the fleet over stdin and stdout and returns the exit status.
func fleetWorkerMain(stdin io.Reader, stdout, stderr io.Writer) int {
	var spec fleetSpec
	if err := json.NewDecoder(stdin).Decode(&spec); err != nil {
		fmt.Fprintln(stderr, "queuebench fleet worker: reading the spec:", err)
		return 2
	}
	res, err := crawlFrontier(spec)
	if err != nil {
		fmt.Fprintln(stderr, "queuebench fleet worker:", err)
		return 1
	}
	if err := json.NewEncoder(stdout).Encode(res); err != nil {
		return 1
	}
	return 0
}

// roundTrips counts a client's round trips to Redis (a command, or a pipeline) and its commands.
type roundTrips struct{ trips, commands atomic.Int64 }

func (rt *roundTrips) DialHook(next redis.DialHook) redis.DialHook { return next }
func (rt *roundTrips) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		rt.trips.Add(1)
		rt.commands.Add(1)
		return next(ctx, cmd)
	}
}
func (rt *roundTrips) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		rt.trips.Add(1)
		rt.commands.Add(int64(len(cmds)))
		return next(ctx, cmds)
	}
}

// openCounted opens a redisstore.Store on a client whose round trips are counted, with the options
// redisstore.Open would set: a client of the server at addr, or, when cluster names nodes, a cluster
// client.
func openCounted(addr string, cluster []string, opts ...redisstore.Option) (*redisstore.Store, *roundTrips, error) {
	var c redis.UniversalClient
	if len(cluster) > 0 {
		c = redis.NewClusterClient(&redis.ClusterOptions{Addrs: cluster, DialTimeout: 2 * time.Second,
			MaxRetries: 1, DialerRetries: 1, ContextTimeoutEnabled: true})
	} else {
		c = redis.NewClient(&redis.Options{Network: "unix", Addr: strings.TrimPrefix(addr, "unix://"), DialTimeout: 2 * time.Second,
			MaxRetries: 1, DialerRetries: 1, ContextTimeoutEnabled: true})
	}
	rt := &roundTrips{}
	c.AddHook(rt)
	st, err := redisstore.NewErr(c, opts...)
	if err != nil {
		_ = c.Close()
		return nil, nil, err
	}
	return st, rt, nil
}

// fleetPolicies are the pacer options giving each class its interval (floor and ceiling: the adaptive
// delay does not move it) and one request in flight per host.
func fleetPolicies(classes []hostClass) []ext.Option {
	var opts []ext.Option
	for c, hc := range classes {
		opts = append(opts, ext.WithHostPolicy(fmt.Sprintf("c%d-*", c), ext.HostPolicy{BaseDelay: hc.Interval, MaxDelay: hc.Interval, MaxInFlight: 1}))
	}
	return opts
}

// crawlFrontier runs one process of the fleet: a pacer on the shared store and an ext.Queue with
// spec.Workers workers crawling the fleet's frontier until it is empty.
func crawlFrontier(spec fleetSpec) (fleetResult, error) {
	st, rt, err := openCounted(spec.Redis, spec.Cluster, redisstore.WithFrontierShards(max(spec.Shards, 1)), redisstore.WithPrefix(spec.Prefix), redisstore.WithLeaseTTL(spec.LeaseTTL))
	if err != nil {
		return fleetResult{}, err
	}
	defer st.Close()
	var d net.Dialer
	tr := &http.Transport{DialContext: func(ctx context.Context, network, _ string) (net.Conn, error) {
		return d.DialContext(ctx, network, spec.Site)
	}, MaxIdleConnsPerHost: 2, IdleConnTimeout: 30 * time.Second}
	defer tr.CloseIdleConnections()
	wire := &wireLog{inner: tr, at: map[string]time.Time{}, started: map[string]time.Time{}}
	ctx, cancel := context.WithTimeout(context.Background(), spec.Bound)
	defer cancel()
	c := colly.NewCollector(colly.StdlibContext(ctx))
	var sent atomic.Int64
	c.OnRequest(func(r *colly.Request) {
		r.Headers.Set(workerHeader, strconv.Itoa(spec.Index))
		sent.Add(1)
	})
	figures := &memberFigures{}
	opts := append([]ext.Option{ext.WithStore(st), ext.WithTransport(wire), ext.WithJitter(spec.Jitter), ext.WithObserver(figures)},
		fleetPolicies(spec.Classes)...)
	if !spec.Robots {
		opts = append(opts, ext.WithoutRobots())
	}
	if spec.Audit != "" {
		trail, err := os.Create(spec.Audit)
		if err != nil {
			return fleetResult{}, err
		}
		defer trail.Close()
		opts = append(opts, ext.WithLogger(zerolog.New(zerolog.SyncWriter(trail))))
	}
	p := ext.AdaptivePacing(c, opts...)
	q := ext.NewQueue(p, spec.Workers)
	runErr := q.Run(c)
	if err := p.Close(); err != nil && runErr == nil {
		runErr = err
	}
	wire.mu.Lock()
	defer wire.mu.Unlock()
	return fleetResult{RoundTrips: rt.trips.Load(), Commands: rt.commands.Load(), Sent: sent.Load(), Wire: wire.at, Started: wire.started, Fleet: figures.get()}, runErr
}

package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"sync"
	"time"
)

// workerFlag, as the first argument, makes this program (or its test binary) a fleet worker: it reads
// a workerSpec as JSON on stdin, crawls, writes a workerResult as JSON on stdout and exits.
const workerFlag = "-pacebench-worker"

// workerKill is how long after its Deadline (plus drainGrace) a worker process is killed.
const workerKill = 10 * time.Second

// workerSpec is what one crawler crawls and how.
type workerSpec struct {
	Mode     Mode
	URLs     []string // this crawler's share of the pages
	Hosts    []string // the keys of every host of the scenario (static rules, sampling)
	Interval time.Duration
	Jitter   float64
	Deadline time.Time // the collector's context deadline (the scenario's Limit from the start)
	Redis    string    // redisstore address shared by the fleet; "" keeps the pacer's state in memory
	Sample   bool      // sample the pacer's host states for the chart
	Member   string    // a fleet member's name, the pipeline_id of its audit events ("" for one process)
}

// workerResult is what one crawler reports back (the servers' logs are the parent's).
type workerResult struct {
	LastDone map[string]time.Time // per host key: when a response last reached the callbacks
	Audit    []byte               // the pacer's audit trail
	Deferred int                  // requests the breaker parked and never sent
	Samples  map[string][]Sample  // if Sample
	TimedOut bool                 // the Deadline passed before the crawl finished
}

// isWorker reports whether the process was started as a fleet worker.
func isWorker(args []string) bool { return len(args) > 1 && args[1] == workerFlag }

// workerMain runs a fleet worker over stdin and stdout and returns the exit status.
func workerMain(stdin io.Reader, stdout, stderr io.Writer) int {
	var spec workerSpec
	if err := json.NewDecoder(stdin).Decode(&spec); err != nil {
		fmt.Fprintln(stderr, "pacebench worker: reading the spec:", err)
		return 2
	}
	res, err := crawlClient(context.Background(), spec)
	if err != nil {
		fmt.Fprintln(stderr, "pacebench worker:", err)
		return 1
	}
	if err := json.NewEncoder(stdout).Encode(res); err != nil {
		fmt.Fprintln(stderr, "pacebench worker: writing the result:", err)
		return 1
	}
	return 0
}

// crawlFleet runs one worker process per spec, all at once, and merges their results: the last
// response time of each host, the audit trails one after another, the deferred counts summed, the
// samples of the worker asked for them. Each worker is killed workerKill after its Deadline and grace.
func crawlFleet(ctx context.Context, specs []workerSpec) (*workerResult, error) {
	exe, err := os.Executable()
	if err != nil {
		return nil, fmt.Errorf("fleet: %w", err)
	}
	results := make([]*workerResult, len(specs))
	errs := make([]error, len(specs))
	var wg sync.WaitGroup
	for i, spec := range specs {
		wg.Go(func() { results[i], errs[i] = runWorker(ctx, exe, spec) })
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			errs[i] = fmt.Errorf("fleet worker %d of %d: %w", i+1, len(specs), err)
		}
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	out := &workerResult{LastDone: map[string]time.Time{}}
	for _, r := range results {
		for h, t := range r.LastDone {
			if t.After(out.LastDone[h]) {
				out.LastDone[h] = t
			}
		}
		out.Audit = append(out.Audit, r.Audit...)
		out.Deferred += r.Deferred
		out.TimedOut = out.TimedOut || r.TimedOut
		if r.Samples != nil {
			out.Samples = r.Samples
		}
	}
	return out, nil
}

// runWorker runs one worker process and decodes its result.
func runWorker(ctx context.Context, exe string, spec workerSpec) (*workerResult, error) {
	in, err := json.Marshal(spec)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithDeadline(ctx, spec.Deadline.Add(drainGrace+workerKill))
	defer cancel()
	cmd := exec.CommandContext(ctx, exe, workerFlag)
	var stdout, stderr bytes.Buffer
	cmd.Stdin, cmd.Stdout, cmd.Stderr = bytes.NewReader(in), &stdout, &stderr
	cmd.WaitDelay = time.Second
	if err := cmd.Run(); err != nil {
		return nil, fmt.Errorf("%w: %s", err, strings.TrimSpace(stderr.String()))
	}
	var res workerResult
	if err := json.Unmarshal(stdout.Bytes(), &res); err != nil {
		return nil, fmt.Errorf("reading its result: %w (stderr: %s)", err, strings.TrimSpace(stderr.String()))
	}
	return &res, nil
}

package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strconv"
	"time"

	"github.com/collypace/ext"
	"github.com/collypace/ext/redisstore"
	"github.com/collypace/ext/sqlitestore"
	"github.com/gocolly/colly/v2"
	"github.com/rs/zerolog"
)

// crashWorkerFlag, as the first argument, makes this program (or its test binary) one process of the
// crash loop (crashloop.go): it reads a crashSpec as JSON on stdin and crawls until it is killed.
const crashWorkerFlag = "-queuebench-crash-worker"

// crashSpec is what one process of the crash loop runs.
type crashSpec struct {
	Index  int           // names the process in its requests (workerHeader)
	Store  string        // "sqlite" or "redis"
	Path   string        // the SQLite file, or the Redis address
	Site   string        // the loopback server's address
	Hosts  []string      // the hosts it crawls, every one at once
	Floor  time.Duration // the base delay
	Audit  string        // its audit trail, a file
	Opened string        // a file it creates once its store is open
	Bound  time.Duration // it stops by itself after this long (a loop left behind)
}

// isCrashWorker reports whether the process was started as a process of the crash loop.
func isCrashWorker(args []string) bool { return len(args) > 1 && args[1] == crashWorkerFlag }

// crashWorkerMain runs one process of the crash loop and returns its exit status (when not killed).
func crashWorkerMain(stdin io.Reader, stderr io.Writer) int {
	var spec crashSpec
	if err := json.NewDecoder(stdin).Decode(&spec); err != nil {
		fmt.Fprintln(stderr, "queuebench crash worker: reading the spec:", err)
		return 2
	}
	if err := crashCrawl(spec); err != nil {
		fmt.Fprintln(stderr, "queuebench crash worker:", err)
		return 1
	}
	return 0
}

// openCrashStore opens the process's store: a SQLite file, or Redis kept to its SharedStore side (the
// Queue stays in the process: the frontier is not what the crash loop measures).
func openCrashStore(kind, path string) (ext.Store, io.Closer, error) {
	switch kind {
	case "sqlite":
		st, err := sqlitestore.Open(path)
		return st, st, err
	case "redis":
		st, err := redisstore.Open(path)
		if err != nil {
			return nil, nil, err
		}
		return struct{ ext.SharedStore }{st}, st, nil
	}
	return nil, nil, fmt.Errorf("unknown store %q", kind)
}

// crashCrawl opens the store, says so, and crawls its hosts' pages with a Queue (two workers a host),
// each host at the floor, until it is killed or its bound ends.
func crashCrawl(spec crashSpec) error {
	st, closer, err := openCrashStore(spec.Store, spec.Path)
	if err != nil {
		return fmt.Errorf("open the %s store: %w", spec.Store, err)
	}
	defer closer.Close()
	if err := os.WriteFile(spec.Opened, nil, 0o600); err != nil {
		return err
	}
	trail, err := os.Create(spec.Audit)
	if err != nil {
		return err
	}
	defer trail.Close()
	var d net.Dialer
	tr := &http.Transport{DialContext: func(ctx context.Context, network, _ string) (net.Conn, error) {
		return d.DialContext(ctx, network, spec.Site)
	}}
	defer tr.CloseIdleConnections()
	ctx, cancel := context.WithTimeout(context.Background(), spec.Bound)
	defer cancel()
	c := colly.NewCollector(colly.StdlibContext(ctx))
	c.OnRequest(func(r *colly.Request) { r.Headers.Set(workerHeader, strconv.Itoa(spec.Index)) })
	p := ext.AdaptivePacing(c, ext.WithStore(st), ext.WithBaseDelay(spec.Floor), ext.WithJitter(0), ext.WithoutRobots(), ext.WithTransport(tr),
		ext.WithLogger(zerolog.New(zerolog.SyncWriter(trail))))
	q := ext.NewQueue(p, 2*len(spec.Hosts))
	for i := range 1000 {
		for _, h := range spec.Hosts {
			if err := q.AddURL(fmt.Sprintf("http://%s/r%d/p%d", h, spec.Index, i)); err != nil {
				return err
			}
		}
	}
	runErr := q.Run(c)
	if err := p.Close(); err != nil {
		return err
	}
	if runErr != nil && ctx.Err() == nil {
		return runErr
	}
	return nil
}

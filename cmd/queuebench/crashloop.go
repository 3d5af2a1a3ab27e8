package main

import (
	"bufio"
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/collypace/ext/audit"
	"github.com/collypace/ext/internal/redisproc"
	_ "modernc.org/sqlite" // PRAGMA integrity_check on the file the loop leaves
)

// The crash loop (-crashloop sqlite|redis): a crawler killed (SIGKILL) at a random instant after each
// start and started again at once, as Restart=always or an OOM-killed pod would run it, on one store.
// Each process crawls a few hosts at the floor; one host refused the first request it got with a
// Retry-After of 5 minutes. What the server saw is measured: every gap between two requests to a host,
// whichever processes sent them, against the floor; no request to the held host inside its window;
// and the store opening every time (SQLite's integrity_check at the end). A gap short at the server is
// the crawler's only when the two requests' wire instants (their delay_applied events) are short too:
// a loaded machine can read one request late.

// crashConfig is one crash loop's shape.
type crashConfig struct {
	store              string // "sqlite" or "redis"
	kills              int
	hosts              int           // hosts crawled, the held one among them
	floor              time.Duration // the base delay
	killMin, killMax   time.Duration // each process is killed at a random instant between these, after its start
	seed               uint64
	retryAfter         time.Duration // the held host's Retry-After, sent once
	serverTolerance    time.Duration // how much shorter than the floor a gap may be at the server before the wire is looked at
	wireTolerance      time.Duration // at the wire
	latency            time.Duration // how long each page takes
	holdPersistedAfter time.Duration // the first process lives at least this long after the refusal: its hold is written through
	openWithin         time.Duration // a process that lives this long says its store is open, or the store failed to open
}

func defaultCrashConfig(store string) crashConfig {
	return crashConfig{store: store, kills: 50, hosts: 6, floor: 300 * time.Millisecond, killMin: 5 * time.Millisecond, killMax: 4 * time.Second,
		seed: uint64(time.Now().UnixNano()), retryAfter: 5 * time.Minute, serverTolerance: 2 * time.Millisecond, wireTolerance: time.Millisecond,
		latency: 5 * time.Millisecond, holdPersistedAfter: 300 * time.Millisecond, openWithin: time.Second}
}

// crashArrival is one request as the server saw it.
type crashArrival struct {
	host, path string
	proc       int
	at         time.Time
}

// crashSite is the loopback server of the crash loop: every host, told apart by the Host header; the
// held one answers 429 with a Retry-After.
type crashSite struct {
	srv        *httptest.Server
	held       string
	retryAfter time.Duration
	latency    time.Duration

	mu        sync.Mutex // protects the fields below
	arrivals  []crashArrival
	refusedAt time.Time
	refused   chan struct{} // closed at the first refusal
}

func (s *crashSite) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	now := time.Now()
	host := strings.TrimSuffix(r.Host, ":80")
	proc, _ := strconv.Atoi(r.Header.Get(workerHeader))
	s.mu.Lock()
	s.arrivals = append(s.arrivals, crashArrival{host: host, path: r.URL.Path, proc: proc, at: now})
	hold := host == s.held
	if hold && s.refusedAt.IsZero() {
		s.refusedAt = now
		close(s.refused)
	}
	s.mu.Unlock()
	if hold {
		w.Header().Set("Retry-After", strconv.Itoa(int(s.retryAfter/time.Second)))
		w.WriteHeader(http.StatusTooManyRequests)
		return
	}
	time.Sleep(s.latency)
	fmt.Fprint(w, "ok")
}

// crashRun is one crash loop's measurements.
type crashRun struct {
	cfg          crashConfig
	processes    int // started
	opened       int // that said their store was open
	unopened     int // that lived long enough (openWithin) and did not say so
	failed       []string
	gaps         int
	serverUnder  int           // gaps under the floor (less serverTolerance) at the server
	wireUnder    int           // of those, short at the wire too, or with a wire instant unknown
	minGap       time.Duration // the smallest gap at the server
	minWire      time.Duration // the smallest gap between known wire instants of consecutive requests
	inWindow     int           // requests to the held host inside its window
	refused      bool          // the held host refused once
	restartHeld  int           // restart_held events in the trails
	integrity    string        // SQLite's integrity_check at the end ("ok"), or the store's state
	lifetimes    []time.Duration
	underDetails []string
}

// measureCrashLoop runs the crash loop on a fresh store.
func measureCrashLoop(ctx context.Context, cfg crashConfig) (crashRun, error) {
	r := crashRun{cfg: cfg, minGap: -1, minWire: -1}
	dir, err := os.MkdirTemp("", "queuebench-crashloop")
	if err != nil {
		return r, err
	}
	defer os.RemoveAll(dir)
	path := filepath.Join(dir, "pacing.db")
	if cfg.store == "redis" {
		srv, err := redisproc.Start(ctx, "crashloop")
		if err != nil {
			return r, err
		}
		defer srv.Close()
		path = srv.Addr()
	}
	site := &crashSite{held: "held.test", retryAfter: cfg.retryAfter, latency: cfg.latency, refused: make(chan struct{})}
	site.srv = httptest.NewServer(site)
	defer site.srv.Close()
	hosts := []string{site.held}
	for i := 1; i < cfg.hosts; i++ {
		hosts = append(hosts, fmt.Sprintf("h%d.test", i))
	}
	exe, err := os.Executable()
	if err != nil {
		return r, err
	}
	rng := rand.New(rand.NewPCG(cfg.seed, 0))
	for i := range cfg.kills {
		spec := crashSpec{Index: i + 1, Store: cfg.store, Path: path, Site: site.srv.Listener.Addr().String(), Hosts: hosts, Floor: cfg.floor,
			Audit: filepath.Join(dir, fmt.Sprintf("audit%03d.jsonl", i+1)), Opened: filepath.Join(dir, fmt.Sprintf("opened%03d", i+1)), Bound: 2 * time.Minute}
		in, _ := json.Marshal(spec)
		cmd := exec.CommandContext(ctx, exe, crashWorkerFlag)
		var stderr bytes.Buffer
		cmd.Stdin, cmd.Stderr = bytes.NewReader(in), &stderr
		start := time.Now()
		if err := cmd.Start(); err != nil {
			return r, err
		}
		r.processes++
		killAt := cfg.killMin + time.Duration(rng.Int64N(int64(cfg.killMax-cfg.killMin)+1))
		timer := time.NewTimer(killAt)
		if i == 0 { // the first lives until its hold is written through: a kill before loses it (README)
			select {
			case <-site.refused:
			case <-time.After(cfg.killMax + 10*time.Second):
			}
			site.mu.Lock()
			persisted := site.refusedAt.Add(cfg.holdPersistedAfter)
			site.mu.Unlock()
			if d := time.Until(persisted); d > time.Until(start.Add(killAt)) {
				timer.Reset(d)
			}
		}
		exited := make(chan error, 1)
		go func() { exited <- cmd.Wait() }()
		select {
		case <-timer.C:
			_ = cmd.Process.Kill() // SIGKILL
			<-exited
		case err := <-exited: // it ended by itself: it failed
			timer.Stop()
			r.failed = append(r.failed, fmt.Sprintf("process %d exited %v: %s", i+1, err, strings.TrimSpace(stderr.String())))
		}
		lived := time.Since(start)
		r.lifetimes = append(r.lifetimes, lived)
		if _, err := os.Stat(spec.Opened); err == nil {
			r.opened++
		} else if lived >= cfg.openWithin {
			r.unopened++
		}
	}
	r.integrity = crashStoreCheck(cfg.store, path)
	analyzeCrashLoop(&r, site, dir)
	return r, nil
}

// crashStoreCheck checks the store the loop leaves: SQLite's integrity_check, or that Redis answers.
func crashStoreCheck(kind, path string) string {
	if kind != "sqlite" {
		st, closer, err := openCrashStore(kind, path)
		if err != nil {
			return "open: " + err.Error()
		}
		_ = st
		_ = closer.Close()
		return "ok"
	}
	db, err := sql.Open("sqlite", "file:"+path)
	if err != nil {
		return "open: " + err.Error()
	}
	defer db.Close()
	var res string
	if err := db.QueryRow("PRAGMA integrity_check").Scan(&res); err != nil {
		return "integrity_check: " + err.Error()
	}
	st, closer, err := openCrashStore(kind, path)
	if err != nil {
		return "open: " + err.Error()
	}
	_ = st
	_ = closer.Close()
	return res
}

// analyzeCrashLoop measures the server's log against the floor, the hold and the processes' trails.
func analyzeCrashLoop(r *crashRun, site *crashSite, dir string) {
	site.mu.Lock()
	log := slices.Clone(site.arrivals)
	refusedAt := site.refusedAt
	site.mu.Unlock()
	slices.SortFunc(log, func(a, b crashArrival) int { return a.at.Compare(b.at) })
	wire, held := crashTrails(dir)
	r.restartHeld = held
	r.refused = !refusedAt.IsZero()
	window := refusedAt.Add(r.cfg.retryAfter)
	byHost := map[string][]crashArrival{}
	for _, a := range log {
		byHost[a.host] = append(byHost[a.host], a)
		if r.refused && a.host == site.held && a.at.After(refusedAt) && a.at.Before(window) {
			r.inWindow++
		}
	}
	for _, as := range byHost {
		for i := 1; i < len(as); i++ {
			gap := as[i].at.Sub(as[i-1].at)
			r.gaps++
			if r.minGap < 0 || gap < r.minGap {
				r.minGap = gap
			}
			w0, w1 := wire[as[i-1].host+as[i-1].path], wire[as[i].host+as[i].path]
			if !w0.IsZero() && !w1.IsZero() {
				if wg := w1.Sub(w0); r.minWire < 0 || wg < r.minWire {
					r.minWire = wg
				}
			}
			if gap >= r.cfg.floor-r.cfg.serverTolerance {
				continue
			}
			r.serverUnder++
			atWire := "unknown at the wire"
			if !w0.IsZero() && !w1.IsZero() {
				atWire = w1.Sub(w0).String() + " at the wire"
				if w1.Sub(w0) >= r.cfg.floor-r.cfg.wireTolerance {
					r.underDetails = append(r.underDetails, fmt.Sprintf("%s: %s (process %d) and %s (process %d) %v apart at the server, %s: read late",
						as[i].host, as[i-1].path, as[i-1].proc, as[i].path, as[i].proc, gap, atWire))
					continue
				}
			}
			r.wireUnder++
			r.underDetails = append(r.underDetails, fmt.Sprintf("%s: %s (process %d) and %s (process %d) %v apart at the server, %s: under the %v floor",
				as[i].host, as[i-1].path, as[i-1].proc, as[i].path, as[i].proc, gap, atWire, r.cfg.floor))
		}
	}
}

// crashTrails reads every process's trail: the wire instant of each request (its delay_applied
// timestamp, by host and path), and the restart_held events.
func crashTrails(dir string) (map[string]time.Time, int) {
	wire := map[string]time.Time{}
	held := 0
	files, _ := filepath.Glob(filepath.Join(dir, "audit*.jsonl"))
	for _, name := range files {
		f, err := os.Open(name)
		if err != nil {
			continue
		}
		sc := bufio.NewScanner(f)
		sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
		for sc.Scan() {
			var e map[string]any
			if json.Unmarshal(sc.Bytes(), &e) != nil { // a line cut by the kill
				continue
			}
			switch e[audit.FieldEvent] {
			case string(audit.EventRestartHeld):
				held++
			case string(audit.EventDelayApplied):
				u, _ := e[audit.FieldURL].(string)
				ts, _ := e[audit.FieldTimestamp].(string)
				at, err := time.Parse(time.RFC3339Nano, ts)
				if err == nil && strings.HasPrefix(u, "http://") {
					wire[strings.TrimPrefix(u, "http://")] = at
				}
			}
		}
		_ = f.Close()
	}
	return wire, held
}

// writeCrashTable prints crash loops as a Markdown table.
func writeCrashTable(out io.Writer, runs []crashRun) {
	_, _ = fmt.Fprintln(out, "| store | SIGKILLs | opened | gaps | under the floor at the server (short at the wire too) | smallest gap at the server (at the wire) | requests inside the Retry-After window | restart_held | store at the end |")
	_, _ = fmt.Fprintln(out, "|---|---|---|---|---|---|---|---|---|")
	for _, r := range runs {
		_, _ = fmt.Fprintf(out, "| %s | %d (%v – %v after each start, seed %d; floor %v, %d hosts) | %d of %d (%d lived %v without) | %d | %d (%d) | %v (%v) | %d (refused: %v) | %d | %s |\n",
			r.cfg.store, r.processes, r.cfg.killMin, r.cfg.killMax, r.cfg.seed, r.cfg.floor, r.cfg.hosts, r.opened, r.processes, r.unopened, r.cfg.openWithin, r.gaps, r.serverUnder, r.wireUnder,
			r.minGap.Round(100*time.Microsecond), r.minWire.Round(100*time.Microsecond), r.inWindow, r.refused, r.restartHeld, r.integrity)
	}
	for _, r := range runs {
		for _, f := range r.failed {
			_, _ = fmt.Fprintln(out, "-", r.cfg.store+":", f)
		}
		for _, d := range r.underDetails {
			_, _ = fmt.Fprintln(out, "-", r.cfg.store+":", d)
		}
	}
}

// check reports what a crash loop failed to keep.
func (r crashRun) check() error {
	var errs []error
	if len(r.failed) > 0 {
		errs = append(errs, fmt.Errorf("%d processes failed: %s", len(r.failed), strings.Join(r.failed, "; ")))
	}
	if r.unopened > 0 {
		errs = append(errs, fmt.Errorf("%d processes lived %v without opening the store", r.unopened, r.cfg.openWithin))
	}
	if r.wireUnder > 0 {
		details := r.underDetails
		if len(details) > 5 {
			details = append(details[:5:5], fmt.Sprintf("and %d more", len(details)-5))
		}
		errs = append(errs, fmt.Errorf("%d gaps under the %v floor (smallest %v at the server): %s", r.wireUnder, r.cfg.floor, r.minGap, strings.Join(details, "; ")))
	}
	if !r.refused {
		errs = append(errs, errors.New("the held host never refused"))
	}
	if r.inWindow > 0 {
		errs = append(errs, fmt.Errorf("%d requests inside the held host's Retry-After window", r.inWindow))
	}
	if r.integrity != "ok" {
		errs = append(errs, fmt.Errorf("the store at the end: %s", r.integrity))
	}
	return errors.Join(errs...)
}

package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"syscall"
	"time"

	"github.com/collypace/ext/audit"
)

// The freeze crawl (-freeze-for): process 1 of the fleet is paused (SIGSTOP) and resumed (SIGCONT),
// once or several times, as a long GC pause, a VM live-migrated, a throttled container or a closed
// laptop lid would pause it. A process cannot see its own pause: once resumed, its clock and timers
// say little happened, while its leases may have passed to other members. What is measured at the
// servers: whether the resumed process sent a URL that another member had already sent (a stale
// send: its lease had moved), the duplicates beyond those the pause explains (its requests in flight
// when it was paused, which the host's next holder is handed again), the gaps under a host's
// interval, every page fetched; and, in its audit trail, the leases it says it lost.

// freezeSpan is one pause of process 1: SIGSTOP at at (from the crawl's start), SIGCONT span later.
type freezeSpan struct{ at, span time.Duration }

// freezeSpans is count pauses of span each, the first at first, each next one every after the
// previous one's resumption.
func freezeSpans(count int, span, first, every time.Duration) []freezeSpan {
	var out []freezeSpan
	at := first
	for range count {
		out = append(out, freezeSpan{at: at, span: span})
		at += span + every
	}
	return out
}

// freezeWindow is when process 1 was paused, by this program's clock.
type freezeWindow struct{ stopped, resumed time.Time }

// freeze pauses proc by spans from start, and returns when each pause began and ended. It always
// resumes proc, even when ctx ends.
func freeze(ctx context.Context, proc *os.Process, start time.Time, spans []freezeSpan) []freezeWindow {
	var out []freezeWindow
	for _, f := range spans {
		select {
		case <-time.After(time.Until(start.Add(f.at))):
		case <-ctx.Done():
			return out
		}
		if proc.Signal(syscall.SIGSTOP) != nil {
			return out // it ended
		}
		w := freezeWindow{stopped: whenStopped(proc.Pid)}
		select {
		case <-time.After(f.span):
		case <-ctx.Done():
		}
		_ = proc.Signal(syscall.SIGCONT)
		w.resumed = time.Now()
		out = append(out, w)
	}
	return out
}

// freezeFigures is what a freeze crawl measures beyond fleetRun's figures.
type freezeFigures struct {
	pauses      int      // SIGSTOPs sent
	staleSends  int      // requests process 1 sent of a URL another process had sent before, not in flight at a pause
	inFlight    int      // process 1's requests the servers were serving when a pause began
	beyond      int      // duplicates not explained by process 1's requests in flight at a pause
	unexplained []string // each of those duplicates: its URL, and every arrival of it relative to the pauses
	leasesLost  int      // fleet_lease_lost events in process 1's trail
	givenBack   int      // the requests those events gave back to the frontier
}

// analyzeFreeze measures process 1's behaviour around its pauses from the servers' log (by arrival),
// the instants it handed its requests to the network past their lease check (started1, by URL, by its
// own account), and its audit trail.
func analyzeFreeze(log []fleetArrival, frozen []freezeWindow, started1 map[string]time.Time, trail string) freezeFigures {
	r := freezeFigures{pauses: len(frozen)}
	first := map[string]fleetArrival{}
	count := map[string]int{}
	inFlight := map[string]int{} // URL → process 1's arrivals of it in flight at a pause
	for _, a := range log {
		paused := false
		if a.worker == 1 {
			for _, w := range frozen {
				if inFlightAt(a, started1[a.url], w.stopped) {
					paused = true
				}
			}
		}
		if paused {
			r.inFlight++
			inFlight[a.url]++
		}
		if f, seen := first[a.url]; seen && a.worker == 1 && f.worker != 1 && !paused {
			r.staleSends++
		}
		if _, seen := first[a.url]; !seen {
			first[a.url] = a
		}
		count[a.url]++
	}
	for u, n := range count {
		if extra := n - 1 - inFlight[u]; extra > 0 { // each request in flight at a pause explains one copy
			r.beyond += extra
			r.unexplained = append(r.unexplained, describeArrivals(u, log, frozen, started1[u]))
		}
	}
	sort.Strings(r.unexplained)
	r.leasesLost, r.givenBack = leaseLossesIn(trail)
	return r
}

// describeArrivals lists url's arrivals (sender, arrival, answer), when the paused process last handed
// it to the network (started1) and the pauses, relative to the first pause, for a duplicate the
// figures cannot explain.
func describeArrivals(url string, log []fleetArrival, frozen []freezeWindow, started1 time.Time) string {
	if len(frozen) == 0 {
		return url
	}
	t0 := frozen[0].stopped
	ms := func(t time.Time) string {
		if t.IsZero() {
			return "-"
		}
		return fmt.Sprintf("%+dms", t.Sub(t0).Milliseconds())
	}
	var b strings.Builder
	b.WriteString(url + ":")
	for _, a := range log {
		if a.url == url {
			fmt.Fprintf(&b, " [process %d at %s answered %s]", a.worker, ms(a.at), ms(a.done))
		}
	}
	fmt.Fprintf(&b, " process 1 handed it over at %s; pauses:", ms(started1))
	for _, w := range frozen {
		fmt.Fprintf(&b, " %s..%s", ms(w.stopped), ms(w.resumed))
	}
	return b.String()
}

// ackSlack is how long before a pause a response the server finished may still be unread by the
// paused process: the server logs a response when it writes it, and the process reads it, runs its
// callbacks and marks the request done in the frontier some milliseconds later (more on a loaded
// machine). A pause in between leaves the request taken and unacknowledged: at least once, the
// host's next holder is handed it again.
const ackSlack = 250 * time.Millisecond

// whenStopped waits until every thread of process pid is stopped (state T in /proc: a SIGSTOP stops
// a thread running on the other core at its next interrupt, milliseconds after kill returns on a
// loaded machine, during which the process may still send) and returns the instant it saw them so,
// or after a second, or at once without /proc.
func whenStopped(pid int) time.Time {
	deadline := time.Now().Add(time.Second)
	for {
		tasks, err := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/stat", pid))
		if err != nil || len(tasks) == 0 {
			return time.Now()
		}
		stopped := true
		for _, t := range tasks {
			b, err := os.ReadFile(t)
			// The state follows the command's closing parenthesis: "pid (comm) S ...".
			if i := bytes.LastIndexByte(b, ')'); err == nil && i >= 0 && i+2 < len(b) && b[i+2] != 'T' && b[i+2] != 't' {
				stopped = false
				break
			}
		}
		if now := time.Now(); stopped || now.After(deadline) {
			return now
		}
		time.Sleep(100 * time.Microsecond)
	}
}

// inFlightAt reports whether arrival a was in flight for its process at stopped: it reached the server
// before, or its process handed it to the network before (started: its lease checked, nothing stops
// it; a pause before it is written or read by the server delivers it after the pause), and its
// response was not finished (or finished within ackSlack of it, unread).
func inFlightAt(a fleetArrival, started, stopped time.Time) bool {
	left := a.at.Before(stopped) || !started.IsZero() && started.Before(stopped)
	return left && (a.done.IsZero() || a.done.After(stopped.Add(-ackSlack)))
}

// leaseLossesIn counts the fleet_lease_lost events of an audit trail, and the requests they gave back.
func leaseLossesIn(path string) (events, givenBack int) {
	f, err := os.Open(path)
	if err != nil {
		return 0, 0
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Bytes()
		if !strings.Contains(string(line), string(audit.EventFleetLeaseLost)) {
			continue
		}
		var e map[string]any
		if json.Unmarshal(line, &e) != nil || e[audit.FieldEvent] != string(audit.EventFleetLeaseLost) {
			continue
		}
		events++
		if n, ok := e[audit.FieldFleetGivenBack].(float64); ok {
			givenBack += int(n)
		}
	}
	return events, givenBack
}

// freezeFleetConfig is issue 33's shape: 3 processes × 8 workers, 20 hosts every 500 ms (answering in
// 30 ms), 60 pages each, leases of redisstore's default (2 s).
func freezeFleetConfig(procs int) fleetConfig {
	cfg := defaultFleetConfig(procs)
	cfg.classes = []hostClass{{Name: "host", Hosts: 20, Interval: 500 * time.Millisecond, Latency: 30 * time.Millisecond, Pages: 60}}
	return cfg
}

// runFreezeBench runs the freeze crawl runs times, then the kill crawl as many times, and prints each
// run and the totals.
func runFreezeBench(ctx context.Context, cfg fleetConfig, runs int, out io.Writer) error {
	_, _ = fmt.Fprintf(out, "%d processes × %d workers, %d hosts:", cfg.procs, cfg.workers, cfg.hosts())
	for _, hc := range cfg.classes {
		_, _ = fmt.Fprintf(out, " %d %s (every %v, answering in %v, %d pages)", hc.Hosts, hc.Name, hc.Interval, hc.Latency, hc.Pages)
	}
	_, _ = fmt.Fprintf(out, "; leases of %v; process 1 paused %s; then SIGKILLed %v after its first page instead\n\n", cfg.leaseTTL, describeSpans(cfg.freezes), cfg.killAt)
	var freezes, kills []fleetRun
	for i := range runs {
		for _, fault := range []fleetFault{faultFreeze, faultKill} {
			r, err := measureFleet(ctx, cfg, fault)
			if err != nil {
				return err
			}
			if fault == faultFreeze {
				freezes = append(freezes, r)
			} else {
				kills = append(kills, r)
			}
			_, _ = fmt.Fprintf(out, "run %d %s: %s\n", i+1, map[fleetFault]string{faultFreeze: "freeze", faultKill: "kill"}[fault], describeRun(r, fault))
		}
	}
	_, _ = fmt.Fprintln(out)
	writeFreezeTable(out, cfg, freezes, kills)
	return nil
}

// describeSpans says how process 1 is paused.
func describeSpans(spans []freezeSpan) string {
	if len(spans) == 0 {
		return "never"
	}
	if len(spans) == 1 {
		return fmt.Sprintf("once for %v at %v", spans[0].span, spans[0].at)
	}
	every := spans[1].at - spans[0].at - spans[0].span
	return fmt.Sprintf("%d times for %v from %v, resumed %v between", len(spans), spans[0].span, spans[0].at, every)
}

// describeRun is one run's line.
func describeRun(r fleetRun, fault fleetFault) string {
	line := fmt.Sprintf("%d / %d URLs, %d duplicates, gaps under the floor %d at the servers (%d at the wire) of %d, tightest %.3f (%.3f at the wire)",
		r.fetched, r.urls, r.duplicates, r.gapsUnder, r.wireUnder, r.gaps, r.tightest, r.wireTightest)
	if fault == faultFreeze {
		f := r.freeze
		line += fmt.Sprintf("; %d pauses: stale sends %d, in flight at a pause %d, duplicates beyond them %d, leases lost %d (%d requests given back)",
			f.pauses, f.staleSends, f.inFlight, f.beyond, f.leasesLost, f.givenBack)
		for _, u := range f.unexplained {
			line += "\n    beyond: " + u
		}
	} else {
		line += fmt.Sprintf("; %d in flight at the kill, duplicates beyond them %d, takeover %v", r.victimInFlight, r.victimBeyond, r.takeover.Round(10*time.Millisecond))
	}
	if r.boundedStop {
		line += " (stopped at the bound)"
	}
	return line
}

// writeFreezeTable prints the totals of the freeze and kill runs as a Markdown table.
func writeFreezeTable(out io.Writer, cfg fleetConfig, freezes, kills []fleetRun) {
	_, _ = fmt.Fprintln(out, "| crawl | runs | every URL fetched | stale sends by the resumed process | duplicates | beyond its requests in flight | gaps under the floor (at the servers / at the wire) | tightest gap ÷ interval (servers, wire) | leases lost in its trail | takeover after the kill (longest) |")
	_, _ = fmt.Fprintln(out, "|---|---|---|---|---|---|---|---|---|---|")
	row := func(name string, rs []fleetRun, fault fleetFault) {
		if len(rs) == 0 {
			return
		}
		all, stale, dups, beyond, under, wireUnder, lost := 0, 0, 0, 0, 0, 0, 0
		tightest, wireTightest := -1.0, -1.0
		var takeover time.Duration
		for _, r := range rs {
			if r.fetched == r.urls && !r.boundedStop {
				all++
			}
			dups += r.duplicates
			under += r.gapsUnder
			wireUnder += r.wireUnder
			if r.tightest >= 0 && (tightest < 0 || r.tightest < tightest) {
				tightest = r.tightest
			}
			if r.wireTightest >= 0 && (wireTightest < 0 || r.wireTightest < wireTightest) {
				wireTightest = r.wireTightest
			}
			if fault == faultFreeze {
				stale += r.freeze.staleSends
				beyond += r.freeze.beyond
				lost += r.freeze.leasesLost
			} else {
				beyond += r.victimBeyond
				takeover = max(takeover, r.takeover)
			}
		}
		staleCol, lostCol, takeoverCol := fmt.Sprint(stale), fmt.Sprint(lost), "—"
		if fault == faultKill {
			staleCol, lostCol, takeoverCol = "—", "—", takeover.Round(10*time.Millisecond).String()
		}
		_, _ = fmt.Fprintf(out, "| %s | %d | %d of %d | %s | %d | %d | %d / %d | %.4f, %.4f (min gap %v) | %s | %s |\n", name, len(rs), all, len(rs), staleCol, dups, beyond,
			under, wireUnder, tightest, wireTightest, time.Duration(tightest*float64(minInterval(cfg))).Round(100*time.Microsecond), lostCol, takeoverCol)
	}
	row("process 1 paused "+describeSpans(cfg.freezes), freezes, faultFreeze)
	row(fmt.Sprintf("process 1 SIGKILLed %v after its first page", cfg.killAt), kills, faultKill)
}

// minInterval is the shortest interval of the crawl's hosts.
func minInterval(cfg fleetConfig) time.Duration {
	ivs := make([]time.Duration, 0, len(cfg.classes))
	for _, hc := range cfg.classes {
		ivs = append(ivs, hc.Interval)
	}
	return slices.Min(ivs)
}

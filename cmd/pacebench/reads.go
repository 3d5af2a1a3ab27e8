package main

import (
	"bytes"
	"encoding/json"
	"net/url"
	"slices"
	"time"

	"github.com/collypace/ext/audit"
	"github.com/collypace/ext/internal/scenario"
)

// A server knows when it answered a refusal; what its client could know is when it read that answer.
// A request the pacer let go before then was already on its way, and says nothing about the pacer: it
// could not have been held. The pacer's audit trail records the instant it read each Retry-After
// (retry_after_honoured's window_start; in a fleet, shared, when the hold was in the store the other
// processes read it from) and the instant it admitted each departure (delay_applied's admitted), so
// the judge of a window compares those two.

// noiseSeen records a refusals_uncorrelated event (line) as its host's first, unless an earlier one is.
func (ti trailInstants) noiseSeen(line []byte) {
	var e struct {
		Event string `json:"event"`
		Host  string `json:"target_domain"`
		At    string `json:"timestamp"`
	}
	if json.Unmarshal(line, &e) != nil || e.Event != string(audit.EventRefusalsUncorrelated) {
		return
	}
	at, err := time.Parse(time.RFC3339Nano, e.At)
	if first, ok := ti.noise[e.Host]; err == nil && (!ok || at.Before(first)) {
		ti.noise[e.Host] = at
	}
}

// trailInstants maps each host key and path to the instants, in order, at which the trail says a
// Retry-After from it was read (reads) and a request for it was admitted (admitted).
type trailInstants struct {
	reads, admitted map[string]map[string][]time.Time
	// noise is, by host key, when the capacity model first read the host's refusals as noise
	// (refusals_uncorrelated): it had seen that slowing down does not help.
	noise map[string]time.Time
}

// readsOf collects the refusal reads and the admissions of an audit trail (JSON lines; lines that do
// not parse are skipped: the trail is the pacer's own).
func readsOf(trail []byte) trailInstants {
	ti := trailInstants{reads: map[string]map[string][]time.Time{}, admitted: map[string]map[string][]time.Time{}, noise: map[string]time.Time{}}
	for line := range bytes.SplitSeq(trail, []byte("\n")) {
		if bytes.Contains(line, []byte(audit.EventRefusalsUncorrelated)) {
			ti.noiseSeen(line)
			continue
		}
		read := bytes.Contains(line, []byte(audit.EventRetryAfterHonoured))
		if !read && !bytes.Contains(line, []byte(audit.EventDelayApplied)) {
			continue
		}
		var e struct {
			Event    string `json:"event"`
			Host     string `json:"target_domain"`
			URL      string `json:"url"`
			Window   string `json:"window_start"`
			Shared   string `json:"shared"`
			Admitted string `json:"admitted"`
		}
		if json.Unmarshal(line, &e) != nil {
			continue
		}
		into, at := ti.admitted, e.Admitted
		if e.Event == string(audit.EventRetryAfterHonoured) {
			into, at = ti.reads, e.Window
			// In a fleet, the other processes read the hold from the shared store: from then on.
			if sh, err := time.Parse(time.RFC3339Nano, e.Shared); err == nil {
				if w, err := time.Parse(time.RFC3339Nano, e.Window); err == nil && sh.After(w) {
					at = e.Shared
				}
			}
		} else if e.Event != string(audit.EventDelayApplied) {
			continue
		}
		u, err := url.Parse(e.URL)
		t, terr := time.Parse(time.RFC3339Nano, at)
		if err != nil || terr != nil {
			continue
		}
		if into[e.Host] == nil {
			into[e.Host] = map[string][]time.Time{}
		}
		into[e.Host][u.Path] = append(into[e.Host][u.Path], t)
	}
	for _, m := range []map[string]map[string][]time.Time{ti.reads, ti.admitted} {
		for _, paths := range m {
			for _, ts := range paths {
				slices.SortFunc(ts, time.Time.Compare)
			}
		}
	}
	return ti
}

// arrivals returns host's arrivals with Sent moved back to when the pacer admitted each: the latest
// admission of its path at or before its send stamp. An arrival the trail does not show admitted keeps
// its stamp (the stamp comes after the admission: judging by it is stricter).
func (r trailInstants) arrivals(host string, as []scenario.Arrival) []scenario.Arrival {
	out := slices.Clone(as)
	for i, a := range out {
		if at, ok := atOrBefore(r.admitted[host][a.Path], a.Sent); ok && !a.Sent.IsZero() {
			out[i].Sent = at
		}
	}
	return out
}

// windows returns host's windows with Answered moved to when the client read each refusal: the first
// read of the refused path at or after the server decided it. A window the trail does not show read
// keeps the server's instant.
func (r trailInstants) windows(host string, ws []scenario.Window) []scenario.Window {
	out := slices.Clone(ws)
	for i, w := range out {
		if at, ok := atOrAfter(r.reads[host][w.Path], w.Issued); ok && !w.Answered.IsZero() {
			out[i].Answered = at
		}
	}
	return out
}

// atOrBefore is the latest of the sorted instants ts at or before t.
func atOrBefore(ts []time.Time, t time.Time) (time.Time, bool) {
	j, found := slices.BinarySearchFunc(ts, t, time.Time.Compare)
	switch {
	case found:
		return ts[j], true
	case j > 0:
		return ts[j-1], true
	}
	return time.Time{}, false
}

// atOrAfter is the earliest of the sorted instants ts at or after t.
func atOrAfter(ts []time.Time, t time.Time) (time.Time, bool) {
	if j, _ := slices.BinarySearchFunc(ts, t, time.Time.Compare); j < len(ts) {
		return ts[j], true
	}
	return time.Time{}, false
}

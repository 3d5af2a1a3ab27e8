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
// A request the client handed to the network before then was already on its way, and says nothing
// about the pacer: it could not have been held. The pacer's audit trail records the instant it read
// each Retry-After (retry_after_honoured's window_start), so the judge of a window uses that.

// refusalReads maps each host key and path to the instants, in order, at which the trail says a
// Retry-After from it was read.
type refusalReads map[string]map[string][]time.Time

// readsOf collects the refusal reads of an audit trail (JSON lines; lines that do not parse are
// skipped: the trail is the pacer's own).
func readsOf(trail []byte) refusalReads {
	reads := refusalReads{}
	for line := range bytes.SplitSeq(trail, []byte("\n")) {
		if !bytes.Contains(line, []byte(audit.EventRetryAfterHonoured)) {
			continue
		}
		var e struct {
			Event  string `json:"event"`
			Host   string `json:"target_domain"`
			URL    string `json:"url"`
			Window string `json:"window_start"`
		}
		if json.Unmarshal(line, &e) != nil || e.Event != string(audit.EventRetryAfterHonoured) {
			continue
		}
		u, err := url.Parse(e.URL)
		at, terr := time.Parse(time.RFC3339Nano, e.Window)
		if err != nil || terr != nil {
			continue
		}
		if reads[e.Host] == nil {
			reads[e.Host] = map[string][]time.Time{}
		}
		reads[e.Host][u.Path] = append(reads[e.Host][u.Path], at)
	}
	for _, paths := range reads {
		for _, ts := range paths {
			slices.SortFunc(ts, time.Time.Compare)
		}
	}
	return reads
}

// windows returns host's windows with Answered moved to when the client read each refusal: the first
// read of the refused path at or after the server decided it. A window the trail does not show read
// keeps the server's instant.
func (r refusalReads) windows(host string, ws []scenario.Window) []scenario.Window {
	out := slices.Clone(ws)
	for i, w := range out {
		reads := r[host][w.Path]
		if w.Answered.IsZero() {
			continue
		}
		if j, _ := slices.BinarySearchFunc(reads, w.Issued, time.Time.Compare); j < len(reads) {
			out[i].Answered = reads[j]
		}
	}
	return out
}

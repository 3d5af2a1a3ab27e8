package ext

import (
	"fmt"
	"net/http"
	"sort"
	"strings"
	"time"

	"github.com/collypace/ext/audit"
	"github.com/collypace/ext/internal/scenario"
)

// Reading a virtual-time crawl's audit trail beside the server's log: what each refusal of a rate
// limiter was, once the model had had time to learn (simLearnt). Every departure's interval and jitter
// are in its delay_applied event, stamped with the instant it reached the wire, which is the arrival's
// Sent: the two logs join exactly.

// simLearnt is how long into a crawl its refusals are explained: before it, the model is learning.
const simLearnt = 10 * time.Second

// The causes of a refusal.
const (
	// causeEdge: the departure was spaced at least the limiter's interval from the one before, and the
	// network's noise brought it closer at the server (or it came after a refused request, which a
	// bucket does not count). It says "you are at the edge", not "capacity dropped".
	causeEdge = "edge"
	// causeProbe: the interval in force was lowered below the previous departure's: a probe for more.
	causeProbe = "probe"
	// causeUnder: the interval in force was under the limiter's, and had not just been lowered: the
	// model cruised too fast (a capacity step down, or a limit learnt too low).
	causeUnder = "under"
	// causeWindow: a sliding window refused the departure although the pacer kept its interval: the
	// window still counted earlier requests, refused ones included.
	causeWindow = "window"
)

// simDeparture is one departure read from the audit trail.
type simDeparture struct {
	interval, jitter time.Duration
}

// simTrail is a host's audit trail, indexed for the joins.
type simTrail struct {
	departures map[string]simDeparture  // by URL and wire instant (RFC 3339 nanoseconds)
	increases  map[string][]simIncrease // the delays refusals set, by URL, in the trail's order
}

// simIncrease is a delay_increased event.
type simIncrease struct {
	at    time.Time
	delay time.Duration
}

// readTrail indexes the audit events of host key.
func readTrail(events []map[string]any, key string) simTrail {
	tr := simTrail{departures: map[string]simDeparture{}, increases: map[string][]simIncrease{}}
	ms := func(e map[string]any, field string) time.Duration {
		v, _ := e[field].(float64)
		return time.Duration(v * float64(time.Millisecond))
	}
	for _, e := range events {
		if e[audit.FieldTargetDomain] != key {
			continue
		}
		url, _ := e[audit.FieldURL].(string)
		ts, _ := e[audit.FieldTimestamp].(string)
		switch e[audit.FieldEvent] {
		case string(audit.EventDelayApplied):
			tr.departures[url+" "+ts] = simDeparture{interval: ms(e, audit.FieldIntervalMS), jitter: ms(e, audit.FieldJitterMS)}
		case string(audit.EventDelayIncreased):
			at, _ := time.Parse(time.RFC3339Nano, ts)
			tr.increases[url] = append(tr.increases[url], simIncrease{at: at, delay: ms(e, audit.FieldComputedDelay)})
		}
	}
	return tr
}

// simRefusal is one refusal explained.
type simRefusal struct {
	at                time.Duration // since the host's first page request
	path              string
	status            int
	cause             string
	sentGap, arrGap   time.Duration // from the previous departure (sent), from the last page accepted (arrival)
	limit             time.Duration // the limiter's interval at that instant
	interval, jitter  time.Duration // in force at its departure
	prevInterval      time.Duration // in force at the departure before
	delayAfter        time.Duration // the delay its refusal set, 0 when unchanged
	unknownDepartures bool          // a departure was missing from the trail
}

func (r simRefusal) String() string {
	s := fmt.Sprintf("+%.1fs %s %d %s: sent %.1f ms after the departure before (interval %v + jitter %v, before it %v), arrived %.1f ms after the last page accepted (limit %v)",
		r.at.Seconds(), r.path, r.status, r.cause, msf(r.sentGap), r.interval, r.jitter, r.prevInterval, msf(r.arrGap), r.limit)
	if r.delayAfter > 0 {
		s += fmt.Sprintf("; the delay went to %v", r.delayAfter)
	}
	return s
}

func msf(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// explainRefusals explains the page refusals of a rate-limited host from simLearnt on; nil for a host
// without a limiter (its refusals are not about speed).
func explainRefusals(cfg scenario.HostConfig, key string, arrivals []scenario.Arrival, tr simTrail) []simRefusal {
	limitAt := func(since time.Duration) time.Duration {
		switch c := cfg.Capacity; {
		case c != nil && c.StepAfter > 0 && since >= c.StepAfter:
			return time.Duration(float64(time.Second) / c.StepRate)
		case c != nil:
			return time.Duration(float64(time.Second) / c.Rate)
		case cfg.Sliding != nil:
			return cfg.Sliding.Period / time.Duration(cfg.Sliding.Limit)
		}
		return 0
	}
	if limitAt(0) == 0 {
		return nil
	}
	pages := scenario.PageRequests(arrivals)
	if len(pages) == 0 {
		return nil
	}
	bySent := append([]scenario.Arrival(nil), arrivals...)
	sort.SliceStable(bySent, func(i, j int) bool { return bySent[i].Sent.Before(bySent[j].Sent) })
	departure := func(a scenario.Arrival) (simDeparture, bool) {
		d, ok := tr.departures["http://"+key+a.Path+" "+a.Sent.UTC().Format(time.RFC3339Nano)]
		return d, ok
	}
	first := pages[0].At
	var out []simRefusal
	var lastOK time.Time
	for _, a := range pages {
		if a.Status == http.StatusOK {
			lastOK = a.At
			continue
		}
		since := a.At.Sub(first)
		if since < simLearnt || a.Status == 0 {
			continue
		}
		r := simRefusal{at: since, path: a.Path, status: a.Status, limit: limitAt(since), arrGap: a.At.Sub(lastOK)}
		for _, inc := range tr.increases["http://"+key+a.Path] {
			if inc.at.After(a.At) { // the first increase once its refusal was read
				r.delayAfter = inc.delay
				break
			}
		}
		i := sort.Search(len(bySent), func(i int) bool { return !bySent[i].Sent.Before(a.Sent) })
		d, ok := departure(a)
		r.interval, r.jitter = d.interval, d.jitter
		r.unknownDepartures = !ok
		if i > 0 {
			prev := bySent[i-1]
			r.sentGap = a.Sent.Sub(prev.Sent)
			p, ok := departure(prev)
			r.prevInterval = p.interval
			r.unknownDepartures = r.unknownDepartures || !ok
		}
		switch {
		case r.interval < r.prevInterval && r.interval < r.limit:
			r.cause = causeProbe
		case r.interval < r.limit:
			r.cause = causeUnder
		case cfg.Sliding != nil:
			r.cause = causeWindow
		default:
			r.cause = causeEdge
		}
		out = append(out, r)
	}
	return out
}

// causeCounts summarizes refusals as "2 edge, 1 probe" ("none" for none).
func causeCounts(rs []simRefusal) string {
	n := map[string]int{}
	for _, r := range rs {
		n[r.cause]++
	}
	var parts []string
	for _, c := range []string{causeEdge, causeProbe, causeUnder, causeWindow} {
		if n[c] > 0 {
			parts = append(parts, fmt.Sprintf("%d %s", n[c], c))
		}
	}
	if len(parts) == 0 {
		return "none"
	}
	return strings.Join(parts, ", ")
}

// delayArrows marks the events delayMoves lists: the delay's moves, and noise mode's start and end.
var delayArrows = map[any]string{
	string(audit.EventDelayIncreased):       "↑",
	string(audit.EventDelayDecreased):       "↓",
	string(audit.EventRefusalsUncorrelated): "noise ",
	string(audit.EventRefusalsCorrelated):   "rate ",
}

// delayMoves lists the adaptive delay's moves on host key from the audit trail, as "+12.3s ↑500ms
// (refusal)", and noise mode's start and end ("+20.1s noise 400ms (store)"), at most most of them, and
// how many there were.
func delayMoves(events []map[string]any, key string, first time.Time, most int) ([]string, int) {
	var out []string
	n := 0
	for _, e := range events {
		ev := e[audit.FieldEvent]
		arrow, moved := delayArrows[ev]
		if e[audit.FieldTargetDomain] != key || !moved {
			continue
		}
		n++
		if len(out) == most {
			continue
		}
		ts, _ := e[audit.FieldTimestamp].(string)
		at, _ := time.Parse(time.RFC3339Nano, ts)
		d, _ := e[audit.FieldComputedDelay].(float64)
		out = append(out, fmt.Sprintf("+%.1fs %s%vms (%v)", at.Sub(first).Seconds(), arrow, d, e[audit.FieldTrigger]))
	}
	return out, n
}

package ext

import (
	"context"
	"errors"
	"math"
	"net/url"
	"sync"
	"sync/atomic"
	"time"

	"github.com/collypace/ext/audit"
	"github.com/collypace/ext/internal/breaker"
	"github.com/collypace/ext/internal/capacity"
	"github.com/collypace/ext/internal/hostkey"
	"github.com/collypace/ext/internal/ratelimit"
)

// This file is the departure path: the host's pacing state, the admission rule (interval, jitter,
// holds, the in-flight cap) and the flight of a departure until its response is done; a request
// waits for its turn in its host's line (waitline.go). Nothing is booked ahead: a request
// that has not departed holds no slot on the schedule, so any change (an interval up or down, a hold, a
// departure reaching the wire late) applies to every waiting request at once.

// errWaitBeyondDeadline is returned when the wait of a hop the transport paces itself (a redirect hop,
// a robots.txt read) reaches its request's deadline (less deadlineMargin, left for the request itself):
// http.Client's timeout covers every hop, and a hop that cannot leave in time is retried rather than
// sent without time to answer. First requests wait in OnRequestHeaders, before that timeout starts, and
// never fail this way: they wait until they depart or their context ends. The error names the hop.
var errWaitBeyondDeadline = errors.New("ext: request deadline reached before it could depart")

// deadlineMargin is the time a redirect hop must leave before its request's deadline.
const deadlineMargin = time.Second

// maxWireWait bounds how long a departure whose headers have not reached the wire holds back the next
// one: a dial that takes longer than this (or a request that never reaches our transport) no longer
// delays the host's schedule.
const maxWireWait = 30 * time.Second

// host is one host's pacing state: the admission rule's inputs, the FIFO of waiting requests and the
// in-flight semaphore.
type host struct {
	key    string
	serial uint32 // tells this host state from one made anew after idle eviction (wraps after 4 billion)
	policy HostPolicy

	lastBodyDone atomic.Int64  // unix nanos when a response body to this host was last closed
	ready        chan struct{} // closed once the stored state is restored
	dirty        atomic.Bool   // changed since the last write-behind flush
	crawlClamped bool          // robots.txt asked for more than we honour (under mu; here, it packs beside dirty)
	rateRefused  bool          // the host has refused for rate (under mu): see capLocked
	hung         uint8         // flights presumed hung (under mu): see capLocked
	lastUse      atomic.Int64  // unix nanos of the last lookup, for idle eviction

	mu            sync.Mutex // protects the fields below
	delay         capacity.Model
	lastDeparture time.Time  // when the latest departure reached the wire (its admission until then)
	lastAccepted  time.Time  // when the latest departure the host accepted (any response but a refusal) was admitted
	fleetSeq      uint64     // the fleet's number of this process's latest departure to the host (0: none)
	fleetSeqGen   uint32     // the model's generation that departure was made in
	pool          *fleetPool // the fleet's pooled refusals, from a pooling store's latest admission here (nil: none)
	pendingSince  time.Time  // when the oldest departure admitted but not on the wire yet was admitted
	pendingWire   int32      // departures admitted whose headers have not reached the wire yet
	inFlight      int32      // departures of the blocking path whose flight has not finished: at most the cap (capLocked)
	holdUntil     time.Time  // no departure before: Retry-After window or exhausted rate limit
	holdTrigger   audit.Trigger
	crawlDelay    time.Duration
	rate          ratelimit.Signal
	brk           breaker.Breaker
	waiters       []*waiter // the FIFO; waiters[0] is the head, the only one that waits for its time
	departures    int64
	refusals      uint32 // counters for HostSnapshot (a host refused or retried 4 billion times wraps)
	retries       uint32
	saveGen       uint32      // moves as each write of the state begins and ends (see hostWrite)
	saved         *savedState // the state the shared store holds, as last written (nil: unknown)
}

func newHost(key string, p HostPolicy) *host {
	return &host{
		key:    key,
		policy: p,
		delay:  capacity.New(p.BaseDelay),
		ready:  alreadyReady,
	}
}

// alreadyReady is the ready channel of hosts with nothing to restore.
var alreadyReady = func() chan struct{} { c := make(chan struct{}); close(c); return c }()

// Reservation describes one departure: when it left, the interval and jitter that spaced it from the
// previous one and what set them. Observe takes it back with the outcome.
type Reservation struct {
	Host      string
	At        time.Time     // when the request departed (or, from ReserveAt, departs)
	Interval  time.Duration // the interval before it, jitter excluded
	Jitter    time.Duration // the random extra added to Interval
	Trigger   audit.Trigger // what set Interval (or "retry_after"/"rate_limit" when a hold ended last)
	Wait      time.Duration // how long the request waited in the pacer
	url       *url.URL      // the request, for the audit trail (nil when unknown)
	gen       uint32        // the adaptive generation at departure: one increase per burst
	compliant bool          // every constraint the host published is honoured in full
	probe     bool          // the half-open breaker's probe
	fleet     bool          // admitted by a shared store
	inFlight  int           // requests in flight to the host when it departed, itself included (0: not counted)
	robots    bool          // a robots.txt fetch: its latency says nothing about the host's pages
	traced    bool          // the transport reports when it reaches the wire, and the next departure waits for it
	afterHold bool          // the first departure since a Retry-After or rate-limit hold ended: spaced by it
	before    int64         // the host's last departure before this one (unix nanoseconds, 0: none), for unsent
	facts     fleetFacts    // admitted by a shared store: what it knows of the fleet's departures before this one

	crawlDelay   time.Duration // the Crawl-delay in force at departure
	rateInterval time.Duration // the rate-limit interval in force at departure
	h            *host
}

// intervalLocked returns the host's interval at now and what sets it.
func (h *host) intervalLocked(now time.Time) (time.Duration, audit.Trigger) {
	rate := time.Duration(0)
	if now.Before(h.rate.Until) {
		rate = h.rate.Interval
	}
	return capacity.Interval(h.policy.BaseDelay, h.crawlDelay, rate, h.delay.Delay())
}

// earliestLocked is the admission rule: a request whose jitter draw is r may depart at
// max(last departure + interval now + its jitter, hold end), with no jitter while the capacity model
// probes below its good interval (jitter would lengthen the gaps it tests), and not while an earlier departure is still
// on its way to the wire (bounded by maxWireWait). It returns that instant and the departure it would be.
func (h *host) earliestLocked(now time.Time, jitterFraction, r float64) (time.Time, Reservation) {
	iv, why := h.intervalLocked(now)
	if why == audit.TriggerAdaptive && h.delay.ProbingFaster() {
		jitterFraction = 0 // a probe's gaps are its interval: accepted, they prove that interval
	}
	jit := capacity.Jitter(iv, jitterFraction, r)
	at := h.lastDeparture.Add(iv).Add(jit)
	if h.pendingWire > 0 {
		at = later(at, h.pendingSince.Add(maxWireWait))
	}
	if h.holdUntil.After(now) && !h.holdUntil.Before(at) {
		why = h.holdTrigger
	}
	afterHold := h.lastDeparture.Before(h.holdUntil) // the first departure since a hold: it leaves at its end or later
	at = later(at, h.holdUntil)
	res := Reservation{Host: h.key, Interval: iv, Jitter: jit, Trigger: why, gen: h.delay.Gen(), compliant: !h.crawlClamped, h: h, afterHold: afterHold,
		crawlDelay: h.crawlDelay}
	if now.Before(h.rate.Until) {
		res.rateInterval = h.rate.Interval
	}
	return at, res
}

// capLocked is the in-flight cap at now: what the queueing signal allows, and on a host that has
// refused for rate no more than its interval needs (see outcomeFirst), plus the flights presumed hung;
// the policy's MaxInFlight at most. until is when a learnt cap that binds presumes one more flight hung
// (zero when none binds): a request in flight past its interval and hangGrace (a timeout coming) no
// longer holds the host back, and the next one may go.
func (h *host) capLocked(now time.Time) (limit int32, until time.Time) {
	ceiling := h.policy.MaxInFlight
	c := h.delay.InFlightCap(ceiling)
	iv := max(h.policy.BaseDelay, h.crawlDelay, h.delay.Delay())
	if h.rateRefused && c > 1 { // the p95 only where it is used: this runs at every admission
		c = min(c, outcomeFirst(h.delay.TypicalLatency(), iv))
	}
	if c >= ceiling {
		return int32(ceiling), time.Time{}
	}
	until = h.lastDeparture.Add(iv + h.hangAfterLocked())
	if h.inFlight-int32(h.hung) >= int32(c) && !now.Before(until) && int32(h.hung) < h.inFlight && h.hung < math.MaxUint8 {
		h.hung++ // the oldest flight is presumed hung: it leaves the cap to the others
	}
	return int32(min(c+int(h.hung), ceiling)), until
}

// capAt is capLocked's cap alone.
func (h *host) capAt(now time.Time) int32 {
	c, _ := h.capLocked(now)
	return c
}

// hangGrace is how long past its interval (at least, see hangAfterLocked) a departure held by a learnt
// cap waits for a flight to end: one that takes longer is presumed hung (see capLocked).
const hangGrace = time.Second

// outcomeFirst is the in-flight cap of a host that has refused for rate, whose responses typically
// take lat and whose interval is iv: the requests one interval keeps in flight, so one while a
// response comes back within an interval. The next departure then waits until the previous one's
// outcome is read (hangGrace at most): a refusal read late, by a loaded crawler, still stops it,
// and no request reaches the host inside the window that refusal announced. When the round trip is
// shorter than the interval this costs nothing.
func outcomeFirst(lat, iv time.Duration) int {
	if iv <= 0 {
		return math.MaxInt32
	}
	return int(min(1+lat/iv, math.MaxInt32))
}

// flyLocked counts a departure of the blocking path in flight until its flight finishes.
func (h *host) flyLocked(res *Reservation) {
	h.inFlight++
	res.inFlight = int(h.inFlight)
}

// landed ends a counted flight that departed at departed, at now: the next request may use its place
// under the cap.
func (h *host) landed(departed, now time.Time) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.landLocked(departed, now)
	h.wakeHeadLocked()
}

// landLocked ends a counted flight that departed at departed, at now; the caller wakes the head. A
// flight as old as a hung one ends a presumption (see capLocked); none outlives the flights.
func (h *host) landLocked(departed, now time.Time) {
	h.inFlight = max(h.inFlight-1, 0)
	if h.hung > 0 && now.Sub(departed) >= h.hangAfterLocked() {
		h.hung--
	}
	h.hung = uint8(min(int32(h.hung), h.inFlight))
}

// hangAfterLocked is how long a flight must have been in flight to be presumed hung: hangGrace, and
// at least 8 of the host's base round trips, so that a slow or queued response is not taken for one.
func (h *host) hangAfterLocked() time.Duration {
	return max(hangGrace, 8*h.delay.BaseLatency())
}

// nextLocked is when a request asking at now could depart, jitter aside.
func (h *host) nextLocked(now time.Time) time.Time {
	at, _ := h.earliestLocked(now, 0, 0)
	return at
}

// departLocked records a departure admitted at now. traced says the pacer's transport can report when
// its headers reach the wire (wired); it does when the instant matters: the host's next departure is
// an interval after it, or the fleet's is. Until then the next departure waits. With no interval (no
// delay of any kind in force) the admission instant stands for the wire: tracing a hop costs net/http
// a request copy and a context, about 2 µs a request.
func (h *host) departLocked(res *Reservation, now time.Time, traced bool) {
	res.At = now
	if !h.lastDeparture.IsZero() {
		res.before = h.lastDeparture.UnixNano()
	}
	h.lastDeparture = later(h.lastDeparture, now)
	h.departures++
	if res.fleet && res.facts.seq > 0 {
		res.facts.span = 1
		if prev := h.fleetSeq; prev > 0 && res.facts.seq > prev && h.fleetSeqGen == res.gen && res.facts.refusedSeq <= prev {
			res.facts.span = uint8(min(res.facts.seq-prev, maxFleetSpan))
		}
		h.fleetSeq, h.fleetSeqGen = res.facts.seq, res.gen // a lower number: the store lost its count, which starts again
		h.keepPoolLocked(res.facts)
	}
	res.traced = traced && (res.Interval > 0 || res.fleet)
	if res.traced {
		if h.pendingWire == 0 {
			h.pendingSince = now
		}
		h.pendingWire++
	}
}

// wired records that a traced departure reached the wire at at (sent), or will not reach it at all:
// the next departure is at least an interval after the wire instant.
func (h *host) wired(at time.Time, sent bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.pendingWire > 0 {
		h.pendingWire--
	}
	if sent {
		h.lastDeparture = later(h.lastDeparture, at)
	}
	h.wakeHeadLocked()
}

// unsent takes back the departure res, which never reached the host (its name does not resolve, its
// connection was refused): the host's schedule counts from the departure before, unless another
// departed since.
func (h *host) unsent(res Reservation) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if !h.lastDeparture.Equal(res.At) {
		return
	}
	h.lastDeparture = time.Time{}
	if res.before != 0 {
		h.lastDeparture = time.Unix(0, res.before)
	}
	h.wakeHeadLocked()
}

// AdmitAt applies the admission rule to a request to hostKey asking at now, as the head of its host's
// queue, without waiting and without a shared store: when it may depart, the departure is recorded at
// now and ok is true; otherwise nothing is recorded and the returned Reservation's At says when to ask
// again.
func (p *Pacer) AdmitAt(hostKey string, now time.Time) (Reservation, bool) {
	h := p.hostAt(hostkey.Normalize(hostKey), now)
	h.mu.Lock()
	defer h.mu.Unlock()
	at, res := h.earliestLocked(now, p.cfg.jitter, p.cfg.random())
	if at.After(now) {
		res.At = at
		return res, false
	}
	h.departLocked(&res, now, false)
	return res, true
}

// ReserveAt is AdmitAt for a caller that will wait itself: it returns the departure at the instant the
// admission rule allows (now or later) and records it there. It is for explicit-time simulations and
// tests; the blocking paths (Wait, Colly) never record a departure before it happens.
func (p *Pacer) ReserveAt(hostKey string, now time.Time) Reservation {
	h := p.hostAt(hostkey.Normalize(hostKey), now)
	h.mu.Lock()
	defer h.mu.Unlock()
	at, res := h.earliestLocked(now, p.cfg.jitter, p.cfg.random())
	at = later(at, now)
	res.Wait = at.Sub(now)
	h.departLocked(&res, at, false)
	return res
}

func later(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

// admitAt asks the breaker whether a departure may go at now.
func (h *host) admitAt(now time.Time, b BreakerPolicy) (breaker.Admission, <-chan struct{}, *breaker.Change) {
	h.mu.Lock()
	defer h.mu.Unlock()
	adm, ch := h.brk.Admit(now, b.Cooldown, h.crawlClamped && !b.IgnoreCaps)
	return adm, h.brk.Resolved(), ch
}

// abandonProbe lets another request be the half-open probe when this one gives up waiting.
func (h *host) abandonProbe() {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.brk.State() == audit.BreakerHalfOpen {
		h.brk.SettleProbe()
	}
}

// flight is one departure between its admission and the end of its response.
type flight struct {
	res         Reservation     // its host is res.h
	parent      context.Context // the collector's context, for a departure Colly announced
	claimed     atomic.Bool     // the pacing transport carried it
	wirePending atomic.Bool     // carried by the transport: its wire instant is not known yet
	finished    atomic.Bool
	verdict     atomic.Pointer[flightVerdict] // the classified outcome, once observed
	disp        *dispatch                     // a Queue's request: its lease is checked once more before it leaves

	// Carried by the pacer's transport (one hop, one response body): the body wrapper lives in the
	// flight, so that a request allocates them together. Every byte here is allocated and cleared for
	// every request: the trace hooks, needed only by a traced hop, are allocated apart.
	body flightBody
}

// flightVerdict is the verdict of a flight's outcome, kept for the binding's retry decision, with
// the status it was made for: after a redirect, the binding's response is another hop's.
type flightVerdict struct {
	v      Verdict
	status int
	at     time.Time // when the outcome was observed: the instant its hold is measured from (zero for cleanOK)
}

// wire records when the flight's request headers were written (sent), or that they never will be:
// the host's schedule counts from the wire, and the departure's audit event carries that instant.
func (f *flight) wire(p *Pacer, at time.Time, sent bool) {
	if !f.wirePending.CompareAndSwap(true, false) {
		return
	}
	if f.res.traced {
		f.res.h.wired(at, sent)
	}
	if f.res.fleet { // the store holds the fleet's next departure until it knows the wire instant
		if !sent {
			at = f.res.At
		}
		p.fleetWired(f.res.h, f.res.At, at)
	}
	if sent {
		p.auditDeparture(f, at)
	}
}

// finish gives the in-flight slot back, once; a flight that never reached the wire stops holding back
// the host's next departure.
func (f *flight) finish(p *Pacer, now time.Time) {
	if f.end(p, now) && f.res.inFlight > 0 {
		f.res.h.landed(f.res.At, now)
	}
}

// end is finish without giving the in-flight slot back, which the caller does: it reports whether
// this call ended the flight.
func (f *flight) end(p *Pacer, now time.Time) bool {
	if !f.finished.CompareAndSwap(false, true) {
		return false
	}
	f.wire(p, now, false)
	f.res.h.lastBodyDone.Store(now.UnixNano())
	return true
}

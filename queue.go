package ext

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"sync"
	"time"

	"github.com/collypace/ext/audit"
	"github.com/gocolly/colly/v2"
	"github.com/rs/zerolog"
)

// defaultQueueMemory is how many requests a Queue holds in memory before spilling to the store.
const defaultQueueMemory = 100_000

// queuePoll is how often a Queue looks again at a host it cannot predict: in-flight cap full, or a
// half-open breaker waiting for its probe.
const queuePoll = 50 * time.Millisecond

// queueCtxKey marks, in a request's colly.Context, the Queue that sent it: retries go back to it.
const queueCtxKey = "_collypace_queue"

// queueRetryKey marks, in a queued request's context values, a retry: send bypasses the revisit check.
const queueRetryKey = "_collypace_queue_retry"

// errAsyncCollector is returned by Queue.Run for a collector in Async mode: the queue's workers are
// its only goroutines, each running one request at a time.
var errAsyncCollector = errors.New("ext: Queue.Run needs a synchronous collector (Async false)")

// Queue is a crawl frontier used like Colly's queue.Queue (AddURL, AddRequest, Run with N workers) but
// aware of hosts: it keeps one FIFO per host and hands each worker the request whose host can depart
// soonest, from the pacer's own schedule, so no worker waits on a host while another host is ready;
// among hosts ready at once, the one with the longest remaining schedule goes first.
// Its goroutines are its workers, whatever the number of URLs; above a memory bound, requests spill to
// the pacer's store. Requests of a parked host (breaker open) stay queued, out of the ready set, until
// its cool-down ends; refused requests come back to the queue for their retry instead of holding a
// worker through the host's window.
//
// On a pacer whose store is a Frontier (redisstore), the Queue is the fleet's (see NewQueue to opt out):
// its requests go to the shared frontier, deduplicated there, and its workers crawl the hosts it
// leases, its share of them among the live members (queuefleet.go).
type Queue struct {
	p       *Pacer
	workers int
	maxMem  int

	mu      sync.Mutex // protects the fields below
	hosts   map[string]*queueHost
	waiting hostHeap // hosts with requests, by the time they can depart
	ready   hostHeap // hosts that can depart now, longest remaining schedule first
	inMem   int      // requests held in memory
	spilled int      // requests spilled to the store
	active  int      // requests being sent by workers
	seq     uint64   // arrival order of hosts into the ready set, for fairness
	wake    chan struct{}
	stopped bool
	notes   []auditEvent // audit events to emit once the lock is released
	invalid []error      // option values set aside, reported by NewQueue
	fleet   *queueFleet  // the fleet's frontier (queuefleet.go); nil unless the pacer's store is a Frontier
}

// queueHost is one host's FIFO.
type queueHost struct {
	key     string
	fifo    []DeferredRequest
	spilled int // this host's requests in the store or on their way there, after those in fifo
	// spilling counts, of spilled, the requests being written; spills the writes ever started. A
	// refill that no write overlapped knows, when the store returns fewer than asked, that the rest
	// are gone.
	spilling int
	spills   uint64
	readyAt  time.Time     // when its next request can depart, as last read from the pacer
	work     time.Duration // its remaining schedule: requests left × interval (the ready order)
	parked   bool          // its breaker was open when last read
	leased   bool          // this Queue holds its lease in the fleet's frontier
	drained  bool          // leased, and its last take found nothing while its requests were being sent
	sending  int           // its requests being sent by workers
	iv       time.Duration // its interval when last dispatched (the fleet's load estimate)
	busy     bool          // a worker reads its robots.txt, or the store for it (released): in no heap
	heap     *hostHeap     // the heap it is in, nil when none
	seq      uint64
	index    int // in its heap
}

// QueueOption configures a Queue.
type QueueOption func(*Queue)

// WithQueueMemory sets how many requests a Queue holds in memory before spilling the rest to the
// pacer's store (default 100 000; it must be positive). Use a durable store (sqlitestore) so spilled
// requests survive.
func WithQueueMemory(n int) QueueOption {
	return func(q *Queue) {
		if n <= 0 {
			q.invalid = append(q.invalid, fmt.Errorf("%w: WithQueueMemory(%d): not positive", ErrInvalidOption, n))
			return
		}
		q.maxMem = n
	}
}

// NewQueue returns a host-aware queue that dispatches by p's schedule with the given number of workers.
// When p's store is a Frontier (redisstore.Store is), the Queue is a member of the fleet's shared
// frontier (see Queue and the README's fleet section). To keep a Queue's URLs in its own process on
// such a store (the fleet still sharing each host's schedule), give the pacer the store behind the
// SharedStore interface alone: WithStore(struct{ SharedStore }{st}).
// Invalid values (workers < 1, see the options) follow the pacer's rule (see Option): the default is
// used (1 worker) and each is reported through p's audit log (option_invalid) and alert function.
func NewQueue(p *Pacer, workers int, opts ...QueueOption) *Queue {
	q := &Queue{p: p, workers: workers, maxMem: defaultQueueMemory, hosts: map[string]*queueHost{}, wake: make(chan struct{}),
		waiting: hostHeap{less: dueFirst}, ready: hostHeap{less: longestFirst}}
	if workers < 1 {
		q.workers = 1
		q.invalid = append(q.invalid, fmt.Errorf("%w: NewQueue(workers %d): not positive", ErrInvalidOption, workers))
	}
	for _, o := range opts {
		o(q)
	}
	p.reportInvalid(q.invalid)
	if f, ok := p.cfg.store.(Frontier); ok {
		q.fleet = newQueueFleet(f)
	}
	q.resumeSpills()
	return q
}

// resumeSpills counts, as this Queue's, the requests an earlier Queue spilled to the pacer's store and
// left there (a crawl stopped, or a process that died): Run sends them, each host's oldest first and
// before the requests added to it later. Queues sharing one store (a fleet on Redis) all count them,
// and the store's atomic take hands each request to one of them. A store that cannot be read is
// audited, and its spills are left for a later Queue.
func (q *Queue) resumeSpills() {
	ctx, cancel := context.WithTimeout(context.Background(), storeTimeout)
	defer cancel()
	left, err := q.p.deferStore.SpilledHosts(ctx)
	if err != nil {
		q.p.audit.emit(zerolog.ErrorLevel, auditEvent{at: q.p.now(), event: audit.EventStoreUnavailable, trigger: audit.TriggerStore,
			compliant: true, detail: "queue: the spills an earlier queue left could not be read, and are not resumed: " + err.Error()})
		return
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	for host, n := range left {
		if n <= 0 {
			continue
		}
		qh := q.hostLocked(host)
		qh.spilled += n
		q.spilled += n
		q.placeLocked(qh)
	}
}

// AddURL queues a GET of rawURL. On a fleet's frontier, a URL any member queued before is not queued
// again (AddNewURL says which).
func (q *Queue) AddURL(rawURL string) error {
	_, err := q.AddNewURL(rawURL)
	return err
}

// AddNewURL is AddURL, also reporting whether rawURL was new. On a fleet's frontier, added is false
// when any member queued its key before (it is not queued again); on a Queue of one process it is true
// whenever err is nil, since the Queue does not deduplicate (Colly's visited set decides when the
// request is sent).
func (q *Queue) AddNewURL(rawURL string) (added bool, err error) {
	u, err := url.Parse(rawURL)
	if err != nil {
		return false, fmt.Errorf("ext: queue: %w", err)
	}
	if u.Host == "" {
		return false, fmt.Errorf("ext: queue: %q has no host", rawURL)
	}
	return q.add(DeferredRequest{Host: q.p.cfg.hostKey(u), Method: http.MethodGet, URL: u.String(), Depth: 1, Header: http.Header{}})
}

// AddRequest queues r with its method, depth, headers, body (read now, from its start when it can
// seek) and the string values of its context.
func (q *Queue) AddRequest(r *colly.Request) error {
	d, err := captureRequest(r, q.p.cfg.hostKey(r.URL), false)
	if err != nil {
		return fmt.Errorf("ext: queue: %w", err)
	}
	_, err = q.add(d)
	return err
}

// requeue puts a refused request back for its retry (it departs when the host's window ends), with
// its whole body, marked so that send bypasses Colly's revisit check as Request.Retry does.
func (q *Queue) requeue(r *colly.Request, retries int) {
	d, err := captureRequest(r, q.p.cfg.hostKey(r.URL), true)
	if err == nil {
		d.Ctx[queueRetryKey] = "1"
		d.Ctx[retriesCtxKey] = strconv.Itoa(retries)
		_, err = q.add(d)
	}
	if err != nil {
		q.p.retrying.unmark(r)
		q.p.audit.emit(zerolog.ErrorLevel, auditEvent{at: q.p.now(), host: q.p.cfg.hostKey(r.URL), event: audit.EventRetriesExhausted,
			trigger: audit.TriggerRefusal, compliant: true, detail: "retry not queued: " + err.Error()})
	}
}

// add queues d, and reports whether it was queued: false only for a request the fleet's frontier
// held already.
func (q *Queue) add(d DeferredRequest) (bool, error) {
	var fleetErr error
	if q.fleet != nil {
		var added bool
		if added, fleetErr = q.fleetAdd(d); fleetErr == nil {
			return added, nil
		}
		// The frontier failed: kept here, sent by this Queue (never lose a URL).
	}
	q.mu.Lock()
	qh := q.hostLocked(d.Host)
	if q.inMem < q.maxMem && qh.spilled == 0 {
		qh.fifo = append(qh.fifo, d)
		q.inMem++
		q.readyLocked(qh)
		q.mu.Unlock()
		if fleetErr != nil {
			return true, fmt.Errorf("ext: queue: the fleet's frontier failed, kept in this queue: %w", fleetErr)
		}
		return true, nil
	}
	// Over the memory bound (or behind this host's spilled requests, to keep its order): the store,
	// written with the lock released. Counted meanwhile, so that Run does not end before it lands.
	qh.spilled++
	qh.spilling++
	qh.spills++
	q.spilled++
	q.mu.Unlock()
	d.DeferredAt = q.p.now()
	ctx, cancel := context.WithTimeout(context.Background(), storeTimeout)
	err := q.p.deferStore.SpillRequests(ctx, d.Host, []DeferredRequest{q.p.storable(d)})
	cancel()
	q.mu.Lock()
	defer q.mu.Unlock()
	qh.spilling--
	if err != nil {
		qh.spilled--
		q.spilled--
		qh.fifo = append(qh.fifo, d) // never lose a URL: over the bound rather than dropped
		q.inMem++
	}
	q.readyLocked(qh)
	if err != nil {
		return true, fmt.Errorf("ext: queue: spilling to the store failed, kept in memory: %w", err)
	}
	return true, nil
}

func (q *Queue) hostLocked(key string) *queueHost {
	qh := q.hosts[key]
	if qh == nil {
		qh = &queueHost{key: key}
		q.hosts[key] = qh
	}
	return qh
}

// readyLocked puts qh among the hosts to schedule when it has requests, and wakes a worker.
func (q *Queue) readyLocked(qh *queueHost) {
	q.placeLocked(qh)
	q.signalLocked()
}

// placeLocked puts a host with requests (or leased, with more to take from the fleet's frontier) that
// is in no heap and not busy into the waiting heap, to be checked against the pacer when its time
// comes. A host whose requests are all on their way to the store waits for the write to end (add
// places it then).
func (q *Queue) placeLocked(qh *queueHost) {
	if qh.heap != nil || qh.busy || len(qh.fifo)+qh.spilled-qh.spilling == 0 && (!qh.leased || qh.drained) {
		return
	}
	q.seq++
	qh.seq = q.seq
	q.waiting.push(qh)
}

func (q *Queue) signalLocked() {
	close(q.wake)
	q.wake = make(chan struct{})
}

// Size returns how many requests are queued (in memory and spilled), not counting those being sent.
// On a fleet's frontier, it is the fleet's count (queued, or taken and not done) and those this Queue
// holds outside it.
func (q *Queue) Size() int {
	if q.fleet != nil {
		return q.fleetSize()
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.inMem + q.spilled
}

// Depths returns how many requests are queued per host; on a fleet's frontier, those this Queue holds
// (taken from the hosts it leases, or kept here while the frontier failed).
func (q *Queue) Depths() map[string]int {
	q.mu.Lock()
	defer q.mu.Unlock()
	out := make(map[string]int, len(q.hosts))
	for k, qh := range q.hosts {
		if n := len(qh.fifo) + qh.spilled; n > 0 {
			out[k] = n
		}
	}
	return out
}

// Stop makes Run return once the requests being sent are done; queued requests stay queued. A stopped
// queue stays stopped: a Run after Stop (even one that had not started) returns at once.
func (q *Queue) Stop() {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.stopped = true
	q.signalLocked()
}

// Run sends the queued requests (and those added meanwhile) with c, whose pacer must be the queue's,
// and returns when the queue is empty and every worker idle, after Stop, or once c's Context ends.
// It returns nil when the queue ran dry or was stopped; the context's error when the context ended
// with requests still queued (they stay queued); an error, sending nothing, for an Async collector or
// one the queue's pacer is not installed on (it would send unpaced).
func (q *Queue) Run(c *colly.Collector) error {
	if c.Async {
		return errAsyncCollector
	}
	if _, ok := q.p.installed.Load(c); !ok {
		return errQueueUnpaced
	}
	ctx := c.Context
	if ctx == nil {
		ctx = context.Background()
	}
	var wg sync.WaitGroup
	if q.fleet != nil {
		renewDone := make(chan struct{})
		renewed := make(chan struct{})
		go func() { defer close(renewed); q.renewLeases(renewDone) }()
		defer func() { close(renewDone); <-renewed; q.releaseLeases() }()
	}
	for range q.workers {
		wg.Go(func() {
			for {
				t, ok := q.next(ctx)
				if !ok {
					return
				}
				booked, fenced := true, false
				start := time.Now()
				if t.robots {
					q.fetchRobots(c, t.d)
				} else {
					booked, fenced = q.send(c, t.d, t.lease)
				}
				keep := !booked && !fenced && ctx.Err() != nil // not sent because the crawl is ending: keep it
				if !t.robots && !keep && !fenced && t.d.Reason == queueFrontierReason {
					q.fleetSent(t.d, time.Since(start))
				}
				q.mu.Lock()
				q.active--
				if qh := q.hosts[t.d.Host]; qh != nil && fenced && t.lease != nil {
					// Its lease no longer holds: neither sent nor done, it goes back to the frontier
					// with the others this member had taken, for the host's next holder.
					q.leaseLostLocked(qh, t.lease, q.p.now())
				}
				if qh := q.hosts[t.d.Host]; qh != nil {
					qh.busy = qh.busy && !t.robots
					if !t.robots {
						qh.sending--
					}
					qh.drained = false // a request of it was sent: the frontier may have more (added meanwhile)
					if keep && (t.d.Reason != queueFrontierReason || qh.leased) {
						qh.fifo = append([]DeferredRequest{t.d}, qh.fifo...)
						q.inMem++
					}
					if !booked && qh.heap == &q.waiting { // read the schedule again: nothing departed
						qh.readyAt = time.Time{}
						q.waiting.fix(qh)
					}
					q.placeLocked(qh)
				}
				q.signalLocked() // the crawl may be over (ctx): the other workers see it
				q.mu.Unlock()
			}
		})
	}
	wg.Wait()
	if ctx.Err() != nil {
		if left := q.Size(); left > 0 {
			return fmt.Errorf("ext: queue: %d requests left queued: %w", left, context.Cause(ctx))
		}
	}
	return nil
}

// errQueueUnpaced is returned by Queue.Run for a collector the queue's pacer is not installed on.
var errQueueUnpaced = errors.New("ext: Queue.Run needs a collector paced by the queue's pacer (AdaptivePacing or Pacer.Install)")

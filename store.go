package ext

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/collypace/ext/audit"
	"github.com/collypace/ext/internal/duration"
	"github.com/collypace/ext/internal/robots"
)

// StateVersion is the version of StoredHost's layout. Stores write it with every row and return rows
// of another version with their Version set (and nothing else trusted): the pacer ignores and audits them.
const StateVersion = 1

// ErrCorruptState is returned (wrapped) by a Store for a row it cannot decode: the pacer ignores the
// row, starts the host afresh and audits it.
var ErrCorruptState = errors.New("ext: corrupt stored state")

// StoredHost is what a Store keeps of one host: enough to resume pacing it after a restart.
type StoredHost struct {
	Host          string
	Version       int           // StateVersion of the writer
	AdaptiveDelay time.Duration // the adaptive delay
	KnownLimit    time.Duration // the capacity model's good interval: the fastest delivered without refusal
	// RefusedInterval is the capacity model's other bound: the slowest interval refused for speed below
	// KnownLimit (0: none). ModelVersion orders the model's writes (unix nanoseconds of its last change):
	// a shared store keeps the newest model (AdaptiveDelay, KnownLimit, RefusedInterval) of the fleet.
	RefusedInterval time.Duration
	ModelVersion    int64
	// Noise is the capacity model's verdict on the host's refusals: whether they depend on the pace.
	// It only moves forward (audit.NoiseUndecided, NoiseSeen, NoiseRefuted): a shared store keeps the
	// greater of the stored and the given one, whatever the model's version.
	Noise          audit.NoiseVerdict
	NextDeparture  time.Time     // earliest next departure
	HoldUntil      time.Time     // no departure before: Retry-After window or exhausted rate limit
	HoldTrigger    audit.Trigger // why: audit.TriggerRetryAfter, audit.TriggerRateLimit or audit.TriggerRobots (robots.txt unavailable)
	CrawlDelay     time.Duration // the Crawl-delay honoured
	CrawlClamped   bool          // robots.txt asked for more than CrawlDelay
	Breaker        audit.BreakerState
	BreakerChanged time.Time // when the breaker entered its state
	Failures       int       // consecutive refusals
	// ParkUntil is when an open breaker parked past its cool-down (a Retry-After above the maximum
	// announced that instant) lets its probe through; zero when the breaker is not parked.
	ParkUntil time.Time
	// RateInterval is the interval a rate-limit field set, in force until RateUntil (zero: none).
	RateInterval time.Duration
	RateUntil    time.Time
	UpdatedAt    time.Time
	// Replace writes the state as given, without SaveHosts' merge: for a repaired row whose stored
	// times cannot be trusted. It is not stored.
	Replace bool
}

// DeferredRequest is a request the pacer did not send because its host's breaker was open, or one a
// Queue holds, with what is needed to send it again (Pacer.Drain, Queue.Run). Written to the store set
// with WithStore, it leaves out its credentials unless WithStoredCredentials(true) (see there).
type DeferredRequest struct {
	ID         int64 // assigned by the store to a deferred request; 0 for a spilled one
	Host       string
	Method     string
	URL        string
	Depth      int
	Header     http.Header
	Body       []byte            // nil when the request had none, or it could not be re-read (BodyLost)
	BodyLost   bool              // the request had a body that could not be re-read (not an io.Seeker)
	Ctx        map[string]string // the string values of the request's colly.Context
	DeferredAt time.Time         // when it was deferred, or spilled
	Reason     string            // why it was deferred; "" for a spilled request
}

// Store keeps per-host pacing state, the deferred requests and the requests a Queue spilled, so they
// outlive the process. Deferred and spilled requests are two kinds, kept apart: listing or draining
// deferred requests never meets a spilled one, and taking spilled requests never meets a deferred one.
// Implementations must be safe for concurrent use.
//
// A Store may also keep a record of the pacers using it, with the methods BeginSession, TouchSession
// and EndSession as sqlitestore.Store has them: a pacer started after one that ended without Close
// (killed, crashed) then holds every host its interval from its start, since the departures written
// behind in the dead one's last flush interval may be lost.
type Store interface {
	// LoadHost returns the stored state of host; ok is false when there is none. A row that cannot
	// be decoded returns an error wrapping ErrCorruptState.
	LoadHost(ctx context.Context, host string) (st StoredHost, ok bool, err error)
	// SaveHosts writes states, merging with what is stored: NextDeparture and HoldUntil keep the later
	// of the stored and the given value (another process may have booked further), and so does
	// RateUntil (with its RateInterval), unless the state has Replace set; the other fields are
	// overwritten.
	SaveHosts(ctx context.Context, states []StoredHost) error
	// AddDeferred stores a deferred request and returns its ID.
	AddDeferred(ctx context.Context, r DeferredRequest) (int64, error)
	// ListDeferred returns up to limit deferred requests, oldest first; host "" means every host.
	ListDeferred(ctx context.Context, host string, limit int) ([]DeferredRequest, error)
	// TakeDeferred removes and returns up to limit (<= 0: all) deferred requests, oldest first; host
	// "" means every host. The take is atomic as TakeSpilled's: concurrent takes never return a
	// request twice, and a request is either returned or still stored. Requests that cannot be
	// decoded stay stored, and are reported by an error wrapping ErrCorruptState returned with the
	// requests that could be; on any other error nothing is taken.
	TakeDeferred(ctx context.Context, host string, limit int) ([]DeferredRequest, error)
	// DeleteDeferred removes deferred requests by ID; unknown IDs are ignored.
	DeleteDeferred(ctx context.Context, ids []int64) error
	// SpillRequests stores, in their order, requests a Queue holds for host beyond its memory bound,
	// after those already spilled for host. Their ID and Host are not read: they are host's.
	SpillRequests(ctx context.Context, host string, reqs []DeferredRequest) error
	// TakeSpilled removes and returns up to limit (<= 0: all) of host's spilled requests, oldest
	// first, reading no other host's. The take is atomic: concurrent takes never return a request
	// twice, and a request is either returned or still stored. Requests that cannot be decoded are
	// removed with the others and reported by an error wrapping ErrCorruptState, returned with the
	// requests that could be; on any other error nothing is taken.
	TakeSpilled(ctx context.Context, host string, limit int) ([]DeferredRequest, error)
	// SpilledHosts returns how many spilled requests each host has in the store, for a new Queue to
	// resume the spills an earlier one left.
	SpilledHosts(ctx context.Context) (map[string]int, error)
	// Close releases the store.
	Close() error
}

// sessionStore is a Store that keeps a record of the pacers using it (sqlitestore.Store does), so that
// a pacer knows when the one before it ended without Close: killed (SIGKILL, an OOM kill), crashed, or
// never closed. Its last departures were written behind and may be lost; the new pacer then counts its
// own start as a departure to every host (see the README's "What survives a SIGKILL"). A pacer on a
// SharedStore does not use sessions: the shared store records each departure as it is admitted. The
// interface is unexported, as fleetObserver is: a store implements its methods, no user calls them.
type sessionStore interface {
	Store
	// BeginSession records the session id as using the store since at, and reports whether another
	// session began and did not end (killed, or still running beside it): unclean. It forgets those
	// other sessions: a session still running records itself again at its next TouchSession.
	BeginSession(ctx context.Context, id string, at time.Time) (unclean bool, err error)
	// TouchSession records that session id still uses the store at at (the pacer's write-behind does,
	// at every flush interval).
	TouchSession(ctx context.Context, id string, at time.Time) error
	// EndSession removes session id's record: its pacer closed, every state written.
	EndSession(ctx context.Context, id string) error
}

// SharedStore is a Store that several crawler processes share (Redis): it admits each departure
// atomically, by its own clock, so together they keep each host's interval and holds exactly as one
// process would. Nothing is booked ahead: a process that is told to wait asks again.
type SharedStore interface {
	Store
	// Admit decides, by the store's clock, whether a request to host may depart now: when now is at
	// or after both the stored last departure + the longest of gap, the stored AdaptiveDelay,
	// CrawlDelay and RateInterval (until RateUntil), and the stored HoldUntil, and no admitted
	// departure is still pending (on its way to the wire: see Departed). Admitted, the store records
	// now as the host's last departure and the departure as pending, for at most maxWireWait (30 s).
	// Otherwise it records nothing and says how long to wait before asking again. Either way it
	// returns the fleet's capacity model (AdaptiveDelay, KnownLimit, RefusedInterval, ModelVersion),
	// which the asking pacer adopts when it is newer than its own: the fleet learns as one model,
	// and its Noise verdict, which the pacer adopts when it is further along than its own.
	// SaveHosts keeps the stored model when it is newer than the one given, and the greater Noise.
	Admit(ctx context.Context, host string, gap time.Duration) (Admission, error)
	// Departed ends host's pending departure: its request reached the wire ago before the store's
	// now, and the last departure moves to at least that instant (a request that never reached the
	// wire is reported with the ago of its admission, which moves nothing).
	Departed(ctx context.Context, host string, ago time.Duration) error
	// Refused records that the fleet's departure numbered seq (Admission.Seq) to host was refused (or
	// was a robots.txt read: not a page the host is known to have counted as accepted), when later
	// than the one recorded: the next admissions return it as RefusedSeq.
	Refused(ctx context.Context, host string, seq uint64) error
	// CheckLost reports whether the store lost what it held (a server restarted empty) since this
	// Store last looked: the pacer then writes back every state it knows.
	CheckLost(ctx context.Context) (bool, error)
}

// refusalPool is a SharedStore that pools a fleet's refusals on each host, for the capacity model's
// noise test: whether slowing down made refusals rarer is then judged on the fleet's departures at two
// paces, not on one member's third of them (a limiter judged on a third was read as noise, and
// flooded). Its admissions return the count (Admission.PoolMark and the fields after it). A fleet on a
// store that does not pool never reads noise: it keeps backing off on a host whose refusals do not
// depend on the pace (it fails slow). redisstore.Store implements it. The interface is unexported, as
// sessionStore is: a store implements its methods, no user calls them.
type refusalPool interface {
	SharedStore
	// PoolRefused is Refused for a refusal (not a robots.txt read), counted in the pool on its side of
	// the last backoff: after it when seq is above the mark, before it when above the mark before.
	PoolRefused(ctx context.Context, host string, seq uint64) error
	// PoolBackoff marks a backoff of the fleet's pace on host at the fleet's latest departure: the
	// departures since the last mark become the pace before (added to it instead when paced, the
	// backoff answering a Retry-After, whose holds space the departures whatever the pace, or when
	// fewer than three), and the count after starts again.
	PoolBackoff(ctx context.Context, host string, paced bool) error
}

// Admission is a SharedStore's answer to Admit.
type Admission struct {
	OK            bool          // the departure may go now; the store recorded it
	Wait          time.Duration // when not OK: how long to wait before asking again
	AdaptiveDelay time.Duration // the fleet's stored adaptive delay (0: none stored)
	KnownLimit    time.Duration // the fleet's stored good interval (0: none)
	// RefusedInterval and ModelVersion complete the fleet's stored capacity model (see StoredHost).
	RefusedInterval time.Duration
	ModelVersion    int64
	Noise           audit.NoiseVerdict // the fleet's stored verdict on the host's refusals
	// Lost is true when the store found that it lost what it held (CheckLost): not OK, the pacer
	// writes back every state it knows, and the store admits nothing until every process had time to.
	Lost bool
	// Pending is true when the wait is for another process's departure still on its way to the wire.
	Pending bool
	// LeaseLost is true, from FrontierAdmit, when the lease presented no longer holds: the departure is
	// refused (not OK, no Wait), and its holder sends nothing more to the host. Fence is the host's
	// fencing token at the store: greater than the lease's when another member was granted the host
	// since; not greater when the lease ran out unrenewed.
	LeaseLost bool
	Fence     int64
	// What the store knows of the fleet's departures to the host, for the capacity model (an admitted
	// departure only): Seq numbers this departure (one more than the fleet's previous; 0: not
	// numbered), Since is the gap since the fleet's previous departure by the store's clock (0: none
	// recorded), and RefusedSeq the number of the fleet's latest departure reported refused (see
	// Refused; 0: none). A member then judges spacing by the fleet's departures, not its own third of
	// them, and knows that the departure before its own was refused (a limiter counts from the last
	// request it accepted).
	Seq, RefusedSeq uint64
	Since           time.Duration
	// What a store that pools the fleet's refusals (redisstore does) counted of the fleet's departures
	// to the host (an admitted departure only, this one counted): PoolMark is the number of the fleet's
	// departure at its last backoff (0: none yet); PoolBefore the departures of the pace before it and
	// PoolBeforeRefused those of them reported refused (halved past 64: older paces weigh half);
	// PoolAfterRefused the departures since (Seq - PoolMark) reported refused.
	PoolMark                                        uint64
	PoolBefore, PoolBeforeRefused, PoolAfterRefused uint32
}

// repairLimits bounds what a stored state may say, relative to the pacer's configuration.
type repairLimits struct {
	floor, ceiling time.Duration // the adaptive delay's range
	maxHold        time.Duration // the longest hold a response could have set
	maxCrawlDelay  time.Duration
}

// repair validates a loaded state against limits at now and fixes what cannot be trusted: negative or
// enormous durations, holds and departures further ahead than any response could have set, an unknown
// breaker state or a future schema. It returns the repaired state and one line per repair.
func (s StoredHost) repair(l repairLimits, now time.Time) (StoredHost, []string) {
	var fixes []string
	fix := func(format string, args ...any) { fixes = append(fixes, fmt.Sprintf(format, args...)) }
	if s.Version != StateVersion {
		fix("schema version %d, want %d: state ignored", s.Version, StateVersion)
		return StoredHost{Host: s.Host, Version: StateVersion, AdaptiveDelay: l.floor}, fixes
	}
	if s.AdaptiveDelay < l.floor || s.AdaptiveDelay > l.ceiling {
		fix("adaptive delay %v outside [%v, %v]: clamped", s.AdaptiveDelay, l.floor, l.ceiling)
		s.AdaptiveDelay = min(max(s.AdaptiveDelay, l.floor), l.ceiling)
	}
	if s.KnownLimit < 0 || s.KnownLimit > l.ceiling {
		fix("known limit %v outside [0, %v]: forgotten", s.KnownLimit, l.ceiling)
		s.KnownLimit = 0
	}
	if s.RefusedInterval < 0 || s.RefusedInterval > l.ceiling || (s.KnownLimit > 0 && s.RefusedInterval > s.KnownLimit) {
		fix("refused interval %v outside [0, %v] or above the known limit: forgotten", s.RefusedInterval, min(l.ceiling, max(s.KnownLimit, 0)))
		s.RefusedInterval = 0
	}
	if s.Noise > audit.NoiseRefuted {
		fix("unknown noise verdict %d: undecided", s.Noise)
		s.Noise = audit.NoiseUndecided
	}
	if s.CrawlDelay < 0 || s.CrawlDelay > l.maxCrawlDelay {
		fix("crawl delay %v outside [0, %v]: clamped", s.CrawlDelay, l.maxCrawlDelay)
		s.CrawlDelay = min(max(s.CrawlDelay, 0), l.maxCrawlDelay)
	}
	if s.Breaker != audit.BreakerOpen && !s.ParkUntil.IsZero() {
		fix("parked until %v with the breaker not open: forgotten", s.ParkUntil.UTC())
		s.ParkUntil = time.Time{}
	}
	// A park lasts until the instant the server announced, beyond any hold we accept: its hold is
	// trusted up to the park's end.
	if limit := later(now.Add(l.maxHold), s.ParkUntil); s.HoldUntil.After(limit) {
		fix("hold until %v is beyond any Retry-After we accept: shortened to %v", s.HoldUntil.UTC(), limit.UTC())
		s.HoldUntil = limit
	}
	if s.RateInterval < 0 || s.RateInterval > l.maxHold || s.RateUntil.After(now.Add(l.maxHold)) {
		fix("rate-limit interval %v until %v is beyond any rate limit we accept: forgotten", s.RateInterval, s.RateUntil.UTC())
		s.RateInterval, s.RateUntil = 0, time.Time{}
	}
	if _, ok := restoredHoldEvents[s.HoldTrigger]; !ok { // a cause we do not know: the hold is kept as a window
		s.HoldTrigger = audit.TriggerRetryAfter
	}
	// The next departure is stored as the later of the last departure + the interval and the hold (see
	// snapshot): beyond both, it cannot be trusted.
	if limit := later(now.Add(duration.Add(duration.Add(l.ceiling, l.maxCrawlDelay), s.RateInterval)), s.HoldUntil); s.NextDeparture.After(limit) {
		fix("next departure %v is beyond any interval and hold: reset", s.NextDeparture.UTC())
		s.NextDeparture = time.Time{}
	}
	if !validBreakerState(s.Breaker) {
		fix("unknown breaker state %d: closed", int(s.Breaker))
		s.Breaker, s.BreakerChanged = audit.BreakerClosed, time.Time{}
	}
	if s.BreakerChanged.After(now) {
		fix("breaker changed in the future (%v): now", s.BreakerChanged.UTC())
		s.BreakerChanged = now
	}
	if s.Failures < 0 {
		fix("negative failure count %d: 0", s.Failures)
		s.Failures = 0
	}
	return s, fixes
}

// robotsStore is a Store that shares robots.txt reads among the pacers using it (redisstore.Store and
// the in-memory store do), so that a fleet asks each origin for robots.txt once per expiry, whichever
// member crawls it: robots.Store holds the methods and what they promise. Unexported, as sessionStore:
// a store implements its methods, no user calls them.
type robotsStore interface {
	Store
	robots.Store
}

package ext

import (
	"context"
	"errors"
	"time"
)

// ErrLeaseLost is wrapped by the errors of a request a fleet's Queue did not send because its lease of
// the request's host had passed to another member, or run out (a long pause: a GC, a VM migrated, a
// SIGSTOP): the frontier hands the request to the host's next holder, and Pacer.Deferred reports true
// for it in OnError. A Frontier's FrontierTake returns it (wrapped) to an owner that no longer holds
// the host's lease.
var ErrLeaseLost = errors.New("ext: frontier lease lost")

// Lease is a fleet member's lease of one host of a Frontier, as the frontier granted it or last
// renewed it. Its Token is a fencing token: it grows at every grant of the host's lease, whoever the
// holder, and every departure taken under the lease presents it to the store (FrontierAdmit), which
// refuses it once a greater token has reached the host, or once Until has passed: a member that was
// paused past its lease sends nothing more to the host, whatever its own clock says.
type Lease struct {
	Host  string
	Token int64
	Until time.Time // when the lease runs out unrenewed, by the frontier's clock
}

// Frontier is a crawl frontier that a fleet of processes shares (redisstore.Store implements it): one
// queue of requests per host, deduplicated by key, a schedule of the hosts by when each may be sent
// to next, and host leases, so that one process at a time crawls a host. A Queue whose pacer's store
// implements Frontier queues every request there (any process's AddURL lands once) and crawls the
// hosts it leases; see the README's fleet section for what it promises.
//
// A request handed out (FrontierTake) stays the lease's until it is done (FrontierDone): when the
// lease runs out unrenewed (its process died), the next lease of the host hands it out again first,
// with Reason "redelivered" (its first taker may have sent it: at least once under faults);
// FrontierRelease puts it back as it was (never sent). Implementations must be safe for concurrent use
// by goroutines and processes.
//
// A lease is fenced: its holder's departures are admitted with FrontierAdmit, which proves in the same
// step that the lease still holds (see Lease). A Frontier that is not a SharedStore admits nothing
// itself: its FrontierAdmit is not called.
type Frontier interface {
	// FrontierAdd queues reqs, all of host, after host's queued requests, each unless its key (keys[i]
	// for reqs[i]) was queued before, or force is set (a retry). It returns how many it queued.
	FrontierAdd(ctx context.Context, host string, reqs []DeferredRequest, keys []string, force bool) (int, error)
	// FrontierLease leases to owner up to n hosts that have requests queued, whose time has come and
	// that no live lease holds, for FrontierTTL; takenOver are those whose previous lease ran out
	// unrenewed (their member died). It is also owner's heartbeat (see FrontierRenew): owner leases no
	// more than its share of the hosts with work among the live members, held counting the hosts it
	// holds already.
	FrontierLease(ctx context.Context, owner string, n int, held []string) (leases []Lease, takenOver []string, left int, next time.Duration, err error)
	// FrontierRenew is owner's heartbeat: it extends owner's leases of hosts by FrontierTTL, and marks
	// owner live for as long. It returns those hosts owner no longer holds (they ran out, and may be
	// another's), when the others now run out (until, by the frontier's clock: the earliest, when it
	// renews them in several steps), and owner's share: the hosts with work over the live members,
	// rounded up.
	FrontierRenew(ctx context.Context, owner string, hosts []string) (lost []string, until time.Time, share int, err error)
	// FrontierLeave ends owner's heartbeat at once, so that the others' shares grow without waiting for
	// it to run out.
	FrontierLeave(ctx context.Context, owner string) error
	// FrontierTake hands owner up to n of host's queued requests, oldest first, their ID set for
	// FrontierDone. held is false when host has nothing queued or handed out left (then the lease ends),
	// and when owner does not hold host's lease: then err wraps ErrLeaseLost.
	FrontierTake(ctx context.Context, owner, host string, n int) (reqs []DeferredRequest, held bool, err error)
	// FrontierAdmit is SharedStore.Admit for a departure taken from the frontier under lease, which it
	// checks in the same atomic step: when a lease of the host with a greater token has been presented
	// to it since, or lease.Until has passed by the store's clock, the departure is refused (LeaseLost,
	// with the host's Fence) and nothing is recorded. Otherwise the host's fence becomes lease.Token, and
	// the departure is decided as Admit decides it.
	FrontierAdmit(ctx context.Context, lease Lease, gap time.Duration) (Admission, error)
	// FrontierDone removes host's handed-out requests ids, done (sent, or refused for good).
	FrontierDone(ctx context.Context, host string, ids []int64) error
	// FrontierRelease ends owner's lease of host: its handed-out requests not done go back to the head
	// of its queue, and the host may be leased again after the given time (its next departure).
	FrontierRelease(ctx context.Context, owner, host string, after time.Duration) error
	// FrontierSize returns how many requests the fleet has queued or handed out and not done.
	FrontierSize(ctx context.Context) (int, error)
	// FrontierTTL returns how long a lease lasts unrenewed.
	FrontierTTL() time.Duration
}

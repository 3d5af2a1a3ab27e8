package robots

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/collypace/ext/audit"
	"github.com/collypace/ext/internal/robotstxt"
)

// Reading robots.txt once per fleet: with a store that shares reads (Store), a pacer looks in the
// store before it asks the origin, and writes what it read there, so that the pacers of a fleet ask
// each origin once per expiry whichever of them crawls it, before and after a host changes hands. A
// store that fails never stops a read: the pacer asks the origin itself and audits the failure.

// ClaimTTL is how long a claim on an origin's read holds in the store: longer than a read takes (its
// network part is cut at FetchTimeout), so that a pacer that dies holding one delays the others' read
// by at most this much.
const ClaimTTL = 3 * FetchTimeout

// ClaimWait bounds how long a pacer waits for the read another pacer claimed before it reads
// robots.txt itself: a read slower than this (one waiting for its departure slot behind a long
// Crawl-delay or Retry-After) is made twice rather than holding the host's pages longer.
const ClaimWait = FetchTimeout

// pollFirst and pollMax bound the waits between two looks at the store while another pacer's read is
// under way: doubling from the first, so that a read answered in milliseconds is seen soon and a slow
// one costs few store calls.
const (
	pollFirst = 10 * time.Millisecond
	pollMax   = 320 * time.Millisecond
)

// clockSkew is how far in the future a stored read's FetchedAt may be (another machine's clock) before
// the record is not trusted.
const clockSkew = time.Minute

// Store shares robots.txt reads among the pacers using it (redisstore.Store and the root package's
// in-memory store do), so that a fleet asks each origin for robots.txt once per expiry, whichever
// member crawls it. The first pacer to miss claims the read (ClaimRobots); another that misses
// meanwhile waits a bounded time for the result (ClaimWait), then reads it itself. Only reads that say
// what applies are shared (Shareable): a 2xx, a 3xx (a redirect chain too long) and a 4xx other than
// 429; an unreachable robots.txt (5xx, 429, a network error) is retried by each pacer on its own
// schedule, holding the host meanwhile, as without a store.
type Store interface {
	// LoadRobots returns origin's stored robots.txt read: its HTTP status, its body as read (at most
	// 500 KiB + 1 bytes) and when it was read, by the reader's clock; status 0 when there is none or it
	// expired. A record that cannot be decoded returns an error wrapping the root's ErrCorruptState.
	LoadRobots(ctx context.Context, origin string) (status int, body []byte, fetchedAt time.Time, err error)
	// SaveRobots stores a read as origin's for ttl (nothing, and the old read dropped, when ttl ≤ 0),
	// replacing any other, and ends any claim on origin.
	SaveRobots(ctx context.Context, origin string, status int, body []byte, fetchedAt time.Time, ttl time.Duration) error
	// ClaimRobots claims the read of origin's robots.txt for token, for ttl, and reports whether it got
	// it: false while a claim holds.
	ClaimRobots(ctx context.Context, origin, token string, ttl time.Duration) (bool, error)
	// ReleaseRobots ends token's claim on origin; another token's claim is left.
	ReleaseRobots(ctx context.Context, origin, token string) error
}

// Fetcher reads robots.txt for the pacer: from its store when the store shares reads and holds a
// fresh one, otherwise from the origin through its transport.
type Fetcher struct {
	Transport    http.RoundTripper // the pacer's: a robots.txt fetch departs as any request does
	Store        Store             // nil: reads are not shared
	TTL          time.Duration     // how long a read holds
	StoreTimeout time.Duration     // bounds each store call
	Corrupt      error             // what a stored record that cannot be trusted wraps (ErrCorruptState)
	Now          func() time.Time
	// SleepUntil waits until t or until ctx ends (its cause).
	SleepUntil func(ctx context.Context, t time.Time) error
	// Event audits what the store did to a read of hostKey's robots.txt.
	Event func(hostKey string, event audit.Event, detail string)
}

// Read is the outcome of a robots.txt read: asked of the origin, or found in the store.
type Read struct {
	Status    int
	Body      []byte
	Err       error
	FetchedAt time.Time
	Shared    bool // found in the store, read by another pacer (or an earlier one)
}

// Fetch reads origin's robots.txt: from the store when it shares reads and holds a fresh one,
// otherwise from the origin, writing a read that says what applies to the store.
func (f *Fetcher) Fetch(ctx context.Context, hostKey, origin, agent string) Read {
	rs := f.Store
	if rs == nil {
		return f.ask(ctx, origin, agent)
	}
	token := newToken()
	deadline := f.Now().Add(ClaimWait)
	poll := pollFirst
	corrupt := false // audited once a read
	for {
		read, err := f.load(ctx, rs, origin)
		switch {
		case ctx.Err() != nil:
			return Read{Err: context.Cause(ctx), FetchedAt: f.Now()}
		case errors.Is(err, f.Corrupt):
			if !corrupt {
				f.Event(hostKey, audit.EventStateCorrupt, "stored robots.txt of "+origin+" not trusted, read again: "+err.Error())
			}
			corrupt = true
		case err != nil:
			f.Event(hostKey, audit.EventStoreUnavailable, "robots.txt of "+origin+" read without the store: "+err.Error())
			return f.ask(ctx, origin, agent)
		case read.Shared:
			return read
		}
		sctx, cancel := context.WithTimeout(ctx, f.StoreTimeout)
		claimed, err := rs.ClaimRobots(sctx, origin, token, ClaimTTL)
		cancel()
		switch {
		case ctx.Err() != nil:
			return Read{Err: context.Cause(ctx), FetchedAt: f.Now()}
		case err != nil:
			f.Event(hostKey, audit.EventStoreUnavailable, "robots.txt of "+origin+" read without the store: "+err.Error())
			return f.ask(ctx, origin, agent)
		case claimed || !f.Now().Before(deadline):
			// Claimed, or another pacer's read took too long: read it, and share what was read. A claim
			// won just after another pacer shared its read (its save freed the claim between this
			// pacer's look and its claim) looks once more first: one read an expiry, not two.
			if claimed {
				if read, err := f.load(ctx, rs, origin); err == nil && read.Shared {
					sctx, cancel := context.WithTimeout(context.Background(), f.StoreTimeout)
					_ = rs.ReleaseRobots(sctx, origin, token) // a claim left behind only delays the next expiry's waiters
					cancel()
					return read
				}
			}
			own := f.ask(ctx, origin, agent)
			f.share(rs, hostKey, origin, token, own)
			return own
		}
		if err := f.SleepUntil(ctx, earlier(f.Now().Add(poll), deadline)); err != nil {
			return Read{Err: err, FetchedAt: f.Now()}
		}
		poll = min(2*poll, pollMax)
	}
}

// ask reads origin's robots.txt from the origin.
func (f *Fetcher) ask(ctx context.Context, origin, agent string) Read {
	status, body, err := get(ctx, f.Transport, origin, agent)
	return Read{Status: status, Body: body, Err: err, FetchedAt: f.Now()}
}

// load returns origin's stored read (Shared) when one is there and can be trusted at now: its status
// says what applies, its body is within the read limit, it was read no later than now (give or take
// clockSkew), and this pacer's TTL for it has not run out. A record that cannot be trusted returns an
// error wrapping f.Corrupt.
func (f *Fetcher) load(ctx context.Context, rs Store, origin string) (Read, error) {
	sctx, cancel := context.WithTimeout(ctx, f.StoreTimeout)
	defer cancel()
	status, body, fetchedAt, err := rs.LoadRobots(sctx, origin)
	if err != nil || status == 0 {
		return Read{}, err
	}
	now := f.Now()
	switch {
	case !Shareable(status, nil):
		return Read{}, fmt.Errorf("%w: status %d is not a read that says what applies", f.Corrupt, status)
	case len(body) > robotstxt.MaxBody+1:
		return Read{}, fmt.Errorf("%w: body of %d bytes, over the read limit", f.Corrupt, len(body))
	case fetchedAt.IsZero() || fetchedAt.After(now.Add(clockSkew)):
		return Read{}, fmt.Errorf("%w: read at %v, not before now", f.Corrupt, fetchedAt.UTC())
	case !now.Before(fetchedAt.Add(f.TTL)):
		return Read{}, nil // this pacer's TTL is over: read again
	}
	return Read{Status: status, Body: body, FetchedAt: fetchedAt, Shared: true}, nil
}

// share writes a read that says what applies to the store, and otherwise gives the claim up, so that
// another pacer waiting for it reads robots.txt itself.
func (f *Fetcher) share(rs Store, hostKey, origin, token string, read Read) {
	ctx, cancel := context.WithTimeout(context.Background(), f.StoreTimeout)
	defer cancel()
	var err error
	if Shareable(read.Status, read.Err) {
		err = rs.SaveRobots(ctx, origin, read.Status, read.Body, read.FetchedAt, read.FetchedAt.Add(f.TTL).Sub(f.Now()))
	} else {
		err = rs.ReleaseRobots(ctx, origin, token)
	}
	if err != nil {
		f.Event(hostKey, audit.EventStoreUnavailable, "robots.txt of "+origin+" not shared: "+err.Error())
	}
}

// Shareable reports whether a read with this status and error says what applies (RFC 9309): its
// rules, or none (unavailable). An unreachable robots.txt is retried by each pacer on its own
// schedule, and a void read (cancelled, refused by the breaker) says nothing.
func Shareable(status int, err error) bool {
	return err == nil && robotstxt.StatusClass(status) != robotstxt.Unreachable
}

// newToken names one claim on a read.
func newToken() string {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

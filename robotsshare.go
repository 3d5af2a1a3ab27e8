package ext

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"time"

	"github.com/collypace/ext/audit"
	"github.com/collypace/ext/internal/robotstxt"
	"github.com/rs/zerolog"
)

// Reading robots.txt once per fleet: with a store that shares reads (robotsStore), a pacer looks in
// the store before it asks the origin, and writes what it read there, so that the pacers of a fleet
// ask each origin once per expiry whichever of them crawls it, before and after a host changes hands.
// A store that fails never stops a read: the pacer asks the origin itself and audits the failure.

// robotsClaimTTL is how long a claim on an origin's read holds in the store: longer than a read takes
// (its network part is cut at robotsFetchTimeout), so that a pacer that dies holding one delays the
// others' read by at most this much.
const robotsClaimTTL = 3 * robotsFetchTimeout

// robotsClaimWait bounds how long a pacer waits for the read another pacer claimed before it reads
// robots.txt itself: a read slower than this (one waiting for its departure slot behind a long
// Crawl-delay or Retry-After) is made twice rather than holding the host's pages longer.
const robotsClaimWait = robotsFetchTimeout

// robotsPollFirst and robotsPollMax bound the waits between two looks at the store while another
// pacer's read is under way: doubling from the first, so that a read answered in milliseconds is seen
// soon and a slow one costs few store calls.
const (
	robotsPollFirst = 10 * time.Millisecond
	robotsPollMax   = 320 * time.Millisecond
)

// robotsClockSkew is how far in the future a stored read's FetchedAt may be (another machine's clock)
// before the record is not trusted.
const robotsClockSkew = time.Minute

// robotsRead is the outcome of a robots.txt read: asked of the origin, or found in the store.
type robotsRead struct {
	status    int
	body      []byte
	err       error
	fetchedAt time.Time
	shared    bool // found in the store, read by another pacer (or an earlier one)
}

// fetchRobots reads origin's robots.txt: from the store when it shares reads and holds a fresh one,
// otherwise from the origin (getRobots), writing a read that says what applies to the store.
func (p *Pacer) fetchRobots(ctx context.Context, hostKey, origin, agent string) robotsRead {
	rs, ok := p.cfg.store.(robotsStore)
	if !ok {
		return p.askRobots(ctx, origin, agent)
	}
	token := newRobotsToken()
	deadline := p.now().Add(robotsClaimWait)
	poll := robotsPollFirst
	corrupt := false // audited once a read
	for {
		read, err := p.loadRobots(ctx, rs, origin)
		switch {
		case ctx.Err() != nil:
			return robotsRead{err: context.Cause(ctx), fetchedAt: p.now()}
		case errors.Is(err, ErrCorruptState):
			if !corrupt {
				p.robotsStoreEvent(hostKey, audit.EventStateCorrupt, "stored robots.txt of "+origin+" not trusted, read again: "+err.Error())
			}
			corrupt = true
		case err != nil:
			p.robotsStoreEvent(hostKey, audit.EventStoreUnavailable, "robots.txt of "+origin+" read without the store: "+err.Error())
			return p.askRobots(ctx, origin, agent)
		case read.shared:
			return read
		}
		sctx, cancel := context.WithTimeout(ctx, storeTimeout)
		claimed, err := rs.ClaimRobots(sctx, origin, token, robotsClaimTTL)
		cancel()
		switch {
		case ctx.Err() != nil:
			return robotsRead{err: context.Cause(ctx), fetchedAt: p.now()}
		case err != nil:
			p.robotsStoreEvent(hostKey, audit.EventStoreUnavailable, "robots.txt of "+origin+" read without the store: "+err.Error())
			return p.askRobots(ctx, origin, agent)
		case claimed || !p.now().Before(deadline):
			// Claimed, or another pacer's read took too long: read it, and share what was read. A claim
			// won just after another pacer shared its read (its save freed the claim between this
			// pacer's look and its claim) looks once more first: one read an expiry, not two.
			if claimed {
				if read, err := p.loadRobots(ctx, rs, origin); err == nil && read.shared {
					sctx, cancel := context.WithTimeout(context.Background(), storeTimeout)
					_ = rs.ReleaseRobots(sctx, origin, token) // a claim left behind only delays the next expiry's waiters
					cancel()
					return read
				}
			}
			own := p.askRobots(ctx, origin, agent)
			p.shareRobots(rs, hostKey, origin, token, own)
			return own
		}
		if err := p.sleepUntil(ctx, earlier(p.now().Add(poll), deadline)); err != nil {
			return robotsRead{err: err, fetchedAt: p.now()}
		}
		poll = min(2*poll, robotsPollMax)
	}
}

// askRobots reads origin's robots.txt from the origin.
func (p *Pacer) askRobots(ctx context.Context, origin, agent string) robotsRead {
	status, body, err := p.getRobots(ctx, origin, agent)
	return robotsRead{status: status, body: body, err: err, fetchedAt: p.now()}
}

// loadRobots returns origin's stored read (shared) when one is there and can be trusted at now: its
// status says what applies, its body is within the read limit, it was read no later than now (give or
// take robotsClockSkew), and this pacer's TTL for it has not run out. A record that cannot be trusted
// returns an error wrapping ErrCorruptState.
func (p *Pacer) loadRobots(ctx context.Context, rs robotsStore, origin string) (robotsRead, error) {
	sctx, cancel := context.WithTimeout(ctx, storeTimeout)
	defer cancel()
	status, body, fetchedAt, err := rs.LoadRobots(sctx, origin)
	if err != nil || status == 0 {
		return robotsRead{}, err
	}
	now := p.now()
	switch {
	case !robotsShareable(status, nil):
		return robotsRead{}, fmt.Errorf("%w: status %d is not a read that says what applies", ErrCorruptState, status)
	case len(body) > robotstxt.MaxBody+1:
		return robotsRead{}, fmt.Errorf("%w: body of %d bytes, over the read limit", ErrCorruptState, len(body))
	case fetchedAt.IsZero() || fetchedAt.After(now.Add(robotsClockSkew)):
		return robotsRead{}, fmt.Errorf("%w: read at %v, not before now", ErrCorruptState, fetchedAt.UTC())
	case !now.Before(fetchedAt.Add(p.cfg.robotsTTL)):
		return robotsRead{}, nil // this pacer's TTL is over: read again
	}
	return robotsRead{status: status, body: body, fetchedAt: fetchedAt, shared: true}, nil
}

// shareRobots writes a read that says what applies to the store, and otherwise gives the claim up,
// so that another pacer waiting for it reads robots.txt itself.
func (p *Pacer) shareRobots(rs robotsStore, hostKey, origin, token string, read robotsRead) {
	ctx, cancel := context.WithTimeout(context.Background(), storeTimeout)
	defer cancel()
	var err error
	if robotsShareable(read.status, read.err) {
		err = rs.SaveRobots(ctx, origin, read.status, read.body, read.fetchedAt, read.fetchedAt.Add(p.cfg.robotsTTL).Sub(p.now()))
	} else {
		err = rs.ReleaseRobots(ctx, origin, token)
	}
	if err != nil {
		p.robotsStoreEvent(hostKey, audit.EventStoreUnavailable, "robots.txt of "+origin+" not shared: "+err.Error())
	}
}

// robotsShareable reports whether a read with this status and error says what applies (RFC 9309): its
// rules, or none (unavailable). An unreachable robots.txt is retried by each pacer on its own
// schedule, and a void read (cancelled, refused by the breaker) says nothing.
func robotsShareable(status int, err error) bool {
	return err == nil && robotstxt.StatusClass(status) != robotstxt.Unreachable
}

// robotsStoreEvent audits what the store did to a robots.txt read.
func (p *Pacer) robotsStoreEvent(hostKey string, event audit.Event, detail string) {
	p.audit.emit(zerolog.ErrorLevel, auditEvent{at: p.now(), host: hostKey, event: event, trigger: audit.TriggerStore,
		compliant: true, detail: detail})
}

// newRobotsToken names one claim on a read.
func newRobotsToken() string {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

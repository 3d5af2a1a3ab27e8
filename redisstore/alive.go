package redisstore

import (
	"context"
	"time"

	"github.com/redis/go-redis/v9"
)

// A Store's alive key (<prefix>alive:<token>) says that the process holding it still runs: each
// admission that finds it older than a quarter of aliveTTL, and every loss check (the pacer's, every
// 200 ms), set it for aliveTTL, in the pipeline they send anyway. A departure admitted and pending (on its way
// to the wire) holds its host for the fleet until its wire instant is reported, or pendingBound; when
// its Store's alive key is gone, the process died, and its departure reached the wire before it did or
// never will: the next admission ends it (endDeadPending) instead of waiting out pendingBound, so that
// a host a dead member was sending to is taken over within its lease, not 30 s later.

// aliveTTL is how long a Store's alive key lasts unrefreshed: the fleet's lease length (a member is
// dead when its leases would run out), at least minAliveTTL.
func (s *Store) aliveTTL() time.Duration { return max(s.FrontierTTL(), minAliveTTL) }

// minAliveTTL keeps the alive key well above the 200 ms between the pacer's loss checks, so that a
// busy process is never taken for dead.
const minAliveTTL = time.Second

func (s *Store) aliveKey(token string) string { return s.prefix + "alive:" + token }

// aliveDue reports whether the Store's alive key is due for a refresh: older than a quarter of its
// length.
func (s *Store) aliveDue() bool {
	return time.Since(time.Unix(0, s.aliveAt.Load())) > s.aliveTTL()/4
}

// markAlive queues the alive key's refresh in p.
func (s *Store) markAlive(ctx context.Context, p redis.Pipeliner) {
	p.Set(ctx, s.aliveKey(s.token), 1, s.aliveTTL())
}

// endDeadPending ends host's pending departure admitted by the Store named by token, when that
// Store's alive key is gone, and reports whether it did.
func (s *Store) endDeadPending(ctx context.Context, host, token string) bool {
	var exists *redis.IntCmd
	_, _ = s.pipelined(ctx, func(p redis.Pipeliner) { exists = p.Exists(ctx, s.aliveKey(token)) })
	if n, err := exists.Result(); err != nil || n != 0 {
		return false
	}
	ended, err := s.run(ctx, deadPendingScript, []string{s.hostKey(host)}, token, s.ttlMS()).Int()
	return err == nil && ended == 1
}

package redisstore

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/collypace/ext"
	"github.com/redis/go-redis/v9"
)

var _ ext.Frontier = (*Store)(nil)

// DefaultLeaseTTL is how long a host lease, and a member's heartbeat, last unrenewed, unless
// WithLeaseTTL says otherwise: a Queue renews both every quarter of it, and a process that dies gives
// its hosts to the others at most this long after its last renewal.
const DefaultLeaseTTL = 2 * time.Second

// frontierConfig is the frontier's part of a Store's options.
type frontierConfig struct {
	leaseTTL time.Duration // 0: DefaultLeaseTTL
	shards   int           // 0: 1
	tags     []string      // each shard's hash tag (shardTag); nil: one shard, "0"

	formerMu  sync.Mutex // protects formerOK and formerErr
	formerOK  bool       // checkFormerTags found no shard of an earlier build
	formerErr error      // or found one: the error every add and lease returns
}

// WithLeaseTTL sets how long a host lease of the frontier lasts unrenewed (default DefaultLeaseTTL).
// Shorter hands a dead process's hosts over sooner, at the cost of more renewals (every quarter of it);
// it must be at least 300 ms. Every process of a fleet should use the same value.
func WithLeaseTTL(d time.Duration) Option {
	return func(s *Store) {
		if d < 300*time.Millisecond {
			s.reject("WithLeaseTTL", d.String(), "under 300ms")
			return
		}
		s.frontier.leaseTTL = d
	}
}

// WithFrontierShards spreads the frontier over n schedules (default 1), each with its own hash tag,
// so that a Redis Cluster spreads it over its nodes: a host's keys share its shard's slot, and every
// script touches one shard. A lease then asks every shard, in one pipeline. n must be between 1 and
// 1024, and the same in every process of the fleet (a host's shard depends on it).
func WithFrontierShards(n int) Option {
	return func(s *Store) {
		if n < 1 || n > 1024 {
			s.reject("WithFrontierShards", strconv.Itoa(n), "not between 1 and 1024")
			return
		}
		s.frontier.shards, s.frontier.tags = n, shardTags(n)
	}
}

// FrontierTTL implements ext.Frontier.
func (s *Store) FrontierTTL() time.Duration {
	if s.frontier.leaseTTL > 0 {
		return s.frontier.leaseTTL
	}
	return DefaultLeaseTTL
}

func (s *Store) shardCount() int { return max(s.frontier.shards, 1) }

// shardOf is the shard of host's keys.
func (s *Store) shardOf(host string) int {
	h := fnv.New32a()
	_, _ = h.Write([]byte(host))
	return int(h.Sum32() % uint32(s.shardCount()))
}

// frontierBase is the start of every key of a shard: the prefix, "frontier" and the shard's hash tag
// (shardTag: chosen for its cluster slot).
func (s *Store) frontierBase(shard int) string {
	tag := "0"
	if s.frontier.tags != nil {
		tag = s.frontier.tags[shard]
	}
	return s.prefix + "frontier{" + tag + "}:"
}

// shardKeys are a shard's own keys: its schedule, count and ID sequence.
func (s *Store) shardKeys(shard int) (sched, count, seq string) {
	b := s.frontierBase(shard)
	return b + "sched", b + "n", b + "seq"
}

// redeliveredReason is the Reason of a request handed out again (see ext.Frontier).
const redeliveredReason = "redelivered"

// FrontierAdd implements ext.Frontier: one script run on host's shard, which queues each request whose
// key's fingerprint (seen.go) its seen set did not hold (or every request, with force), and puts host
// in the schedule. A shard whose seen set is in the format before fingerprints is migrated first.
func (s *Store) FrontierAdd(ctx context.Context, host string, reqs []ext.DeferredRequest, keys []string, force bool) (int, error) {
	if len(reqs) == 0 {
		return 0, nil
	}
	if len(keys) != len(reqs) {
		return 0, fmt.Errorf("redisstore: frontier add for host %q: %d keys for %d requests", host, len(keys), len(reqs))
	}
	if err := s.checkFormerTags(ctx); err != nil {
		return 0, err
	}
	shard := s.shardOf(host)
	sched, count, seq := s.shardKeys(shard)
	f := "0"
	if force {
		f = "1"
	}
	args := []any{host, f, s.frontierBase(shard)}
	for i, r := range reqs {
		r.Host = host
		b, err := encodeDeferred(r, 0)
		if err != nil {
			return 0, fmt.Errorf("redisstore: frontier add for host %q: %w", host, err)
		}
		args = append(args, fingerprint(keys[i]), b)
	}
	keyNames := []string{sched, s.oldSeenKey(shard), count, seq, s.frontierBase(shard) + "q:" + host}
	n, err := s.run(ctx, frontierAddScript, keyNames, args...).Int()
	if err == nil && n < 0 {
		if err = s.migrateSeen(ctx, shard); err != nil {
			return 0, err
		}
		n, err = s.run(ctx, frontierAddScript, keyNames, args...).Int()
	}
	if err != nil {
		return 0, wrapErr(err, "frontier add for host %q", host)
	}
	if n < 0 {
		return 0, fmt.Errorf("redisstore: frontier add for host %q: the seen set of shard %d is still in the format before fingerprints after its migration: %w", host, shard, ext.ErrCorruptState)
	}
	return n, nil
}

// FrontierLease implements ext.Frontier: one script run a shard, all in one pipeline (one round trip
// on a single server), each also the owner's heartbeat on its shard. With several shards, each is
// asked for its share of n, at least one, and told how many of its hosts the owner holds.
func (s *Store) FrontierLease(ctx context.Context, owner string, n int, held []string) (leases []ext.Lease, takenOver []string, left int, next time.Duration, err error) {
	if err := s.checkFormerTags(ctx); err != nil {
		return nil, nil, 0, 0, err
	}
	if n <= 0 {
		n = 1
	}
	shards := s.shardCount()
	per := max((n+shards-1)/shards, 1)
	heldBy := make([]int, shards)
	for _, h := range held {
		heldBy[s.shardOf(h)]++
	}
	ttl := s.FrontierTTL().Milliseconds()
	cmds, err := s.pipelineScript(ctx, frontierLeaseScript, shards, func(i int) ([]string, []any) {
		sched, count, _ := s.shardKeys(i)
		return []string{sched, s.membersKey(i), count}, []any{owner, ttl, per, s.frontierBase(i), heldBy[i]}
	})
	if err != nil {
		return nil, nil, 0, 0, wrapErr(err, "frontier lease")
	}
	next = -1
	for _, c := range cmds {
		res, err := c.Slice()
		if err != nil || len(res) != 5 {
			return nil, nil, 0, 0, fmt.Errorf("redisstore: frontier lease: script returned %v (%v): %w", res, err, ext.ErrCorruptState)
		}
		granted, _ := res[0].([]any)
		untilMS, _ := res[4].(int64)
		for i := 0; i+1 < len(granted); i += 2 {
			host, _ := granted[i].(string)
			token, _ := granted[i+1].(int64)
			leases = append(leases, ext.Lease{Host: host, Token: token, Until: time.UnixMilli(untilMS)})
		}
		takenOver = append(takenOver, stringsOf(res[3])...)
		n, _ := res[1].(int64)
		left += int(n)
		if ms, _ := res[2].(int64); ms >= 0 && (next < 0 || time.Duration(ms)*time.Millisecond < next) {
			next = time.Duration(ms) * time.Millisecond
		}
	}
	return leases, takenOver, max(left, 0), max(next, 0), nil
}

// stringsOf is the strings of a script's array reply.
func stringsOf(v any) []string {
	a, _ := v.([]any)
	out := make([]string, 0, len(a))
	for _, e := range a {
		if s, ok := e.(string); ok {
			out = append(out, s)
		}
	}
	return out
}

// membersKey is a shard's set of live members, by when each one's heartbeat runs out.
func (s *Store) membersKey(shard int) string { return s.frontierBase(shard) + "members" }

// FrontierRenew implements ext.Frontier: one script run a shard, in one pipeline, each the owner's
// heartbeat on its shard and the renewal of the leases it holds there. The share is the sum of the
// shards' shares; until is the earliest of the shards' new ends.
func (s *Store) FrontierRenew(ctx context.Context, owner string, hosts []string) ([]string, time.Time, int, error) {
	shards := s.shardCount()
	byShard := make([][]string, shards)
	for _, h := range hosts {
		byShard[s.shardOf(h)] = append(byShard[s.shardOf(h)], h)
	}
	ttl := s.FrontierTTL().Milliseconds()
	cmds, err := s.pipelineScript(ctx, frontierRenewScript, shards, func(i int) ([]string, []any) {
		sched, _, _ := s.shardKeys(i)
		args := []any{owner, ttl, s.frontierBase(i)}
		for _, h := range byShard[i] {
			args = append(args, h)
		}
		return []string{sched, s.membersKey(i)}, args
	})
	if err != nil {
		return nil, time.Time{}, 0, wrapErr(err, "frontier renew %d leases", len(hosts))
	}
	var lost []string
	var until time.Time
	share := 0
	for _, c := range cmds {
		res, err := c.Slice()
		if err != nil || len(res) != 4 {
			return nil, time.Time{}, 0, fmt.Errorf("redisstore: frontier renew: script returned %v (%v): %w", res, err, ext.ErrCorruptState)
		}
		lost = append(lost, stringsOf(res[0])...)
		n, _ := res[2].(int64)
		share += int(n)
		if ms, _ := res[3].(int64); until.IsZero() || time.UnixMilli(ms).Before(until) {
			until = time.UnixMilli(ms)
		}
	}
	return lost, until, share, nil
}

// FrontierLeave implements ext.Frontier: a ZREM from every shard's members, in one pipeline.
func (s *Store) FrontierLeave(ctx context.Context, owner string) error {
	_, err := s.pipelineScript(ctx, frontierLeaveScript, s.shardCount(), func(i int) ([]string, []any) {
		return []string{s.membersKey(i)}, []any{owner}
	})
	if err != nil {
		return wrapErr(err, "frontier leave")
	}
	return nil
}

// FrontierTake implements ext.Frontier: one script run on host's shard.
func (s *Store) FrontierTake(ctx context.Context, owner, host string, n int) ([]ext.DeferredRequest, bool, error) {
	shard := s.shardOf(host)
	sched, _, _ := s.shardKeys(shard)
	res, err := s.run(ctx, frontierTakeScript, []string{sched}, owner, s.frontierBase(shard), host, max(n, 1)).Slice()
	if err != nil {
		return nil, false, wrapErr(err, "frontier take for host %q", host)
	}
	if len(res) > 0 && res[0] == int64(2) {
		return nil, false, fmt.Errorf("redisstore: frontier take for host %q: owner %s no longer holds its lease: %w", host, owner, ext.ErrLeaseLost)
	}
	if len(res) == 0 || res[0] != int64(1) {
		return nil, false, nil
	}
	out := make([]ext.DeferredRequest, 0, (len(res)-1)/3)
	var corrupt []string
	for i := 1; i+2 < len(res); i += 3 {
		idText, _ := res[i].(string)
		member, _ := res[i+1].(string)
		redo, _ := res[i+2].(int64)
		id, err := strconv.ParseInt(idText, 10, 64)
		if err == nil {
			var r ext.DeferredRequest
			if r, err = decodeDeferred(member, id); err == nil {
				r.Host = host
				if redo == 1 {
					r.Reason = redeliveredReason
				}
				out = append(out, r)
				continue
			}
		}
		corrupt = append(corrupt, fmt.Sprintf("entry %s: %v", idText, err))
		_ = s.FrontierDone(ctx, host, []int64{id}) // never sendable: not handed out again
	}
	if len(corrupt) > 0 {
		return out, true, fmt.Errorf("redisstore: frontier take for host %q: dropped %d (%s): %w", host, len(corrupt), strings.Join(corrupt, "; "), ext.ErrCorruptState)
	}
	return out, true, nil
}

// FrontierDone implements ext.Frontier, written behind (batch.go): the IDs go with the Store's next
// command (a take, lease, renewal or release of the host among them, ahead of it), at most
// batchLinger later, in one script run a shard with every host's done there. A process killed loses
// the last of them: their requests are handed out again, as requests in flight are. The error is an
// earlier write's that failed, kept for the next flush (these IDs are buffered all the same).
func (s *Store) FrontierDone(ctx context.Context, host string, ids []int64) error {
	if len(ids) == 0 {
		return nil
	}
	if err := s.buffer(ctx, func(b *batch) int { return addIDs(b, host, ids) }); err != nil {
		return wrapErr(err, "frontier done for host %q", host)
	}
	return nil
}

// FrontierRelease implements ext.Frontier: one script run on host's shard, after what is buffered
// (the host's done requests first).
func (s *Store) FrontierRelease(ctx context.Context, owner, host string, after time.Duration) error {
	shard := s.shardOf(host)
	sched, _, _ := s.shardKeys(shard)
	if err := s.run(ctx, frontierReleaseScript, []string{sched}, owner, s.frontierBase(shard), host, max(after, 0).Milliseconds()).Err(); err != nil {
		return wrapErr(err, "frontier release of host %q", host)
	}
	return nil
}

// FrontierSize implements ext.Frontier: a GET of each shard's count, in one pipeline.
func (s *Store) FrontierSize(ctx context.Context) (int, error) {
	shards := s.shardCount()
	cmds := make([]*redis.StringCmd, shards)
	_, err := s.pipelined(ctx, func(p redis.Pipeliner) {
		for i := range shards {
			_, count, _ := s.shardKeys(i)
			cmds[i] = p.Get(ctx, count)
		}
	})
	if err != nil && !errors.Is(err, redis.Nil) {
		return 0, wrapErr(err, "frontier size")
	}
	total := 0
	for _, c := range cmds {
		if n, err := c.Int(); err == nil {
			total += n
		}
	}
	return max(total, 0), nil
}

// pipelineScript runs script n times in one pipeline, call i with the keys and arguments args(i), and
// loads the script first when the server lost its script cache.
func (s *Store) pipelineScript(ctx context.Context, script *redis.Script, n int, args func(i int) ([]string, []any)) ([]*redis.Cmd, error) {
	cmds := make([]*redis.Cmd, n)
	run := func() ([]redis.Cmder, error) {
		return s.pipelined(ctx, func(p redis.Pipeliner) {
			for i := range n {
				keys, a := args(i)
				cmds[i] = script.EvalSha(ctx, p, keys, a...)
			}
		})
	}
	all, err := run()
	if noScript(all) {
		if err = script.Load(ctx, s.c).Err(); err == nil {
			_, err = run()
		}
	}
	return cmds, err
}

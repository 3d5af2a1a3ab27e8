package redisstore

import (
	"context"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/collypace/ext"
	"github.com/redis/go-redis/v9"
)

// AddDeferred implements ext.Store. The ID comes from INCR on <prefix>deferred:seq; the request is
// stored as JSON in the sorted set <prefix>deferred, scored by its ID. It takes two round trips.
func (s *Store) AddDeferred(ctx context.Context, r ext.DeferredRequest) (int64, error) {
	id, err := s.c.Incr(ctx, s.deferredSeqKey()).Result()
	if err != nil {
		return 0, wrapErr(err, "add deferred request for host %q: next id", r.Host)
	}
	b, err := encodeDeferred(r, id)
	if err != nil {
		return 0, fmt.Errorf("redisstore: add deferred request for host %q: %w", r.Host, err)
	}
	if err := s.c.ZAdd(ctx, s.deferredKey(), redis.Z{Score: float64(id), Member: b}).Err(); err != nil {
		return 0, wrapErr(err, "add deferred request for host %q", r.Host)
	}
	return id, nil
}

// spillKey is the list of the requests a Queue spilled for host, oldest first.
func (s *Store) spillKey(host string) string { return s.prefix + "spill:" + host }

// legacySpillReason marks the requests a Queue spilled into the deferred set in the layout before spill
// lists; ListDeferred moves those it meets to their host's list.
const legacySpillReason = "queue_spill"

// listPage is how many deferred requests ListDeferred reads a round trip.
const listPage = 256

// ListDeferred implements ext.Store, reading the set in ID order a page at a time and filtering by host
// in the client. An entry that cannot be decoded is skipped: the entries that could be are returned
// together with an error wrapping ext.ErrCorruptState that names the skipped IDs, which DeleteDeferred
// removes. An entry a Queue spilled into the set in the layout before spill lists is not a deferred
// request: it is moved to its host's spill list (moveLegacySpill).
func (s *Store) ListDeferred(ctx context.Context, host string, limit int) ([]ext.DeferredRequest, error) {
	var (
		out     []ext.DeferredRequest
		corrupt []string
		after   = "(0" // taken requests not yet acknowledged are scored below 0 (takeDeferredScript)
	)
	for limit <= 0 || len(out) < limit {
		page := listPage
		if host == "" && limit > 0 {
			page = limit - len(out)
		}
		zs, err := s.c.ZRangeArgsWithScores(ctx, redis.ZRangeArgs{
			Key: s.deferredKey(), Start: after, Stop: "+inf", ByScore: true, Count: int64(page),
		}).Result()
		if err != nil {
			return nil, wrapErr(err, "list deferred requests")
		}
		for _, z := range zs {
			id := int64(z.Score)
			after = "(" + strconv.FormatInt(id, 10)
			if limit > 0 && len(out) >= limit {
				break
			}
			member, _ := z.Member.(string)
			r, err := decodeDeferred(member, id)
			switch {
			case err != nil:
				corrupt = append(corrupt, err.Error())
			case r.Reason == legacySpillReason:
				s.moveLegacySpill(ctx, member, id, r)
			case host == "" || r.Host == host:
				out = append(out, r)
			}
		}
		if len(zs) < page {
			break
		}
	}
	if len(corrupt) > 0 {
		return out, fmt.Errorf("redisstore: list deferred requests: skipped %d (%s): %w", len(corrupt), strings.Join(corrupt, "; "), ext.ErrCorruptState)
	}
	return out, nil
}

// DeleteDeferred implements ext.Store, in one pipeline.
func (s *Store) DeleteDeferred(ctx context.Context, ids []int64) error {
	if len(ids) == 0 {
		return nil
	}
	_, err := s.c.Pipelined(ctx, func(p redis.Pipeliner) error {
		for _, id := range ids {
			n := strconv.FormatInt(id, 10)
			p.ZRemRangeByScore(ctx, s.deferredKey(), n, n)
		}
		return nil
	})
	if err != nil {
		return wrapErr(err, "delete %d deferred requests", len(ids))
	}
	return nil
}

// moveLegacySpill moves r, the member of the deferred set scored id, to its host's spill list: whoever
// removes it from the set pushes it, so it is moved once. If the push fails it is put back, for a later
// listing to move.
func (s *Store) moveLegacySpill(ctx context.Context, member string, id int64, r ext.DeferredRequest) {
	if n, err := s.c.ZRem(ctx, s.deferredKey(), member).Result(); err != nil || n == 0 {
		return
	}
	r.Reason = ""
	b, err := encodeDeferred(r, 0)
	if err == nil {
		err = s.c.RPush(ctx, s.spillKey(r.Host), b).Err()
	}
	if err != nil {
		s.c.ZAdd(ctx, s.deferredKey(), redis.Z{Score: float64(id), Member: member})
	}
}

// SpillRequests implements ext.Store: one RPUSH onto <prefix>spill:<host>, each request as JSON.
func (s *Store) SpillRequests(ctx context.Context, host string, reqs []ext.DeferredRequest) error {
	if len(reqs) == 0 {
		return nil
	}
	members := make([]any, len(reqs))
	for i, r := range reqs {
		r.Host = host
		b, err := encodeDeferred(r, 0)
		if err != nil {
			return fmt.Errorf("redisstore: spill requests for host %q: %w", host, err)
		}
		members[i] = b
	}
	if err := s.c.RPush(ctx, s.spillKey(host), members...).Err(); err != nil {
		return wrapErr(err, "spill requests for host %q", host)
	}
	return nil
}

// takeAll is the count TakeSpilled asks for to take every request: more than a list holds.
const takeAll = math.MaxInt32

// takeLease is how long a taken request waits for its taker's acknowledgement before another take
// may hand it out again: its taker died between the take and the acknowledgement.
const takeLease = 5 * time.Minute

// pendingAck is a take whose acknowledgement failed: sent again before the next take.
type pendingAck struct {
	script *redis.Script
	key    string
	token  string
}

// take runs a take script under a new token, then its acknowledgement (see markLua): the entries
// are returned once, whether go-redis retried the take or another process took at the same time.
func (s *Store) take(ctx context.Context, take, ack *redis.Script, key string, limit int, extra ...any) ([]any, error) {
	s.sendPendingAcks(ctx)
	token := newToken()
	res, err := take.Run(ctx, s.c, []string{key}, append([]any{token, limit, takeLease.Milliseconds()}, extra...)...).Slice()
	if err != nil {
		return nil, err
	}
	if len(res) > 0 {
		if err := ack.Run(ctx, s.c, []string{key}, token).Err(); err != nil {
			s.acksMu.Lock()
			s.acks = append(s.acks, pendingAck{script: ack, key: key, token: token})
			s.acksMu.Unlock()
		}
	}
	return res, nil
}

// sendPendingAcks sends again the acknowledgements that failed, so that the requests they name are
// not handed out again when their lease runs out.
func (s *Store) sendPendingAcks(ctx context.Context) {
	s.acksMu.Lock()
	acks := s.acks
	s.acks = nil
	s.acksMu.Unlock()
	var failed []pendingAck
	for _, a := range acks {
		if err := a.script.Run(ctx, s.c, []string{a.key}, a.token).Err(); err != nil {
			failed = append(failed, a)
		}
	}
	if len(failed) > 0 {
		s.acksMu.Lock()
		s.acks = append(s.acks, failed...)
		s.acksMu.Unlock()
	}
}

// TakeSpilled implements ext.Store: a take script and its acknowledgement on <prefix>spill:<host>
// (see markLua), so that a reply lost on the way (go-redis retrying the take) or a concurrent take
// never loses nor duplicates a request. An entry that cannot be decoded is dropped and named in the
// error wrapping ext.ErrCorruptState.
func (s *Store) TakeSpilled(ctx context.Context, host string, limit int) ([]ext.DeferredRequest, error) {
	count := takeAll
	if limit > 0 {
		count = min(limit, takeAll)
	}
	res, err := s.take(ctx, takeSpillScript, ackSpillScript, s.spillKey(host), count)
	if err != nil {
		return nil, wrapErr(err, "take spilled requests for host %q", host)
	}
	out := make([]ext.DeferredRequest, 0, len(res))
	var corrupt []string
	for _, v := range res {
		m, _ := v.(string)
		r, err := decodeDeferred(m, 0)
		if err != nil {
			corrupt = append(corrupt, err.Error())
			continue
		}
		r.Host = host
		out = append(out, r)
	}
	if len(corrupt) > 0 {
		return out, fmt.Errorf("redisstore: take spilled requests for host %q: dropped %d (%s): %w", host, len(corrupt), strings.Join(corrupt, "; "), ext.ErrCorruptState)
	}
	return out, nil
}

// TakeDeferred implements ext.Store: a take script and its acknowledgement on the deferred set (see
// markLua and takeDeferredScript), atomic as TakeSpilled. The script leaves in place a member that is
// not JSON of the current layout with a host (ListDeferred names it); one it takes that still does
// not decode is named in the error wrapping ext.ErrCorruptState.
func (s *Store) TakeDeferred(ctx context.Context, host string, limit int) ([]ext.DeferredRequest, error) {
	res, err := s.take(ctx, takeDeferredScript, ackDeferredScript, s.deferredKey(), max(limit, 0), host)
	if err != nil {
		return nil, wrapErr(err, "take deferred requests")
	}
	out := make([]ext.DeferredRequest, 0, len(res))
	var corrupt []string
	for _, v := range res {
		pair, _ := v.([]any)
		if len(pair) != 2 {
			continue
		}
		id, _ := pair[0].(int64)
		m, _ := pair[1].(string)
		r, err := decodeDeferred(m, id)
		if err != nil {
			corrupt = append(corrupt, err.Error())
			continue
		}
		out = append(out, r)
	}
	if len(corrupt) > 0 {
		return out, fmt.Errorf("redisstore: take deferred requests: dropped %d (%s): %w", len(corrupt), strings.Join(corrupt, "; "), ext.ErrCorruptState)
	}
	return out, nil
}

// SpilledHosts implements ext.Store: a SCAN of the spill lists and the length of each.
func (s *Store) SpilledHosts(ctx context.Context) (map[string]int, error) {
	prefix := s.spillKey("")
	out := map[string]int{}
	iter := s.c.Scan(ctx, 0, globEscape(prefix)+"*", 256).Iterator()
	for iter.Next(ctx) {
		key := iter.Val()
		n, err := s.c.LLen(ctx, key).Result()
		if err != nil {
			return nil, wrapErr(err, "count spilled requests")
		}
		if n > 0 {
			out[strings.TrimPrefix(key, prefix)] = int(n)
		}
	}
	if err := iter.Err(); err != nil {
		return nil, wrapErr(err, "list the hosts with spilled requests")
	}
	return out, nil
}

// globEscape escapes the characters SCAN's MATCH pattern gives a meaning.
func globEscape(s string) string {
	var b strings.Builder
	for _, r := range s {
		if strings.ContainsRune(`*?[]\`, r) {
			b.WriteByte('\\')
		}
		b.WriteRune(r)
	}
	return b.String()
}

package redisstore

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"

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
		after   = "-inf"
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

// takeAll is the LPOP count TakeSpilled asks for to take every request: more than a list holds.
const takeAll = math.MaxInt32

// TakeSpilled implements ext.Store: one LPOP with a count on <prefix>spill:<host>, atomic. An entry
// that cannot be decoded is dropped and named in the error wrapping ext.ErrCorruptState.
func (s *Store) TakeSpilled(ctx context.Context, host string, limit int) ([]ext.DeferredRequest, error) {
	count := takeAll
	if limit > 0 {
		count = min(limit, takeAll)
	}
	members, err := s.c.LPopCount(ctx, s.spillKey(host), count).Result()
	if errors.Is(err, redis.Nil) {
		return nil, nil
	}
	if err != nil {
		return nil, wrapErr(err, "take spilled requests for host %q", host)
	}
	out := make([]ext.DeferredRequest, 0, len(members))
	var corrupt []string
	for _, m := range members {
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

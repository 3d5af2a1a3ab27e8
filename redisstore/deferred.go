package redisstore

import (
	"context"
	"fmt"
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

// listPage is how many deferred requests ListDeferred reads a round trip.
const listPage = 256

// ListDeferred implements ext.Store, reading the set in ID order a page at a time and filtering by host
// in the client. An entry that cannot be decoded is skipped: the entries that could be are returned
// together with an error wrapping ext.ErrCorruptState that names the skipped IDs, which DeleteDeferred
// removes.
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

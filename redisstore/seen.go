package redisstore

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"strconv"
)

// The frontier's seen set (the deduplication of FrontierAdd) keeps a 64-bit fingerprint of each
// request's key, not the key: the first 8 bytes of its SHA-256, as a signed decimal integer, so that
// Redis stores each in 8 bytes in a set of integers (an intset), whatever the URL's length; the sets
// are buckets of a linear hashing that keeps each small enough for that encoding (frontierSeenLua).
//
// Two keys of the same shard with one fingerprint collide: the second is taken for seen and not
// queued. With n keys in a shard, a new key collides with probability n/2^64 (5.4e-11 at a billion),
// and the expected number of keys lost over a crawl of n keys is about n²/2^65: 2.7e-8 at a million,
// 0.027 at a billion, 2.7 at ten billion in one shard. SHA-256 keeps it so for keys chosen to collide.

// fingerprint is the seen set's member for a request's key.
func fingerprint(key string) string {
	sum := sha256.Sum256([]byte(key))
	return strconv.FormatInt(int64(binary.BigEndian.Uint64(sum[:8])), 10)
}

// oldSeenKey is a shard's seen set in the format before fingerprints: a set of whole keys.
func (s *Store) oldSeenKey(shard int) string { return s.frontierBase(shard) + "seen" }

// migrateBatch is how many keys of the old seen set one migration script adds.
const migrateBatch = 500

// migrateSeen moves a shard's seen set of the format before fingerprints (every key whole) to
// fingerprints: it reads the old set (SSCAN), adds each key's fingerprint, and deletes the old set with
// the last batch. Processes migrating at once add the same fingerprints; one stopped halfway leaves the
// old set, and the next FrontierAdd on the shard migrates again.
func (s *Store) migrateSeen(ctx context.Context, shard int) error {
	old, base := s.oldSeenKey(shard), s.frontierBase(shard)
	var cursor uint64
	for {
		keys, next, err := s.c.SScan(ctx, old, cursor, "", migrateBatch).Result()
		if err != nil {
			return wrapErr(err, "frontier: migrate the seen set of shard %d to fingerprints", shard)
		}
		last := "0"
		if next == 0 {
			last = "1"
		}
		args := []any{base, last}
		for _, k := range keys {
			args = append(args, fingerprint(k))
		}
		if err := frontierSeenMigrateScript.Run(ctx, s.c, []string{old}, args...).Err(); err != nil {
			return wrapErr(err, "frontier: migrate the seen set of shard %d to fingerprints", shard)
		}
		if next == 0 {
			return nil
		}
		cursor = next
	}
}

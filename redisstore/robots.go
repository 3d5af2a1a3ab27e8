package redisstore

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/collypace/ext"
	"github.com/redis/go-redis/v9"
)

// robots.txt once per fleet: each origin's robots.txt read is a hash that expires with the read, and a
// pacer about to read one claims it first with a short-lived key (SET NX PX), so that the fleet asks
// each origin once per expiry. The pacer (ext.WithStore) finds these methods itself.

// Fields of a robots.txt hash. Times are decimal unix nanoseconds.
const (
	robotsFieldVersion   = "v"
	robotsFieldStatus    = "status"
	robotsFieldFetchedAt = "fetched_at"
	robotsFieldBody      = "body"
)

// robotsVersion is the layout of a robots.txt hash; another is reported corrupt, and read again.
const robotsVersion = "1"

// robotsKey and robotsClaimKey name an origin's read and its claim, in one hash slot (the origin is
// the hash tag), so that SaveRobots writes both in one transaction on a Redis Cluster too.
func (s *Store) robotsKey(origin string) string      { return s.prefix + "robots:{" + origin + "}" }
func (s *Store) robotsClaimKey(origin string) string { return s.robotsKey(origin) + ":claim" }

// LoadRobots returns origin's stored robots.txt read (status 0: none). A key of another type than a
// hash, another layout, or a field missing or that does not parse returns an error wrapping
// ext.ErrCorruptState.
func (s *Store) LoadRobots(ctx context.Context, origin string) (int, []byte, time.Time, error) {
	m, err := s.c.HGetAll(ctx, s.robotsKey(origin)).Result()
	if err != nil {
		return 0, nil, time.Time{}, wrapErr(err, "load robots.txt of %q", origin)
	}
	if len(m) == 0 {
		return 0, nil, time.Time{}, nil
	}
	bad := func(format string, args ...any) (int, []byte, time.Time, error) {
		return 0, nil, time.Time{}, fmt.Errorf("redisstore: robots.txt of %q: %s: %w", origin, fmt.Sprintf(format, args...), ext.ErrCorruptState)
	}
	if v := m[robotsFieldVersion]; v != robotsVersion {
		return bad("layout %q, want %q", v, robotsVersion)
	}
	status, err := strconv.Atoi(m[robotsFieldStatus])
	if err != nil || status <= 0 {
		return bad("status %q", m[robotsFieldStatus])
	}
	fetchedAt, err := decodeTime(m[robotsFieldFetchedAt])
	if err != nil {
		return bad("fetched_at %q", m[robotsFieldFetchedAt])
	}
	body, ok := m[robotsFieldBody]
	if !ok {
		return bad("no body")
	}
	return status, []byte(body), fetchedAt, nil
}

// SaveRobots stores a read as origin's for ttl (the key's time to live) and deletes the claim on
// origin, in one transaction.
func (s *Store) SaveRobots(ctx context.Context, origin string, status int, body []byte, fetchedAt time.Time, ttl time.Duration) error {
	key := s.robotsKey(origin)
	_, err := s.c.TxPipelined(ctx, func(p redis.Pipeliner) error {
		p.Del(ctx, key)
		if ttl > 0 {
			p.HSet(ctx, key, robotsFieldVersion, robotsVersion, robotsFieldStatus, strconv.Itoa(status),
				robotsFieldFetchedAt, encodeTime(fetchedAt), robotsFieldBody, body)
			p.PExpire(ctx, key, ttl)
		}
		p.Del(ctx, s.robotsClaimKey(origin))
		return nil
	})
	if err != nil {
		return wrapErr(err, "save robots.txt of %q", origin)
	}
	return nil
}

// ClaimRobots claims origin's read for token: SET NX PX.
func (s *Store) ClaimRobots(ctx context.Context, origin, token string, ttl time.Duration) (bool, error) {
	err := s.c.SetArgs(ctx, s.robotsClaimKey(origin), token, redis.SetArgs{Mode: "NX", TTL: ttl}).Err()
	switch {
	case err == nil:
		return true, nil
	case errors.Is(err, redis.Nil):
		return false, nil
	}
	return false, wrapErr(err, "claim robots.txt of %q", origin)
}

// ReleaseRobots deletes token's claim on origin, and leaves another token's.
func (s *Store) ReleaseRobots(ctx context.Context, origin, token string) error {
	if err := robotsReleaseScript.Run(ctx, s.c, []string{s.robotsClaimKey(origin)}, token).Err(); err != nil && !errors.Is(err, redis.Nil) {
		return wrapErr(err, "release the claim on robots.txt of %q", origin)
	}
	return nil
}

// robotsReleaseScript deletes KEYS[1], a claim, when ARGV[1] holds it.
var robotsReleaseScript = redis.NewScript(`
if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end
return 0
`)

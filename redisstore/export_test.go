package redisstore

import (
	"context"
	"time"

	"github.com/collypace/ext"
	"github.com/redis/go-redis/v9"
)

// Exported for the tests of package redisstore_test.
var (
	DecodeHostHash = decodeHostHash
	EncodeHostHash = encodeHostHash
	AdmitNow       = func(s *Store, ctx context.Context, host string, gap time.Duration) (ext.Admission, time.Time, error) {
		return s.admit(ctx, host, gap, nil)
	}
)

// FrontierBase returns the start of every key of the store's frontier shard.
func FrontierBase(s *Store, shard int) string { return s.frontierBase(shard) }

// Client returns the store's client.
func Client(s *Store) redis.UniversalClient { return s.c }

// AliveKey returns the name of the store's alive key.
func AliveKey(s *Store) string { return s.aliveKey(s.token) }

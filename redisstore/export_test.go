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

// Flush sends the store's buffered writes (batch.go), as its next command or its linger would.
func Flush(s *Store) error { return s.flush(context.Background()) }

// SetLinger sets how long the store's buffered writes wait at most for a command to carry them.
func SetLinger(s *Store, d time.Duration) {
	s.batch.mu.Lock()
	s.batch.linger = d
	s.batch.mu.Unlock()
}

// AliveKey returns the name of the store's alive key.
func AliveKey(s *Store) string { return s.aliveKey(s.token) }

package redisstore

import "github.com/redis/go-redis/v9"

// Exported for the tests of package redisstore_test.
var (
	DecodeHostHash = decodeHostHash
	EncodeHostHash = encodeHostHash
	AdmitNow       = (*Store).admit
)

// Client returns the store's client.
func Client(s *Store) redis.UniversalClient { return s.c }

// AliveKey returns the name of the store's alive key.
func AliveKey(s *Store) string { return s.aliveKey(s.token) }

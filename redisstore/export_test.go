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

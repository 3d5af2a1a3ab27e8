package redisstore

// Exported for the tests of package redisstore_test.
var (
	DecodeHostHash = decodeHostHash
	EncodeHostHash = encodeHostHash
)

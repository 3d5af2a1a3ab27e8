// Package redisstore keeps the pacing state of github.com/collypace/ext in Redis, so that a fleet of
// crawler processes, on one machine or many, share each host's schedule: together they keep its
// interval, its Retry-After window and its Crawl-delay exactly as one process would.
//
// Use it when more than one process crawls the same hosts. A single process is better served by the
// default in-memory store, or by sqlitestore when its state must outlive a restart: both need no
// server, and neither spends a network round trip on a departure.
//
// # Atomicity
//
// Store implements ext.SharedStore. ReserveDeparture is one Lua script run with EVALSHA, one round
// trip: at = max(now, next_departure, hold_until), then next_departure = at + max(interval,
// adaptive_delay). SaveHosts applies the store's merge rule (next_departure and hold_until keep the
// later value, the rest is overwritten) in one script run a host, a whole batch pipelined. Each script
// touches one key, so a Redis Cluster client works too.
//
// # Keys
//
// Every key starts with a prefix, DefaultPrefix ("collypace:") unless WithPrefix says otherwise:
//
//	<prefix>host:<host>    hash: one field a HostState field (below)
//	<prefix>deferred       sorted set: deferred requests as JSON, scored by ID
//	<prefix>deferred:seq   string: the last deferred request ID (INCR)
//
// The fields of a host hash are v (the StateVersion of the writer), adaptive_delay, known_limit,
// crawl_delay (nanoseconds), next_departure, hold_until, breaker_changed, updated_at (unix
// nanoseconds, "" for the zero time), hold_trigger, crawl_clamped ("0" or "1"), breaker and failures,
// all as decimal strings. Keys never expire.
//
// # Time resolution
//
// Times are stored exactly, as decimal unix nanoseconds, and round-trip to the nanosecond. Lua numbers
// are doubles, exact only to 2^53, which unix nanoseconds (about 1.8e18) exceed; so the scripts never
// turn a time into one number: they split each decimal string into seconds and nanoseconds, both exact
// in a double, and compare and add those pairs. The schedule is exact to the nanosecond. Times are
// clamped to what an int64 of unix nanoseconds can name (the years 1678 to 2262).
//
// # Corrupt state
//
// LoadHost returns an error wrapping ext.ErrCorruptState for a host key that is not a hash, a missing
// field, or a field that does not parse or does not fit an int64; a state of another version is
// returned with only its Version set, for the pacer to discard. ReserveDeparture fails the same way on a corrupt
// schedule field. SaveHosts overwrites whatever it cannot read, so the pacer's repair (start the host
// afresh and save it) heals the record. ListDeferred skips an entry it cannot decode and returns,
// with the others, an error wrapping ext.ErrCorruptState naming its ID.
//
// # Redis unavailable
//
// Every method returns the client's error, wrapped, while the server is unreachable, and works again
// when it is back; the store holds no state of its own. A server restarted without persistence has
// forgotten the schedule: the pacers' next saves rebuild it.
package redisstore

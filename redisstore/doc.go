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
// Store implements ext.SharedStore. Admit is one Lua script run with EVALSHA, one round trip, that
// decides a departure on the server's own clock (TIME inside the script), GCRA style: the departure
// may go when now >= max(last_departure + max(gap, adaptive_delay), hold_srv); then last_departure =
// now. Otherwise nothing changes and the caller is told how long to wait before asking again: nothing
// is ever booked for a request that has not departed, so a cancel or a crash leaves nothing behind,
// and machines whose clocks differ share one schedule all the same. Departed moves last_departure to
// a request's wire instant when it left later than admitted. SaveHosts applies the store's merge rule
// (next_departure and hold_until keep the later value, the rest is overwritten) in one script run a
// host, a whole batch pipelined; it also puts the hold on the server's clock (hold_srv = the server's
// now + the time the hold had left when sent), so a Retry-After window one process learned stops every
// other at its next Admit. Each script touches one key, so a Redis Cluster client works too.
//
// # Keys
//
// Every key starts with a prefix, DefaultPrefix ("collypace:") unless WithPrefix says otherwise:
//
//	<prefix>host:<host>    hash: one field a StoredHost field (below)
//	<prefix>deferred       sorted set: deferred requests as JSON, scored by ID
//	<prefix>deferred:seq   string: the last deferred request ID (INCR)
//	<prefix>spill:<host>   list: the requests a Queue spilled for host, as JSON, oldest first
//
// The fields of a host hash are v (the StateVersion of the writer), adaptive_delay, known_limit,
// crawl_delay (nanoseconds), next_departure, hold_until, breaker_changed, updated_at (unix
// nanoseconds, "" for the zero time), hold_trigger, crawl_clamped ("0" or "1"), breaker and failures,
// all as decimal strings; and, written only by the scripts on the server's clock, last_departure and
// hold_srv (unix nanoseconds). Host keys never expire unless WithTTL is set: then every admitted
// departure and every save refreshes the key's TTL. Deferred and spilled requests never expire.
//
// A request is stored as a JSON object: v (its layout version, 1), host, method, url, depth, header,
// body (base64), body_lost, ctx, deferred_at (RFC 3339), reason and seq (its ID in the deferred set,
// keeping two identical requests distinct members; 0 in a spill list). SpillRequests is one RPUSH onto
// the host's list and TakeSpilled one LPOP with a count, so a take is atomic and reads only its host.
// In the layout before spill lists, spilled requests were members of the deferred set with the reason
// "queue_spill": ListDeferred moves those it meets to their host's list (removing the member first, so
// it is moved once) instead of returning them.
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
// returned with only its Version set, for the pacer to discard. Admit fails the same way on a corrupt
// last_departure, hold_srv or adaptive_delay. SaveHosts overwrites whatever it cannot read, so the pacer's repair (start the host
// afresh and save it) heals the record. ListDeferred skips an entry it cannot decode and returns,
// with the others, an error wrapping ext.ErrCorruptState naming its ID; TakeSpilled drops one (it is
// popped with the others) and says so the same way.
//
// # Redis unavailable
//
// Every method returns the client's error, wrapped, while the server is unreachable, and works again
// when it is back; the store holds no state of its own. Meanwhile each pacer paces alone, by its own
// schedule. A server restarted without persistence has forgotten the schedule: the pacers' next saves
// rebuild it.
package redisstore

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
// may go when now >= max(last_departure + the longest of the gap asked, adaptive_delay, crawl_delay and
// (before rate_srv) rate_interval, hold_srv) and no departure is pending; then last_departure = now,
// and pending = now + 30 s names the departure as on its way to the wire. Otherwise nothing changes
// and the caller is told how long to wait before asking again: nothing is ever booked for a request
// that has not departed, and machines whose clocks differ share one schedule all the same. Departed
// moves last_departure to the request's wire instant and ends its pending departure, so a slow dial
// holds every process; DepartedAtAdmission ends the pending departure of a request that reached the
// wire at its admission (an HDEL, no script, written behind: below). SaveHosts applies the store's merge rule (next_departure, hold_until and
// rate_until keep the later value, the rest is overwritten) in one script run a host, a whole batch
// pipelined; it also puts the hold and the rate-limit interval's end on the server's clock (hold_srv,
// rate_srv = the server's now + the time left when sent), so what one process learned stops every
// other at its next Admit. Each script touches one key, so a Redis Cluster client works too (Admit
// pipelines a GET of the epoch with its script).
//
// # Written behind
//
// FrontierDone, and DepartedAtAdmission for a departure admitted under a lease (FrontierAdmit), are
// written behind (batch.go): a Store buffers them and sends them ahead of its next command (an
// admission, a loss check, a take, a lease, a renewal, a release…), in that command's pipeline, a
// round trip made anyway; alone 60 ms after the first was buffered when nothing else goes; and at
// Close. A done is durable within 60 ms, and a leased host's pending departure ends up to 60 ms later:
// a process pacing the host without the lease waits that much longer, never less (a departure admitted
// without a lease, Admit, ends its pending at once: processes sharing a fast host would otherwise be
// held to a departure a linger). Each command waits for a flush under way, so a host's done requests
// reach the server before this Store's next take, lease or release, and a pending departure's end
// before its next admission of the host. A flush that fails keeps what it carried for the next one
// (4,096 writes at most: beyond, a write is flushed at once, and fails alone), and the next
// FrontierDone or DepartedAtAdmission returns its error. A process killed loses its last 60 ms of them
// at most: the requests done then are handed out again, as those in flight are, and a departure left
// pending holds its host until the store finds the process dead (its alive key). The done script takes
// a shard's hosts in one run; the HDELs are commands of their own, since a host's hash and its
// frontier shard are in different slots of a cluster.
//
// A take (TakeSpilled, TakeDeferred) is two scripts on one key: the first marks the entries it hands
// out with a token of its own, in place (a spill list's head, or the deferred set scored -ID), and the
// second, the acknowledgement, removes them. go-redis retrying a take whose reply was lost runs it with
// the same token and gets the same entries; a concurrent take skips them; entries whose taker died
// before acknowledging them are handed out again after 5 minutes.
//
// The epoch key holds "<creation instant>:<random>". A Store remembers the epoch it saw: when the
// server comes back empty (a restart without persistence, a FLUSHDB), the epoch is gone or another, the
// Store reports the loss (CheckLost, Admission.Lost: the pacer writes back every state it knows) and
// admits nothing until 1 s after the new epoch began, time for every process to write its holds back.
// The Store that finds the loss marks the epoch lost (":lost" appended): a Store joining within that
// second, or one that created the epoch without knowing of the loss, keeps the rest of the grace once
// it sees the mark. A fleet starting together on a store that lost nothing sends at once.
//
// # Keys
//
// Every key starts with a prefix, DefaultPrefix ("collypace:") unless WithPrefix says otherwise:
//
//	<prefix>host:<host>    hash: one field a StoredHost field (below)
//	<prefix>deferred       sorted set: deferred requests as JSON, scored by ID
//	<prefix>deferred:seq   string: the last deferred request ID (INCR)
//	<prefix>spill:<host>   list: the requests a Queue spilled for host, as JSON, oldest first
//	<prefix>epoch          string: the store's epoch (see above)
//	<prefix>alive:<token>  string: a Store's process is alive (see alive.go), expiring (PX)
//
// The fleet's frontier (ext.Frontier, frontier.go) keeps its keys in shards (WithFrontierShards,
// default 1), each with a hash tag of its own (N below: "0" for one shard; with several, each shard's
// tag is chosen for its slot, spread over the slot space, so that a cluster split evenly holds the
// shards evenly), so that all keys of a shard, and so all keys of a host, share one Redis Cluster slot
// and every script touches one slot:
//
//	<prefix>frontier{N}:sched         sorted set: hosts by when each may be leased next (server ms)
//	<prefix>frontier{N}:seen:<B>      set of integers: bucket B of the fingerprints of every request key
//	                                  ever queued (the deduplication: seen.go)
//	<prefix>frontier{N}:seen:lh       hash: the buckets' linear hashing (level, split) and their count (n)
//	<prefix>frontier{N}:n             string: requests queued or handed out and not done
//	<prefix>frontier{N}:seq           string: the last request ID (INCR)
//	<prefix>frontier{N}:q:<host>      list: host's queued requests, "<ID>:<request as JSON>", oldest first
//	<prefix>frontier{N}:taken:<host>  hash: host's requests handed out and not done, ID → JSON
//	<prefix>frontier{N}:redo:<host>   set: IDs handed out again after a lease ran out
//	<prefix>frontier{N}:lease:<host>  string: the lease holder, expiring (PX) unless renewed
//	<prefix>frontier{N}:holder:<host> string: the lease holder, kept until the lease ends or is taken over
//	<prefix>frontier{N}:fence:<host>  string: the host's last lease token (never expires)
//	<prefix>frontier{N}:members       sorted set: the live members (Queues), by when each heartbeat runs out
//
// The seen set keeps a 64-bit fingerprint of each request's key (the first 8 bytes of its SHA-256, a
// signed decimal), in buckets that Redis keeps as intsets (8 bytes an entry, at most 512 entries with
// the default set-max-intset-entries): about 9 bytes a key, whatever its length. Keys of one shard
// whose fingerprints are equal collide, the second taken for seen: about n²/2^65 of n keys (seen.go).
// The format before (a set <prefix>frontier{N}:seen of whole keys) is migrated by FrontierAdd: the add
// script refuses to run while that key exists, and the Store moves its keys to fingerprints and
// deletes it, then adds again.
//
// The seen set keeps a 64-bit fingerprint of each request's key (the first 8 bytes of its SHA-256, a
// signed decimal), in buckets that Redis keeps as intsets (8 bytes an entry, at most 512 entries with
// the default set-max-intset-entries): about 9 bytes a key, whatever its length. Keys of one shard
// whose fingerprints are equal collide, the second taken for seen: about n²/2^65 of n keys (seen.go).
// The format before (a set <prefix>frontier{N}:seen of whole keys) is migrated by FrontierAdd: the add
// script refuses to run while that key exists, and the Store moves its keys to fingerprints and
// deletes it, then adds again.
//
// The frontier needs Redis 6.2 or later (LPOP with a count). A host's shard is FNV-1a of its name
// modulo the shard count. Leasing a due host whose lease key is
// gone puts its handed-out requests back at the head of its queue (marked redo); a host with nothing
// queued leaves the schedule. Every lease and renewal is its member's heartbeat on the shard, and
// leases no more than the member's share of the shard's hosts in the schedule (over its live members,
// rounded up). Each grant takes the host's next token: the server's now in microseconds, or one more
// than the last token when that is not less (a clock set back), so tokens grow at every grant, even
// after the shard lost the fence key. A departure under a lease (FrontierAdmit) presents the token and
// the lease's end to the admission script on the host's hash: it is refused once a greater token has
// been presented there (the hash's fence field) or the end has passed on the server's clock; a greater
// token becomes the fence. CollyStorage keeps Colly's visited set in <prefix>colly:visited and
// each host's cookies in <prefix>colly:cookies:<host>.
//
// The fields of a host hash are v (the StateVersion of the writer), adaptive_delay, known_limit,
// crawl_delay (nanoseconds), next_departure, hold_until, breaker_changed, updated_at (unix
// nanoseconds, "" for the zero time), hold_trigger, crawl_clamped ("0" or "1"), breaker and failures,
// all as decimal strings; park_until, rate_interval and rate_until, and the capacity model's
// refused_interval (nanoseconds), model_ver (its version) and noise (its verdict on the host's
// refusals, audit.NoiseVerdict), absent from records written before them (SaveHosts keeps the stored
// model when its model_ver is newer, and the greater noise); and, written only by the scripts on the server's clock, last_departure, pending, hold_srv and
// rate_srv (unix nanoseconds), pending_by (the admitting Store's token) and fence (the greatest lease
// token presented, FrontierAdmit). Host keys never expire unless WithTTL is set: then every admitted
// departure and every save refreshes the key's TTL. Deferred and spilled requests never expire.
//
// A request is stored as a JSON object: v (its layout version, 1), host, method, url, depth, header,
// body (base64), body_lost, ctx, deferred_at (RFC 3339), reason and seq (its ID in the deferred set,
// keeping two identical requests distinct members; 0 in a spill list). SpillRequests is one RPUSH onto
// the host's list; TakeSpilled reads only its host's (see above for how a take is atomic).
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
// when it is back; Open's client ends each call at its context's deadline (ContextTimeoutEnabled). The
// pacers' departures wait meanwhile (they do not pace alone: see the ext README). A server restarted
// without persistence has forgotten the schedule: the epoch tells, and the pacers write back what they
// know.
package redisstore

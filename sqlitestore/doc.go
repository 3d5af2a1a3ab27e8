// Package sqlitestore is an ext.Store kept in one SQLite file, so a crawler's pacing state and its
// deferred requests outlive the process: the embedded default for a crawler on a single machine.
//
//	st, err := sqlitestore.Open("pacing.db")
//	if err != nil { ... }
//	defer st.Close()
//	p := ext.AdaptivePacing(c, ext.WithStore(st))
//	defer p.Close() // before st.Close: writes what is pending
//
// It uses the pure-Go driver modernc.org/sqlite (no cgo), which only programs importing this package
// compile.
//
// # File and connections
//
// The file is in WAL mode with synchronous=NORMAL and a busy timeout of five seconds, so several
// processes may open it (they take turns to write). Within a process a Store holds one writing
// connection, whose transactions begin IMMEDIATE and which the writes queue for in Go, and a pool of
// read-only connections that read alongside it. A Store is safe for concurrent use.
//
// # Schema
//
// The table meta holds the schema version (key 'schema_version'); Open creates the tables of a new
// file, migrates an older file in one transaction, and refuses a file whose version is newer than
// this build (ErrNewerSchema). Schema version 6:
//
//	hosts    (host TEXT PRIMARY KEY, version, adaptive_delay, known_limit, next_departure,
//	          hold_until, hold_trigger TEXT, crawl_delay, crawl_clamped, breaker, breaker_changed,
//	          failures, updated_at, park_until, rate_interval, rate_until, refused_interval,
//	          model_version, noise)                     STRICT, WITHOUT ROWID
//	deferred (id INTEGER PRIMARY KEY AUTOINCREMENT, host, method, url, depth, header, body BLOB,
//	          body_lost, ctx, deferred_at, reason)      STRICT, index (host, id)
//	spilled  (id INTEGER PRIMARY KEY AUTOINCREMENT, host, method, url, depth, header, body BLOB,
//	          body_lost, ctx, spilled_at)               STRICT, index (host, id)
//	sessions (id TEXT PRIMARY KEY, began_at, seen_at)  STRICT, WITHOUT ROWID
//
// sessions records the pacers using the file (Store.BeginSession): a pacer's row is written when it
// starts and at each flush, and deleted by its Close once its last state is written. A pacer that
// starts and finds another's row knows that one ended without Close (killed, crashed) and that its
// last departures, written behind, may be lost: it holds every host its interval from its start.
// spilled holds the requests a Queue spilled; TakeSpilled reads a host's oldest rows through its index
// and deletes them in the same write transaction. Version 1 had no spilled table: a Queue's spills were
// deferred rows with the reason 'queue_spill'. Migrating a version-1 file creates the table and moves
// those rows to it, in their order (the deferred rows keep their IDs).
//
// Durations and instants are INTEGER nanoseconds (instants since the Unix epoch; the zero time.Time
// is 0, and an instant outside the years 1678–2262 is saturated), booleans 0 or 1, the breaker its
// audit.BreakerState, noise its audit.NoiseVerdict (the pacer repairs one it does not know), header
// and ctx JSON objects. Loaded instants are in UTC. IDs of deleted deferred requests are never reused.
//
// # Decoding stored rows
//
// The tables are STRICT, so this package cannot write a value of the wrong type; a file written by
// something else may still hold anything. Loading decodes only: it checks types, not sense.
//
//   - LoadHost returns an error wrapping ext.ErrCorruptState for a row it cannot decode (NULL, TEXT,
//     REAL or BLOB in an INTEGER column, a boolean other than 0 or 1). A row whose version is other
//     than ext.StateVersion is not an error: it is returned with only Host and Version set, since its
//     other columns may mean something else, and the pacer discards it (and audits that). Values that
//     decode but make no sense (a negative delay, a hold years ahead, an unknown breaker state) are
//     returned as they are, for the pacer to repair.
//   - ListDeferred drops what it cannot decode of a deferred row's optional parts: headers or context
//     that are not JSON objects are left nil, a body that is not a BLOB is lost (Body nil, BodyLost
//     true), a bad depth or time is zero. A row whose method or URL cannot be used to send the request
//     again is left out, and ListDeferred then returns the rows it could decode together with an error
//     wrapping ext.ErrCorruptState that names the IDs left out (DeleteDeferred removes them).
//     TakeSpilled decodes spilled rows the same way; one it cannot use is deleted with the rows taken
//     and named in an error wrapping ext.ErrCorruptState.
//
// A write heals a corrupt host row: SaveHosts treats a stored NextDeparture or HoldUntil that is not
// an integer as the zero time when it merges.
package sqlitestore

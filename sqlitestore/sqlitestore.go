package sqlitestore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"runtime"
	"strings"

	"github.com/collypace/ext"
	_ "modernc.org/sqlite" // registers the "sqlite" driver
)

// SchemaVersion is the version of the database schema this build writes; Open migrates older files
// to it.
const SchemaVersion = 6

// ErrNewerSchema is matched (errors.Is) by the error Open returns for a database whose schema version
// is newer than SchemaVersion: a newer build wrote it, and this one cannot know what it means.
var ErrNewerSchema = errors.New("sqlitestore: database schema is newer than this build")

// busyTimeoutMS is how long a connection waits for another process's write lock.
const busyTimeoutMS = 5000

// Store is an ext.Store kept in a SQLite file. It is safe for concurrent use; see the package
// documentation for the schema and how rows are decoded.
type Store struct {
	w *sql.DB // the one writing connection: SQLite takes one writer at a time, so writes queue here
	r *sql.DB // read-only connections, reading alongside the writer (WAL)

	saveHost    *sql.Stmt // on w
	replaceHost *sql.Stmt // on w
	addDefer    *sql.Stmt // on w
	delDefer    *sql.Stmt // on w
	addSpill    *sql.Stmt // on w
	takeSpill   *sql.Stmt // on w: the oldest spilled rows of a host, read inside the taking transaction
	delSpill    *sql.Stmt // on w
	takeAll     *sql.Stmt // on w: the oldest deferred rows, read inside the taking transaction
	takeByHost  *sql.Stmt // on w: the oldest deferred rows of a host, likewise
	spillHosts  *sql.Stmt // on r
	loadHost    *sql.Stmt // on r
	listAll     *sql.Stmt // on r
	listByHost  *sql.Stmt // on r
}

var _ ext.Store = (*Store)(nil)

// Open opens the SQLite database at path, creating the file and its tables when missing and migrating
// an older schema. path is a file path as the os package takes it, relative to the working directory
// or absolute; any character is allowed (spaces, '?', '#', '%'). ":memory:" is refused, since the
// Store's connections would each see a different database. A new file is created readable by its
// owner only (0600): deferred requests are stored in it. Close the Store when done.
func Open(path string) (*Store, error) {
	if path == "" || path == ":memory:" {
		return nil, fmt.Errorf("sqlitestore: path %q does not name a file", path)
	}
	abs, err := prepareFile(path)
	if err != nil {
		return nil, err
	}
	ctx := context.Background()
	s := &Store{}
	// The writer: transactions begin IMMEDIATE, so a write never fails upgrading a read lock.
	if s.w, err = openDB(abs, "_txlock=immediate"); err != nil {
		return nil, err
	}
	s.w.SetMaxOpenConns(1)
	s.w.SetMaxIdleConns(1)
	if err := s.init(ctx); err != nil {
		s.w.Close()
		return nil, err
	}
	if s.r, err = openDB(abs, "_pragma=query_only(1)"); err != nil {
		s.w.Close()
		return nil, err
	}
	n := max(4, runtime.GOMAXPROCS(0))
	s.r.SetMaxOpenConns(n)
	s.r.SetMaxIdleConns(n) // the default (2) would reopen connections under parallel reads
	if err := s.prepare(ctx); err != nil {
		s.Close()
		return nil, err
	}
	return s, nil
}

// prepareFile makes path absolute, checks that its directory exists, and creates the file owner-only
// when it is missing (SQLite gives its -wal and -shm files the database file's permissions).
func prepareFile(path string) (string, error) {
	abs, err := filepath.Abs(path)
	if err != nil {
		return "", fmt.Errorf("sqlitestore: path %q: %w", path, err)
	}
	dir := filepath.Dir(abs)
	if fi, err := os.Stat(dir); err != nil {
		return "", fmt.Errorf("sqlitestore: directory %s of database %s: %w", dir, path, err)
	} else if !fi.IsDir() {
		return "", fmt.Errorf("sqlitestore: %s (in database path %s) is not a directory", dir, path)
	}
	f, err := os.OpenFile(abs, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return "", fmt.Errorf("sqlitestore: database %s: %w", path, err)
	}
	if err := f.Close(); err != nil {
		return "", fmt.Errorf("sqlitestore: database %s: %w", path, err)
	}
	return abs, nil
}

// openDB opens a pool on the absolute path abs with the pragmas every connection needs, plus extra
// query parameters. The path goes into an SQLite URI ("file:/dir/name?..."), escaped so that '?',
// '#', '%' and spaces in it stay part of the name.
func openDB(abs, extra string) (*sql.DB, error) {
	p := filepath.ToSlash(abs)
	if !strings.HasPrefix(p, "/") {
		p = "/" + p // a Windows volume: file:/C:/dir/name
	}
	u := url.URL{Path: p}
	dsn := fmt.Sprintf("file:%s?_pragma=busy_timeout(%d)&_pragma=synchronous(NORMAL)&%s", u.EscapedPath(), busyTimeoutMS, extra)
	db, err := sql.Open("sqlite", dsn)
	if err != nil {
		return nil, fmt.Errorf("sqlitestore: open %s: %w", abs, err)
	}
	return db, nil
}

// init puts the file in WAL mode and brings its schema to SchemaVersion.
func (s *Store) init(ctx context.Context) error {
	var mode string
	if err := s.w.QueryRowContext(ctx, "PRAGMA journal_mode=WAL").Scan(&mode); err != nil {
		return fmt.Errorf("sqlitestore: set WAL mode: %w", err)
	}
	if mode != "wal" {
		return fmt.Errorf("sqlitestore: journal mode is %q, want wal (is the file on a network file system?)", mode)
	}
	tx, err := s.w.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("sqlitestore: migrate: %w", err)
	}
	defer tx.Rollback()
	if err := migrate(ctx, tx); err != nil {
		return err
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("sqlitestore: migrate: %w", err)
	}
	return nil
}

// migrations[v] brings a database from schema version v to v+1, inside migrate's transaction. A new
// version is one more function here (and SchemaVersion incremented); a migration never changes meta.
var migrations = []func(ctx context.Context, tx *sql.Tx) error{
	0: createV1,
	1: spillTableV2,
	2: hostLimitsV3,
	3: capacityModelV4,
	4: noiseVerdictV5,
	5: sessionsV6,
}

// sessionsV6 adds sessions: the pacers using the file (Store.BeginSession), so that one started after a
// pacer that ended without Close knows it. A file migrated from version 5 has none on record.
func sessionsV6(ctx context.Context, tx *sql.Tx) error {
	_, err := tx.ExecContext(ctx, `CREATE TABLE sessions (
		id       TEXT PRIMARY KEY NOT NULL,
		began_at INTEGER NOT NULL, -- unix ns
		seen_at  INTEGER NOT NULL  -- unix ns
	) STRICT, WITHOUT ROWID`)
	return err
}

// noiseVerdictV5 adds the capacity model's verdict on the host's refusals (audit.NoiseVerdict) to hosts.
// Older rows have none (0: undecided).
func noiseVerdictV5(ctx context.Context, tx *sql.Tx) error {
	_, err := tx.ExecContext(ctx, `ALTER TABLE hosts ADD COLUMN noise INTEGER NOT NULL DEFAULT 0`)
	return err
}

// capacityModelV4 adds the capacity model's refused bound and version to hosts. Older rows have none (0).
func capacityModelV4(ctx context.Context, tx *sql.Tx) error {
	for _, q := range []string{
		`ALTER TABLE hosts ADD COLUMN refused_interval INTEGER NOT NULL DEFAULT 0`, // ns
		`ALTER TABLE hosts ADD COLUMN model_version INTEGER NOT NULL DEFAULT 0`,
	} {
		if _, err := tx.ExecContext(ctx, q); err != nil {
			return err
		}
	}
	return nil
}

// migrate reads the schema version from meta and runs the migrations from it to SchemaVersion.
func migrate(ctx context.Context, tx *sql.Tx) error {
	if _, err := tx.ExecContext(ctx, `CREATE TABLE IF NOT EXISTS meta (
		key   TEXT PRIMARY KEY,
		value INTEGER NOT NULL
	) STRICT`); err != nil {
		return fmt.Errorf("sqlitestore: create meta: %w", err)
	}
	var version int64
	err := tx.QueryRowContext(ctx, "SELECT value FROM meta WHERE key = 'schema_version'").Scan(&version)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		version = 0
	case err != nil:
		return fmt.Errorf("sqlitestore: read schema version: %w", err)
	}
	if version > SchemaVersion {
		return newerSchemaError{found: version, known: SchemaVersion}
	}
	if version < 0 {
		return fmt.Errorf("sqlitestore: database schema version %d: %w", version, ext.ErrCorruptState)
	}
	if version == SchemaVersion {
		return nil
	}
	for v := version; v < SchemaVersion; v++ {
		if err := migrations[v](ctx, tx); err != nil {
			return fmt.Errorf("sqlitestore: migrate schema from version %d to %d: %w", v, v+1, err)
		}
	}
	_, err = tx.ExecContext(ctx, `INSERT INTO meta (key, value) VALUES ('schema_version', ?)
		ON CONFLICT (key) DO UPDATE SET value = excluded.value`, SchemaVersion)
	if err != nil {
		return fmt.Errorf("sqlitestore: write schema version: %w", err)
	}
	return nil
}

// requestColumnsDDL declares the columns a deferred (version 1) and a spilled (version 2) request
// share, from its ID to its context. Migrations use it: it never changes.
const requestColumnsDDL = `
			id          INTEGER PRIMARY KEY AUTOINCREMENT,
			host        TEXT    NOT NULL,
			method      TEXT    NOT NULL,
			url         TEXT    NOT NULL,
			depth       INTEGER NOT NULL,
			header      TEXT    NOT NULL, -- JSON object of string arrays
			body        BLOB,             -- NULL: none
			body_lost   INTEGER NOT NULL CHECK (body_lost IN (0, 1)),
			ctx         TEXT    NOT NULL, -- JSON object of strings`

// createV1 creates the tables of schema version 1 in an empty database. Without IF NOT EXISTS: a
// table of that name that this package did not create is an error, not a surprise later.
func createV1(ctx context.Context, tx *sql.Tx) error {
	for _, q := range []string{
		`CREATE TABLE hosts (
			host            TEXT PRIMARY KEY NOT NULL,
			version         INTEGER NOT NULL,
			adaptive_delay  INTEGER NOT NULL, -- ns
			known_limit     INTEGER NOT NULL, -- ns
			next_departure  INTEGER NOT NULL, -- unix ns, 0: zero time
			hold_until      INTEGER NOT NULL, -- unix ns
			hold_trigger    TEXT    NOT NULL,
			crawl_delay     INTEGER NOT NULL, -- ns
			crawl_clamped   INTEGER NOT NULL CHECK (crawl_clamped IN (0, 1)),
			breaker         INTEGER NOT NULL, -- audit.BreakerState
			breaker_changed INTEGER NOT NULL, -- unix ns
			failures        INTEGER NOT NULL,
			updated_at      INTEGER NOT NULL  -- unix ns
		) STRICT, WITHOUT ROWID`,
		`CREATE TABLE deferred (` + requestColumnsDDL + `
			deferred_at INTEGER NOT NULL, -- unix ns
			reason      TEXT    NOT NULL
		) STRICT`,
		`CREATE INDEX deferred_host ON deferred (host, id)`,
	} {
		if _, err := tx.ExecContext(ctx, q); err != nil {
			return err
		}
	}
	return nil
}

// hostLimitsV3 adds to hosts what stops a host beyond its hold: the end of a park (a Retry-After above
// the maximum) and the rate-limit interval with its end. Older rows have none (0).
func hostLimitsV3(ctx context.Context, tx *sql.Tx) error {
	for _, q := range []string{
		`ALTER TABLE hosts ADD COLUMN park_until INTEGER NOT NULL DEFAULT 0`,    // unix ns
		`ALTER TABLE hosts ADD COLUMN rate_interval INTEGER NOT NULL DEFAULT 0`, // ns
		`ALTER TABLE hosts ADD COLUMN rate_until INTEGER NOT NULL DEFAULT 0`,    // unix ns
	} {
		if _, err := tx.ExecContext(ctx, q); err != nil {
			return err
		}
	}
	return nil
}

// spillTableV2 gives the requests a Queue spills a table of their own (version 1 kept them in
// deferred, with the reason 'queue_spill'), indexed by host so a refill reads only its host's oldest
// rows, and moves the spilled rows of an older file there, in their order.
func spillTableV2(ctx context.Context, tx *sql.Tx) error {
	for _, q := range []string{
		`CREATE TABLE spilled (` + requestColumnsDDL + `
			spilled_at  INTEGER NOT NULL  -- unix ns
		) STRICT`,
		`CREATE INDEX spilled_host ON spilled (host, id)`,
		`INSERT INTO spilled (host, method, url, depth, header, body, body_lost, ctx, spilled_at)
			SELECT host, method, url, depth, header, body, body_lost, ctx, deferred_at
			FROM deferred WHERE reason = 'queue_spill' ORDER BY id`,
		`DELETE FROM deferred WHERE reason = 'queue_spill'`,
	} {
		if _, err := tx.ExecContext(ctx, q); err != nil {
			return err
		}
	}
	return nil
}

type newerSchemaError struct{ found, known int64 }

func (e newerSchemaError) Error() string {
	return fmt.Sprintf("sqlitestore: database schema version %d is newer than this build (%d)", e.found, e.known)
}

func (e newerSchemaError) Is(target error) bool { return target == ErrNewerSchema }

// prepare prepares the statements the Store reuses.
func (s *Store) prepare(ctx context.Context) error {
	for _, p := range []struct {
		db   *sql.DB
		dst  **sql.Stmt
		text string
	}{
		{s.w, &s.saveHost, saveHostSQL},
		{s.w, &s.replaceHost, replaceHostSQL},
		{s.w, &s.addDefer, addDeferredSQL},
		{s.w, &s.delDefer, "DELETE FROM deferred WHERE id = ?"},
		{s.w, &s.addSpill, addSpilledSQL},
		{s.w, &s.takeSpill, "SELECT " + spilledColumns + " FROM spilled WHERE host = ? ORDER BY id LIMIT ?"},
		{s.w, &s.delSpill, "DELETE FROM spilled WHERE host = ? AND id <= ?"},
		{s.w, &s.takeAll, "SELECT " + deferredColumns + " FROM deferred ORDER BY id LIMIT ?"},
		{s.w, &s.takeByHost, "SELECT " + deferredColumns + " FROM deferred WHERE host = ? ORDER BY id LIMIT ?"},
		{s.r, &s.spillHosts, "SELECT host, count(*) FROM spilled GROUP BY host"},
		{s.r, &s.loadHost, loadHostSQL},
		{s.r, &s.listAll, "SELECT " + deferredColumns + " FROM deferred ORDER BY id LIMIT ?"},
		{s.r, &s.listByHost, "SELECT " + deferredColumns + " FROM deferred WHERE host = ? ORDER BY id LIMIT ?"},
	} {
		st, err := p.db.PrepareContext(ctx, p.text)
		if err != nil {
			return fmt.Errorf("sqlitestore: prepare: %w", err)
		}
		*p.dst = st
	}
	return nil
}

// Close implements ext.Store: it closes the database (the last connection to close checkpoints the
// WAL into the file). Calls after the first return nil.
func (s *Store) Close() error {
	var errs []error
	for _, st := range []*sql.Stmt{s.saveHost, s.replaceHost, s.addDefer, s.delDefer, s.addSpill, s.takeSpill, s.delSpill, s.takeAll, s.takeByHost, s.spillHosts, s.loadHost, s.listAll, s.listByHost} {
		if st != nil {
			errs = append(errs, st.Close())
		}
	}
	if s.r != nil {
		errs = append(errs, s.r.Close())
	}
	errs = append(errs, s.w.Close())
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("sqlitestore: close: %w", err)
	}
	return nil
}

// writeTx runs fn in one transaction on the writer, committed when fn returns nil. An error of fn, or
// of beginning or committing, is wrapped with op.
func (s *Store) writeTx(ctx context.Context, op string, fn func(tx *sql.Tx) error) error {
	tx, err := s.w.BeginTx(ctx, nil)
	if err == nil {
		defer tx.Rollback()
		if err = fn(tx); err == nil {
			err = tx.Commit()
		}
	}
	if err != nil {
		return wrap(ctx, op, err)
	}
	return nil
}

// wrap prefixes err with the operation and, when ctx is done, makes sure it matches ctx.Err() (the
// driver may report an interrupted statement instead).
func wrap(ctx context.Context, op string, err error) error {
	if cerr := ctx.Err(); cerr != nil && !errors.Is(err, cerr) {
		return fmt.Errorf("sqlitestore: %s: %w (%w)", op, cerr, err)
	}
	return fmt.Errorf("sqlitestore: %s: %w", op, err)
}

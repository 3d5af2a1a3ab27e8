package sqlitestore_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"math"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/collypace/ext"
	"github.com/collypace/ext/audit"
	"github.com/collypace/ext/sqlitestore"
	"github.com/collypace/ext/storetest"
)

func tempPath(t testing.TB) string { return filepath.Join(t.TempDir(), "pacing.db") }

func open(t testing.TB, path string) *sqlitestore.Store {
	t.Helper()
	st, err := sqlitestore.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return st
}

// rawDB opens path with the driver alone, to write what the Store never would.
func rawDB(t testing.TB, path string) *sql.DB {
	t.Helper()
	db, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

func exec(t testing.TB, db *sql.DB, query string, args ...any) {
	t.Helper()
	if _, err := db.Exec(query, args...); err != nil {
		t.Fatalf("%s: %v", query, err)
	}
}

func TestConformance(t *testing.T) {
	storetest.Run(t, func(t *testing.T) ext.Store { return open(t, tempPath(t)) })
}

func TestReopenKeepsState(t *testing.T) {
	ctx := context.Background()
	path := tempPath(t)
	st, err := sqlitestore.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	want := storetest.Sample("a.test")
	if err := st.SaveHosts(ctx, []ext.StoredHost{want, storetest.Sample("b.test")}); err != nil {
		t.Fatal(err)
	}
	req := ext.DeferredRequest{
		Host: "a.test", Method: http.MethodPut, URL: "https://a.test/x?y=1", Depth: 3,
		Header: http.Header{"Content-Type": {"text/plain"}}, Body: []byte("hello"),
		Ctx: map[string]string{"k": "v"}, DeferredAt: time.Date(2026, 12, 2, 12, 0, 0, 0, time.UTC), Reason: "breaker open",
	}
	id, err := st.AddDeferred(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	lost := ext.DeferredRequest{Host: "b.test", Method: http.MethodPost, URL: "https://b.test/", BodyLost: true}
	if _, err := st.AddDeferred(ctx, lost); err != nil {
		t.Fatal(err)
	}
	empty := ext.DeferredRequest{Host: "c.test", Method: http.MethodPost, URL: "https://c.test/", Body: []byte{}}
	if _, err := st.AddDeferred(ctx, empty); err != nil {
		t.Fatal(err)
	}
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	if err := st.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}

	st = open(t, path)
	got, ok, err := st.LoadHost(ctx, "a.test")
	if !ok || err != nil {
		t.Fatalf("LoadHost after reopen = ok %v, err %v", ok, err)
	}
	if d := storetest.Diff(got, want); d != "" {
		t.Errorf("after reopen: %s", d)
	}
	all, err := st.ListDeferred(ctx, "", 0)
	if err != nil || len(all) != 3 {
		t.Fatalf("ListDeferred after reopen = %d, %v; want 3", len(all), err)
	}
	r := all[0]
	if r.ID != id || r.Method != req.Method || r.URL != req.URL || r.Depth != 3 || r.Header.Get("Content-Type") != "text/plain" ||
		string(r.Body) != "hello" || r.BodyLost || r.Ctx["k"] != "v" || !r.DeferredAt.Equal(req.DeferredAt) || r.Reason != req.Reason {
		t.Errorf("deferred request after reopen: %+v", r)
	}
	if r := all[1]; r.Body != nil || !r.BodyLost || r.Header != nil || r.Ctx != nil || !r.DeferredAt.IsZero() {
		t.Errorf("deferred request without body after reopen: %+v", r)
	}
	if r := all[2]; r.Body == nil || len(r.Body) != 0 || r.BodyLost {
		t.Errorf("deferred request with an empty body after reopen: %#v", r.Body)
	}
	// IDs are never reused, so deleting a stale ID cannot remove a newer request.
	if err := st.DeleteDeferred(ctx, []int64{all[0].ID, all[1].ID, all[2].ID}); err != nil {
		t.Fatal(err)
	}
	next, err := st.AddDeferred(ctx, req)
	if err != nil || next <= all[2].ID {
		t.Errorf("ID after deleting the newest = %d (%v), want > %d", next, err, all[2].ID)
	}

	var mode string
	if err := rawDB(t, path).QueryRow("PRAGMA journal_mode").Scan(&mode); err != nil || mode != "wal" {
		t.Errorf("journal mode %q (%v), want wal", mode, err)
	}
}

func TestNewerSchemaRefused(t *testing.T) {
	path := tempPath(t)
	st, err := sqlitestore.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	st.Close()
	db := rawDB(t, path)
	exec(t, db, "UPDATE meta SET value = 7 WHERE key = 'schema_version'")
	db.Close()

	_, err = sqlitestore.Open(path)
	if !errors.Is(err, sqlitestore.ErrNewerSchema) {
		t.Fatalf("Open of a version-7 file = %v, want ErrNewerSchema", err)
	}
	if want := fmt.Sprintf("sqlitestore: database schema version 7 is newer than this build (%d)", sqlitestore.SchemaVersion); err.Error() != want {
		t.Errorf("error %q, want %q", err, want)
	}
}

func TestOpenRefuses(t *testing.T) {
	dir := t.TempDir()
	notDB := filepath.Join(dir, "not.db")
	if err := os.WriteFile(notDB, []byte(strings.Repeat("not a database\n", 100)), 0o600); err != nil {
		t.Fatal(err)
	}
	foreign := filepath.Join(dir, "foreign.db")
	exec(t, rawDB(t, foreign), "CREATE TABLE hosts (name TEXT)")
	for _, path := range []string{"", ":memory:", notDB, foreign, filepath.Join(dir, "missing", "dir", "x.db")} {
		st, err := sqlitestore.Open(path)
		if err == nil {
			st.Close()
			t.Errorf("Open(%q) succeeded", path)
			continue
		}
		if !strings.HasPrefix(err.Error(), "sqlitestore: ") {
			t.Errorf("Open(%q) error %q lacks the package prefix", path, err)
		}
	}
}

func TestOpenOddPath(t *testing.T) {
	path := filepath.Join(t.TempDir(), "a?b#c%d e.db")
	st := open(t, path)
	if err := st.SaveHosts(context.Background(), []ext.StoredHost{storetest.Sample("a.test")}); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(path); err != nil {
		t.Errorf("the file is not where asked: %v", err)
	}
}

// hostileFile makes a schema-version-1 file whose tables have no column types, so rows can hold
// anything, as a file written by something else could.
func hostileFile(t *testing.T) (path string, db *sql.DB) {
	path = tempPath(t)
	db = rawDB(t, path)
	exec(t, db, "CREATE TABLE meta (key TEXT PRIMARY KEY, value INTEGER NOT NULL)")
	exec(t, db, "INSERT INTO meta VALUES ('schema_version', 1)")
	exec(t, db, `CREATE TABLE hosts (host PRIMARY KEY, version, adaptive_delay, known_limit, next_departure, hold_until,
		hold_trigger, crawl_delay, crawl_clamped, breaker, breaker_changed, failures, updated_at)`)
	exec(t, db, `CREATE TABLE deferred (id INTEGER PRIMARY KEY AUTOINCREMENT, host, method, url, depth, header, body,
		body_lost, ctx, deferred_at, reason)`)
	return path, db
}

// goodRow is a well-formed hosts row, as column → SQL value.
func goodRow(host string) map[string]any {
	return map[string]any{
		"host": host, "version": int64(ext.StateVersion), "adaptive_delay": int64(time.Second), "known_limit": int64(0),
		"next_departure": int64(1e18), "hold_until": int64(0), "hold_trigger": audit.TriggerRetryAfter,
		"crawl_delay": int64(0), "crawl_clamped": int64(0), "breaker": int64(0), "breaker_changed": int64(0),
		"failures": int64(0), "updated_at": int64(1e18),
	}
}

func insertHost(t *testing.T, db *sql.DB, row map[string]any) {
	t.Helper()
	var cols, marks []string
	var args []any
	for c, v := range row {
		cols, marks, args = append(cols, c), append(marks, "?"), append(args, v)
	}
	exec(t, db, "INSERT INTO hosts ("+strings.Join(cols, ", ")+") VALUES ("+strings.Join(marks, ", ")+")", args...)
}

func TestCorruptHostRows(t *testing.T) {
	type sqlExpr string // a value written as SQL text rather than bound
	const (
		corrupt = -1
		ok      = ext.StateVersion
	)
	cases := []struct {
		name  string
		col   string
		value any
		want  int // corrupt, or the Version LoadHost returns
	}{
		{"good", "failures", int64(3), ok},
		{"text delay", "adaptive_delay", "abc", corrupt},
		{"numeric text delay", "adaptive_delay", "1000", corrupt},
		{"text time", "next_departure", "abc", corrupt},
		{"NaN delay", "known_limit", math.NaN(), corrupt}, // SQLite stores a NaN as NULL
		{"Inf time", "hold_until", sqlExpr("9e999"), corrupt},
		{"real delay", "crawl_delay", 1.5, corrupt},
		{"whole real delay", "crawl_delay", 2.0, corrupt},
		{"huge real failures", "failures", 9e300, corrupt},
		{"NULL delay", "adaptive_delay", nil, corrupt},
		{"NULL time", "updated_at", nil, corrupt},
		{"NULL trigger", "hold_trigger", nil, corrupt},
		{"integer trigger", "hold_trigger", int64(42), corrupt},
		{"blob breaker", "breaker", []byte{0, 1}, corrupt},
		{"boolean 2", "crawl_clamped", int64(2), corrupt},
		{"boolean -1", "crawl_clamped", int64(-1), corrupt},
		{"NULL version", "version", nil, corrupt},
		{"text version", "version", "one", corrupt},
		{"real version", "version", 1.0, corrupt},
		{"unknown breaker decodes", "breaker", int64(99), ok},
		{"negative delay decodes", "adaptive_delay", int64(-5), ok},
		{"extreme time decodes", "hold_until", int64(math.MaxInt64), ok},
		{"version 0", "version", int64(0), 0},
		{"version 99", "version", int64(99), 99},
		{"version -3", "version", int64(-3), -3},
	}
	path, db := hostileFile(t)
	for i, c := range cases {
		row := goodRow(fmt.Sprintf("h%d.test", i))
		if e, isExpr := c.value.(sqlExpr); isExpr {
			insertHost(t, db, row)
			exec(t, db, fmt.Sprintf("UPDATE hosts SET %s = %s WHERE host = ?", c.col, e), row["host"])
		} else {
			row[c.col] = c.value
			insertHost(t, db, row)
		}
	}
	// A version-99 row may have any layout: the rest is not decoded.
	exec(t, db, "UPDATE hosts SET adaptive_delay = 'later', hold_trigger = x'00' WHERE version = 99")
	db.Close()

	st := open(t, path)
	ctx := context.Background()
	for i, c := range cases {
		host := fmt.Sprintf("h%d.test", i)
		got, found, err := st.LoadHost(ctx, host)
		switch {
		case c.want == corrupt:
			if !errors.Is(err, ext.ErrCorruptState) || found {
				t.Errorf("%s: LoadHost = found %v, %v; want an ErrCorruptState error", c.name, found, err)
			} else if !strings.HasPrefix(err.Error(), "sqlitestore: load host") || !strings.Contains(err.Error(), c.col) {
				t.Errorf("%s: error %q does not name the column %s", c.name, err, c.col)
			}
		case err != nil || !found:
			t.Errorf("%s: LoadHost = found %v, %v; want a row", c.name, found, err)
		case got.Host != host || got.Version != c.want:
			t.Errorf("%s: host %q version %d, want %q %d", c.name, got.Host, got.Version, host, c.want)
		case c.want != ext.StateVersion && (got != ext.StoredHost{Host: host, Version: c.want}):
			t.Errorf("%s: a row of another version decoded beyond its host and version: %+v", c.name, got)
		}
	}

	// A write heals a corrupt row, and the merge ignores what is not an integer.
	for i, c := range cases {
		want := storetest.Sample(fmt.Sprintf("h%d.test", i))
		if err := st.SaveHosts(ctx, []ext.StoredHost{want}); err != nil {
			t.Fatalf("%s: SaveHosts over it: %v", c.name, err)
		}
		got, _, err := st.LoadHost(ctx, want.Host)
		if err != nil {
			t.Errorf("%s: after a write: %v", c.name, err)
			continue
		}
		if c.name == "extreme time decodes" {
			want.HoldUntil = time.Unix(0, math.MaxInt64).UTC() // the later one is kept
		}
		if d := storetest.Diff(got, want); d != "" {
			t.Errorf("%s: after a write: %s", c.name, d)
		}
	}
}

func TestStrictTablesRefuseBadTypes(t *testing.T) {
	path := tempPath(t)
	st := open(t, path)
	if err := st.SaveHosts(context.Background(), []ext.StoredHost{storetest.Sample("a.test")}); err != nil {
		t.Fatal(err)
	}
	db := rawDB(t, path)
	for _, q := range []string{
		"UPDATE hosts SET adaptive_delay = 'abc'",
		"UPDATE hosts SET next_departure = 1.5",
		"UPDATE hosts SET failures = NULL",
		"UPDATE hosts SET crawl_clamped = 2",
		"INSERT INTO deferred (host, method, url, depth, header, body_lost, ctx, deferred_at, reason) VALUES ('a', 'GET', 'u', 'deep', '{}', 0, '{}', 0, '')",
	} {
		if _, err := db.Exec(q); err == nil {
			t.Errorf("%s: accepted", q)
		}
	}
}

func TestCorruptDeferredRows(t *testing.T) {
	path, db := hostileFile(t)
	insert := func(host, method, url, depth, header, body, bodyLost, ctx, at, reason any) {
		exec(t, db, "INSERT INTO deferred (host, method, url, depth, header, body, body_lost, ctx, deferred_at, reason) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
			host, method, url, depth, header, body, bodyLost, ctx, at, reason)
	}
	insert("a.test", "GET", "https://a.test/1", 1, `{"A":["b"]}`, nil, 0, `{"k":"v"}`, int64(1e18), "r")     // 1: good
	insert("a.test", "POST", "https://a.test/2", "deep", "not json", "text body", "yes", `[1,2]`, "noon", 7) // 2: partial
	insert("a.test", nil, "https://a.test/3", 1, "{}", nil, 0, "{}", 0, "")                                  // 3: no method
	insert("a.test", "GET", "/relative", 1, "{}", nil, 0, "{}", 0, "")                                       // 4: no usable URL
	insert(nil, "G E T", 5.5, nil, nil, nil, nil, nil, nil, nil)                                             // 5: nothing usable
	insert(42, "DELETE", "http://b.test/6", 2, `{"A":"not a list"}`, []byte{0, 1}, 1, `{"k":1}`, 0, "")      // 6: partial
	db.Close()

	st := open(t, path)
	ctx := context.Background()
	rows, err := st.ListDeferred(ctx, "", 0)
	if !errors.Is(err, ext.ErrCorruptState) || !strings.Contains(err.Error(), "[3 4 5]") {
		t.Errorf("ListDeferred error = %v, want ErrCorruptState naming rows [3 4 5]", err)
	}
	if len(rows) != 3 || rows[0].ID != 1 || rows[1].ID != 2 || rows[2].ID != 6 {
		t.Fatalf("ListDeferred = %+v, want rows 1, 2, 6", rows)
	}
	if r := rows[0]; r.Header.Get("A") != "b" || r.Ctx["k"] != "v" || r.Depth != 1 || r.DeferredAt.IsZero() {
		t.Errorf("good row: %+v", r)
	}
	if r := rows[1]; r.Method != "POST" || r.Depth != 0 || r.Header != nil || r.Ctx != nil || r.Body != nil || !r.BodyLost ||
		!r.DeferredAt.IsZero() || r.Reason != "" {
		t.Errorf("partial row: %+v", r)
	}
	if r := rows[2]; r.Host != "" || r.Header != nil || r.Ctx != nil || string(r.Body) != "\x00\x01" || !r.BodyLost {
		t.Errorf("partial row: %+v", r)
	}
	if err := st.DeleteDeferred(ctx, []int64{3, 4, 5}); err != nil {
		t.Fatal(err)
	}
	if rows, err := st.ListDeferred(ctx, "a.test", 0); err != nil || len(rows) != 2 {
		t.Errorf("after deleting the unusable rows: %d, %v", len(rows), err)
	}
}

func TestCanceledContext(t *testing.T) {
	st := open(t, tempPath(t))
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	check := func(op string, err error) {
		t.Helper()
		if !errors.Is(err, context.Canceled) || !strings.HasPrefix(err.Error(), "sqlitestore: ") {
			t.Errorf("%s with a canceled context = %v, want a wrapped context.Canceled", op, err)
		}
	}
	check("SaveHosts", st.SaveHosts(ctx, []ext.StoredHost{storetest.Sample("a.test")}))
	_, _, err := st.LoadHost(ctx, "a.test")
	check("LoadHost", err)
	_, err = st.AddDeferred(ctx, ext.DeferredRequest{Method: "GET", URL: "http://a.test/"})
	check("AddDeferred", err)
	_, err = st.ListDeferred(ctx, "", 0)
	check("ListDeferred", err)
	check("DeleteDeferred", st.DeleteDeferred(ctx, []int64{1}))
}

// TestConcurrentStores has two Stores on one file (as two processes would) write, read and defer at
// once: SQLite's locks and the busy timeout must serialize them without an error.
func TestConcurrentStores(t *testing.T) {
	path := tempPath(t)
	stores := []*sqlitestore.Store{open(t, path), open(t, path)}
	ctx := context.Background()
	var wg sync.WaitGroup
	for g := range 8 {
		st := stores[g%2]
		wg.Go(func() {
			for i := range 25 {
				batch := make([]ext.StoredHost, 10)
				for j := range batch {
					batch[j] = storetest.Sample(fmt.Sprintf("h%d.test", j))
					batch[j].NextDeparture = batch[j].NextDeparture.Add(time.Duration(g*100+i) * time.Millisecond)
				}
				if err := st.SaveHosts(ctx, batch); err != nil {
					t.Error(err)
					return
				}
				if _, _, err := st.LoadHost(ctx, fmt.Sprintf("h%d.test", i%10)); err != nil {
					t.Error(err)
					return
				}
				id, err := st.AddDeferred(ctx, ext.DeferredRequest{Host: "d.test", Method: "GET", URL: fmt.Sprintf("http://d.test/%d/%d", g, i)})
				if err != nil {
					t.Error(err)
					return
				}
				if i%2 == 0 {
					if err := st.DeleteDeferred(ctx, []int64{id}); err != nil {
						t.Error(err)
						return
					}
				}
			}
		})
	}
	wg.Wait()
	left, err := stores[0].ListDeferred(ctx, "d.test", 0)
	if err != nil || len(left) != 8*12 {
		t.Errorf("deferred left: %d, %v; want %d", len(left), err, 8*12)
	}
	got, _, err := stores[1].LoadHost(ctx, "h0.test")
	want := storetest.Sample("h0.test").NextDeparture.Add(724 * time.Millisecond) // the latest written
	if err != nil || !got.NextDeparture.Equal(want) {
		t.Errorf("next departure %v (%v), want the latest written %v", got.NextDeparture, err, want)
	}
}

package sqlitestore_test

import (
	"context"
	"errors"
	"net/http"
	"testing"
	"time"

	"github.com/collypace/ext"
	"github.com/collypace/ext/sqlitestore"
)

// A version-1 file, whose Queue spills shared the deferred table (reason 'queue_spill'), migrates to
// version 2: its spilled rows move to the spilled table in their order, its deferred rows stay.
func TestMigrateV1SpillsToTheirTable(t *testing.T) {
	ctx := context.Background()
	path := tempPath(t)
	db := rawDB(t, path)
	tx, err := db.Begin()
	if err != nil {
		t.Fatal(err)
	}
	if err := sqlitestore.CreateV1(ctx, tx); err != nil {
		t.Fatal(err)
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	exec(t, db, "CREATE TABLE meta (key TEXT PRIMARY KEY, value INTEGER NOT NULL) STRICT")
	exec(t, db, "INSERT INTO meta VALUES ('schema_version', 1)")
	at := time.Date(2026, 12, 2, 12, 0, 0, 0, time.UTC)
	for i, row := range []struct{ host, path, reason string }{
		{"a.test", "/s/0", "queue_spill"},
		{"a.test", "/d/0", "breaker open"},
		{"b.test", "/s/0", "queue_spill"},
		{"a.test", "/s/1", "queue_spill"},
	} {
		exec(t, db, `INSERT INTO deferred (host, method, url, depth, header, body, body_lost, ctx, deferred_at, reason)
			VALUES (?, 'POST', ?, 2, '{"X-Trace":["t"]}', x'6869', 0, '{"k":"v"}', ?, ?)`,
			row.host, "http://"+row.host+row.path, at.Add(time.Duration(i)*time.Second).UnixNano(), row.reason)
	}
	db.Close()

	st := open(t, path)
	var version int64
	if err := rawDB(t, path).QueryRow("SELECT value FROM meta WHERE key = 'schema_version'").Scan(&version); err != nil || version != sqlitestore.SchemaVersion {
		t.Errorf("schema version after Open = %d (%v), want %d", version, err, sqlitestore.SchemaVersion)
	}
	deferred, err := st.ListDeferred(ctx, "", 0)
	if err != nil || len(deferred) != 1 || deferred[0].URL != "http://a.test/d/0" || deferred[0].ID != 2 || deferred[0].Reason != "breaker open" {
		t.Errorf("deferred after the migration = %+v, %v; want only a.test's /d/0, its ID kept", deferred, err)
	}
	spilled, err := st.TakeSpilled(ctx, "a.test", 0)
	if err != nil || len(spilled) != 2 || spilled[0].URL != "http://a.test/s/0" || spilled[1].URL != "http://a.test/s/1" {
		t.Fatalf("a.test's spilled after the migration = %+v, %v; want /s/0 then /s/1", spilled, err)
	}
	r := spilled[1]
	if r.Method != http.MethodPost || r.Depth != 2 || r.Header.Get("X-Trace") != "t" || string(r.Body) != "hi" || r.Ctx["k"] != "v" ||
		!r.DeferredAt.Equal(at.Add(3*time.Second)) || r.Reason != "" || r.ID != 0 {
		t.Errorf("migrated spilled request: %+v", r)
	}
	if b, err := st.TakeSpilled(ctx, "b.test", 0); err != nil || len(b) != 1 {
		t.Errorf("b.test's spilled after the migration = %d, %v; want 1", len(b), err)
	}
	st.Close()
	open(t, path) // a version-2 file opens as it is
}

// A spilled row that cannot be decoded is taken with the others, and named.
func TestTakeSpilledDropsUndecodable(t *testing.T) {
	ctx := context.Background()
	path := tempPath(t)
	st := open(t, path)
	reqs := []ext.DeferredRequest{
		{Method: http.MethodGet, URL: "http://c.test/0"},
		{Method: http.MethodGet, URL: "http://c.test/1"},
		{Method: http.MethodGet, URL: "http://c.test/2"},
	}
	if err := st.SpillRequests(ctx, "c.test", reqs); err != nil {
		t.Fatal(err)
	}
	exec(t, rawDB(t, path), "UPDATE spilled SET method = 'BAD METHOD' WHERE url = 'http://c.test/1'")
	got, err := st.TakeSpilled(ctx, "c.test", 2)
	if !errors.Is(err, ext.ErrCorruptState) || len(got) != 1 || got[0].URL != "http://c.test/0" {
		t.Fatalf("TakeSpilled = %+v, %v; want /0 and an ErrCorruptState for the undecodable /1", got, err)
	}
	if rest, err := st.TakeSpilled(ctx, "c.test", 0); err != nil || len(rest) != 1 || rest[0].URL != "http://c.test/2" {
		t.Errorf("after the take: %+v, %v; want only /2 left (the undecodable row taken too)", rest, err)
	}
}

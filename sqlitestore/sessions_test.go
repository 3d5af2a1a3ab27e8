package sqlitestore_test

import (
	"path/filepath"
	"testing"
	"time"

	"github.com/collypace/ext/sqlitestore"
)

// The sessions a file records (BeginSession): a session that began and did not end makes the next
// one unclean, once; an ended one does not; a session forgotten by a later BeginSession while it
// still runs is recorded again by its next TouchSession. The record survives reopening the file.
func TestSessionsRecordAnUncleanEnd(t *testing.T) {
	path := filepath.Join(t.TempDir(), "pacing.db")
	open := func() *sqlitestore.Store {
		st, err := sqlitestore.Open(path)
		if err != nil {
			t.Fatal(err)
		}
		return st
	}
	ctx, now := t.Context(), time.Now()
	st := open()
	begin := func(id string, want bool) {
		t.Helper()
		if unclean, err := st.BeginSession(ctx, id, now); err != nil || unclean != want {
			t.Fatalf("BeginSession(%s) = %v, %v; want unclean %v", id, unclean, err, want)
		}
	}
	begin("a", false)
	if err := st.EndSession(ctx, "a"); err != nil {
		t.Fatal(err)
	}
	begin("b", false)                                      // a ended
	begin("c", true)                                       // b did not: killed, or running
	if err := st.TouchSession(ctx, "b", now); err != nil { // b was running: it records itself again
		t.Fatal(err)
	}
	if err := st.EndSession(ctx, "c"); err != nil {
		t.Fatal(err)
	}
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	st = open()
	defer st.Close()
	begin("d", true) // b again, across the reopening
	if err := st.EndSession(ctx, "d"); err != nil {
		t.Fatal(err)
	}
	begin("e", false)
}

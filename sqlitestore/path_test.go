package sqlitestore_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/collypace/ext"
	"github.com/collypace/ext/sqlitestore"
	"github.com/collypace/ext/storetest"
)

// TestOpenRelativeAndOddPaths: the package doc's Open("pacing.db") once failed with
// "invalid uri authority". Every path the os package accepts opens, and names the file it says.
func TestOpenRelativeAndOddPaths(t *testing.T) {
	dir := t.TempDir()
	t.Chdir(dir)
	if err := os.Mkdir("sub dir", 0o755); err != nil {
		t.Fatal(err)
	}
	for _, path := range []string{
		"pacing.db",
		"./x.db",
		"sub dir/../y.db",
		filepath.Join(dir, "abs.db"),
		"a b?c=1#frag%41.db",
		"sub dir/100%.db",
	} {
		t.Run(path, func(t *testing.T) {
			st, err := sqlitestore.Open(path)
			if err != nil {
				t.Fatalf("Open(%q): %v", path, err)
			}
			ctx := context.Background()
			if err := st.SaveHosts(ctx, []ext.StoredHost{storetest.Sample("a.test")}); err != nil {
				t.Fatal(err)
			}
			if err := st.Close(); err != nil {
				t.Fatal(err)
			}
			fi, err := os.Stat(path)
			if err != nil {
				t.Fatalf("the database is not at %q: %v", path, err)
			}
			if fi.Size() == 0 {
				// The WAL was checkpointed on Close, so the file itself holds the tables.
				t.Errorf("%q is empty after Close", path)
			}
			st = open(t, path)
			if _, ok, err := st.LoadHost(ctx, "a.test"); !ok || err != nil {
				t.Errorf("reopened %q: LoadHost = %v, %v", path, ok, err)
			}
		})
	}
}

// TestOpenMissingDirectoryNamesIt checks that a path in a directory that does not exist fails
// with an error naming that directory.
func TestOpenMissingDirectoryNamesIt(t *testing.T) {
	missing := filepath.Join(t.TempDir(), "no-such-dir")
	_, err := sqlitestore.Open(filepath.Join(missing, "pacing.db"))
	if err == nil || !strings.Contains(err.Error(), missing) {
		t.Fatalf("Open in a missing directory: %v, want an error naming %s", err, missing)
	}
}

// TestOpenCreatesOwnerOnlyFile: deferred requests are stored in the file, so a
// new file is readable by its owner only, and so are the WAL files SQLite creates beside it.
func TestOpenCreatesOwnerOnlyFile(t *testing.T) {
	path := tempPath(t)
	st := open(t, path)
	if err := st.SaveHosts(context.Background(), []ext.StoredHost{storetest.Sample("a.test")}); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{path, path + "-wal"} {
		fi, err := os.Stat(p)
		if err != nil {
			t.Fatal(err)
		}
		if perm := fi.Mode().Perm(); perm&0o077 != 0 {
			t.Errorf("%s has mode %v, want no access for group or others", filepath.Base(p), perm)
		}
	}
}

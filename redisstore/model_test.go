package redisstore_test

import (
	"testing"
	"time"

	"github.com/collypace/ext"
	"github.com/collypace/ext/internal/storetest"
	"github.com/collypace/ext/redisstore"
	"github.com/collypace/ext/redisstore/internal/redistest"
)

// Issue 15 rule 4, in Redis: the fleet keeps its newest capacity model. A save with an older model
// version (a process's write-behind of what it knew before) leaves the stored model alone while its
// other fields are written; a newer one replaces it; every admission returns the stored model.
func TestStoreKeepsNewestModel(t *testing.T) {
	st := redisstore.New(redistest.Start(t).Client())
	newer := storetest.Sample("model.test")
	newer.AdaptiveDelay, newer.KnownLimit, newer.RefusedInterval, newer.ModelVersion = 250*time.Millisecond, 250*time.Millisecond, 225*time.Millisecond, 200
	if err := st.SaveHosts(ctx, []ext.StoredHost{newer}); err != nil {
		t.Fatal(err)
	}
	older := newer
	older.AdaptiveDelay, older.KnownLimit, older.RefusedInterval, older.ModelVersion = 400*time.Millisecond, 0, 100*time.Millisecond, 100
	older.Failures = 3
	if err := st.SaveHosts(ctx, []ext.StoredHost{older}); err != nil {
		t.Fatal(err)
	}
	got, ok, err := st.LoadHost(ctx, "model.test")
	if err != nil || !ok {
		t.Fatalf("LoadHost: %v, %v", ok, err)
	}
	if got.AdaptiveDelay != 250*time.Millisecond || got.KnownLimit != 250*time.Millisecond || got.RefusedInterval != 225*time.Millisecond || got.ModelVersion != 200 {
		t.Errorf("after an older model's save: %v/%v/%v version %d, want the newer 250ms/250ms/225ms version 200",
			got.AdaptiveDelay, got.KnownLimit, got.RefusedInterval, got.ModelVersion)
	}
	if got.Failures != 3 {
		t.Errorf("failures %d, want the older save's other fields written (3)", got.Failures)
	}
	a, err := st.Admit(ctx, "model.test", 0)
	if err != nil {
		t.Fatal(err)
	}
	if a.AdaptiveDelay != 250*time.Millisecond || a.KnownLimit != 250*time.Millisecond || a.RefusedInterval != 225*time.Millisecond || a.ModelVersion != 200 {
		t.Errorf("admission's model %+v, want the stored 250ms/250ms/225ms version 200", a)
	}
	newest := older
	newest.AdaptiveDelay, newest.ModelVersion = 500*time.Millisecond, 300
	if err := st.SaveHosts(ctx, []ext.StoredHost{newest}); err != nil {
		t.Fatal(err)
	}
	if got, _, _ := st.LoadHost(ctx, "model.test"); got.AdaptiveDelay != 500*time.Millisecond || got.ModelVersion != 300 {
		t.Errorf("after a newer model's save: %v version %d, want 500ms version 300", got.AdaptiveDelay, got.ModelVersion)
	}
}

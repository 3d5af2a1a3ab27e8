package redisstore_test

import (
	"testing"
	"time"

	"github.com/collypace/ext"
	"github.com/collypace/ext/audit"
	"github.com/collypace/ext/redisstore"
	"github.com/collypace/ext/redisstore/internal/redistest"
	"github.com/collypace/ext/storetest"
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

// The noise verdict only moves forward in a fleet: a save of an earlier verdict (a process that has
// not seen the noise yet, with a newer model) keeps the stored one, a later verdict replaces it, and
// every admission returns it; a repair (Replace) writes what it is given.
func TestStoreKeepsFurthestNoiseVerdict(t *testing.T) {
	st := redisstore.New(redistest.Start(t).Client())
	seen := storetest.Sample("noise.test")
	seen.Noise, seen.ModelVersion = audit.NoiseSeen, 100
	undecided := seen
	undecided.Noise, undecided.ModelVersion, undecided.AdaptiveDelay = audit.NoiseUndecided, 200, 600*time.Millisecond
	refuted := seen
	refuted.Noise = audit.NoiseRefuted
	repaired := seen
	repaired.Noise, repaired.Replace = audit.NoiseUndecided, true
	for _, step := range []struct {
		save  ext.StoredHost
		want  audit.NoiseVerdict
		delay time.Duration // the model stored: the newest, apart from the verdict
	}{
		{seen, audit.NoiseSeen, 2500 * time.Millisecond},
		{undecided, audit.NoiseSeen, 600 * time.Millisecond},
		{refuted, audit.NoiseRefuted, 600 * time.Millisecond},
		{seen, audit.NoiseRefuted, 600 * time.Millisecond},
		{repaired, audit.NoiseUndecided, 2500 * time.Millisecond},
	} {
		if err := st.SaveHosts(ctx, []ext.StoredHost{step.save}); err != nil {
			t.Fatal(err)
		}
		got, _, err := st.LoadHost(ctx, "noise.test")
		if err != nil || got.Noise != step.want || got.AdaptiveDelay != step.delay {
			t.Errorf("after a save of verdict %d (replace %v): stored %d and %v, %v; want %d and %v",
				step.save.Noise, step.save.Replace, got.Noise, got.AdaptiveDelay, err, step.want, step.delay)
		}
		a, err := st.Admit(ctx, "noise.test", 0)
		if err != nil || a.Noise != step.want {
			t.Errorf("after a save of verdict %d (replace %v): admission's %d, %v; want %d", step.save.Noise, step.save.Replace, a.Noise, err, step.want)
		}
	}
}

// Package storetest is the conformance suite every ext.Store runs: the memory store, sqlitestore and
// redisstore behave the same, and a Store of your own runs it from its tests (Run; RunShared for a
// store a fleet shares; RunRobots for one that shares robots.txt reads), as io/fs's fstest checks a
// file system. It imports testing: use it from _test.go files only.
package storetest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/http"
	"reflect"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/collypace/ext"
	"github.com/collypace/ext/audit"
)

var t0 = time.Date(2026, 12, 2, 12, 0, 0, 0, time.UTC)

// Run runs the Store conformance tests against fresh stores made by newStore.
func Run(t *testing.T, newStore func(t *testing.T) ext.Store) {
	t.Run("LoadMissing", func(t *testing.T) {
		s := newStore(t)
		if _, ok, err := s.LoadHost(context.Background(), "nowhere.test"); ok || err != nil {
			t.Errorf("LoadHost of an unknown host = ok %v, err %v; want false, nil", ok, err)
		}
	})
	t.Run("RoundTrip", func(t *testing.T) {
		s := newStore(t)
		want := Sample("a.test:8080")
		if err := s.SaveHosts(context.Background(), []ext.StoredHost{want}); err != nil {
			t.Fatal(err)
		}
		got, ok, err := s.LoadHost(context.Background(), want.Host)
		if !ok || err != nil {
			t.Fatalf("LoadHost = ok %v, err %v", ok, err)
		}
		if d := Diff(got, want); d != "" {
			t.Errorf("round trip: %s", d)
		}
	})
	t.Run("RateLimitKeptWhileInForce", func(t *testing.T) {
		// Issue 16 item 1: a rate-limit interval is stored with its end, and the later end wins the
		// merge (with its interval): a process that knows none does not erase another's.
		s := newStore(t)
		ctx := context.Background()
		until := time.Now().Add(time.Hour).UTC().Truncate(time.Millisecond)
		first := Sample("rl.test")
		first.RateInterval, first.RateUntil = 5*time.Second, until
		second := Sample("rl.test")
		if err := s.SaveHosts(ctx, []ext.StoredHost{first}); err != nil {
			t.Fatal(err)
		}
		if err := s.SaveHosts(ctx, []ext.StoredHost{second}); err != nil {
			t.Fatal(err)
		}
		got, _, err := s.LoadHost(ctx, "rl.test")
		if err != nil || got.RateInterval != 5*time.Second || !got.RateUntil.Equal(until) {
			t.Errorf("rate limit %v until %v (%v), want 5s until %v kept", got.RateInterval, got.RateUntil, err, until)
		}
	})
	t.Run("TakeDeferredTakesOnce", func(t *testing.T) {
		// Issue 16 item 8: concurrent takers of the deferred requests get each one once.
		s := newStore(t)
		ctx := context.Background()
		for i := range 8 {
			host := []string{"a.test", "b.test"}[i%2]
			if _, err := s.AddDeferred(ctx, ext.DeferredRequest{Host: host, Method: "GET", URL: fmt.Sprintf("http://%s/%d", host, i), Header: http.Header{}, Reason: "r"}); err != nil {
				t.Fatal(err)
			}
		}
		got, err := s.TakeDeferred(ctx, "a.test", 2)
		if err != nil || fmt.Sprint(urls(got)) != "[http://a.test/0 http://a.test/2]" {
			t.Fatalf("TakeDeferred(a.test, 2) = %v, %v; want a.test's two oldest", urls(got), err)
		}
		var mu sync.Mutex
		seen := map[string]int{}
		var wg sync.WaitGroup
		for range 4 {
			wg.Go(func() {
				got, err := s.TakeDeferred(ctx, "", 0)
				if err != nil {
					t.Error(err)
				}
				mu.Lock()
				for _, r := range got {
					seen[r.URL]++
				}
				mu.Unlock()
			})
		}
		wg.Wait()
		if len(seen) != 6 {
			t.Errorf("concurrent takes returned %d distinct requests, want the 6 left: %v", len(seen), seen)
		}
		for u, n := range seen {
			if n != 1 {
				t.Errorf("%s taken %d times", u, n)
			}
		}
		if left, err := s.ListDeferred(ctx, "", 0); err != nil || len(left) != 0 {
			t.Errorf("left after the takes: %v, %v", urls(left), err)
		}
	})
	t.Run("SpilledHostsCounts", func(t *testing.T) {
		s := newStore(t)
		ctx := context.Background()
		if err := s.SpillRequests(ctx, "a.test", []ext.DeferredRequest{spilledRequest("a.test", 0), spilledRequest("a.test", 1)}); err != nil {
			t.Fatal(err)
		}
		if err := s.SpillRequests(ctx, "b.test", []ext.DeferredRequest{spilledRequest("b.test", 0)}); err != nil {
			t.Fatal(err)
		}
		if got, err := s.SpilledHosts(ctx); err != nil || got["a.test"] != 2 || got["b.test"] != 1 || len(got) != 2 {
			t.Errorf("SpilledHosts = %v, %v; want a.test 2, b.test 1", got, err)
		}
		if _, err := s.TakeSpilled(ctx, "a.test", 0); err != nil {
			t.Fatal(err)
		}
		if got, err := s.SpilledHosts(ctx); err != nil || len(got) != 1 || got["b.test"] != 1 {
			t.Errorf("SpilledHosts after taking a.test's = %v, %v; want b.test 1", got, err)
		}
	})
	t.Run("MergeKeepsLaterTimes", func(t *testing.T) {
		s := newStore(t)
		ctx := context.Background()
		first := Sample("m.test")
		first.NextDeparture, first.HoldUntil = t0.Add(time.Minute), t0.Add(2*time.Minute)
		second := Sample("m.test")
		second.NextDeparture, second.HoldUntil = t0.Add(time.Second), t0.Add(time.Second)
		second.AdaptiveDelay = 9 * time.Second
		if err := s.SaveHosts(ctx, []ext.StoredHost{first}); err != nil {
			t.Fatal(err)
		}
		if err := s.SaveHosts(ctx, []ext.StoredHost{second}); err != nil {
			t.Fatal(err)
		}
		got, _, err := s.LoadHost(ctx, "m.test")
		if err != nil {
			t.Fatal(err)
		}
		if !got.NextDeparture.Equal(first.NextDeparture) || !got.HoldUntil.Equal(first.HoldUntil) {
			t.Errorf("after an earlier write: next %v hold %v, want the later %v %v", got.NextDeparture, got.HoldUntil, first.NextDeparture, first.HoldUntil)
		}
		if got.AdaptiveDelay != 9*time.Second {
			t.Errorf("adaptive delay %v, want the overwritten 9s", got.AdaptiveDelay)
		}
	})
	t.Run("ReplaceSkipsMerge", func(t *testing.T) {
		s := newStore(t)
		ctx := context.Background()
		bad := Sample("r.test")
		bad.NextDeparture, bad.HoldUntil = t0.Add(1000*time.Hour), t0.Add(1000*time.Hour)
		fixed := Sample("r.test")
		fixed.NextDeparture, fixed.HoldUntil, fixed.Replace = time.Time{}, t0.Add(time.Minute), true
		if err := s.SaveHosts(ctx, []ext.StoredHost{bad}); err != nil {
			t.Fatal(err)
		}
		if err := s.SaveHosts(ctx, []ext.StoredHost{fixed}); err != nil {
			t.Fatal(err)
		}
		got, _, err := s.LoadHost(ctx, "r.test")
		if err != nil {
			t.Fatal(err)
		}
		if !got.NextDeparture.IsZero() || !got.HoldUntil.Equal(t0.Add(time.Minute)) {
			t.Errorf("after a Replace write: next %v hold %v, want zero and t0+1m (no merge)", got.NextDeparture, got.HoldUntil)
		}
		if got.Replace {
			t.Error("Replace was stored")
		}
	})
	t.Run("Deferred", func(t *testing.T) {
		s := newStore(t)
		ctx := context.Background()
		var ids []int64
		for i, host := range []string{"a.test", "b.test", "a.test"} {
			r := ext.DeferredRequest{
				Host: host, Method: http.MethodPost, URL: fmt.Sprintf("http://%s/p/%d", host, i), Depth: i + 1,
				Header: http.Header{"X-Trace": {"t" + fmt.Sprint(i)}}, Body: []byte("form=1"),
				Ctx: map[string]string{"k": "v"}, DeferredAt: t0.Add(time.Duration(i) * time.Second), Reason: "breaker open",
			}
			id, err := s.AddDeferred(ctx, r)
			if err != nil {
				t.Fatal(err)
			}
			ids = append(ids, id)
		}
		all, err := s.ListDeferred(ctx, "", 0)
		if err != nil || len(all) != 3 {
			t.Fatalf("ListDeferred(all) = %d, %v; want 3", len(all), err)
		}
		if all[0].URL != "http://a.test/p/0" || all[2].URL != "http://a.test/p/2" {
			t.Errorf("not oldest first: %v, %v", all[0].URL, all[2].URL)
		}
		r := all[1]
		if r.Method != http.MethodPost || r.Depth != 2 || r.Header.Get("X-Trace") != "t1" || string(r.Body) != "form=1" ||
			r.Ctx["k"] != "v" || !r.DeferredAt.Equal(t0.Add(time.Second)) || r.Reason != "breaker open" || r.ID != ids[1] {
			t.Errorf("deferred request did not round-trip: %+v", r)
		}
		onlyA, _ := s.ListDeferred(ctx, "a.test", 0)
		if len(onlyA) != 2 {
			t.Errorf("ListDeferred(a.test) = %d, want 2", len(onlyA))
		}
		if one, _ := s.ListDeferred(ctx, "", 1); len(one) != 1 {
			t.Errorf("ListDeferred(limit 1) = %d, want 1", len(one))
		}
		if err := s.DeleteDeferred(ctx, []int64{ids[0], ids[2], 424242}); err != nil {
			t.Fatal(err)
		}
		left, _ := s.ListDeferred(ctx, "", 0)
		if len(left) != 1 || left[0].Host != "b.test" {
			t.Errorf("after delete: %v, want only b.test's", left)
		}
	})
	t.Run("Spilled", func(t *testing.T) {
		s := newStore(t)
		ctx := context.Background()
		spill := func(host string, from, n int) {
			t.Helper()
			reqs := make([]ext.DeferredRequest, n)
			for i := range reqs {
				reqs[i] = spilledRequest(host, from+i)
			}
			if err := s.SpillRequests(ctx, host, reqs); err != nil {
				t.Fatal(err)
			}
		}
		spill("a.test", 0, 3)
		spill("b.test", 0, 2)
		spill("a.test", 3, 1)
		if _, err := s.AddDeferred(ctx, ext.DeferredRequest{Host: "a.test", Method: http.MethodGet, URL: "http://a.test/deferred",
			DeferredAt: t0, Reason: "breaker open"}); err != nil {
			t.Fatal(err)
		}
		if err := s.SpillRequests(ctx, "a.test", nil); err != nil {
			t.Errorf("SpillRequests of nothing: %v", err)
		}
		if listed, _ := s.ListDeferred(ctx, "", 0); len(listed) != 1 || listed[0].URL != "http://a.test/deferred" {
			t.Errorf("ListDeferred = %v, want only the deferred request: spilled requests are another kind", listed)
		}
		got, err := s.TakeSpilled(ctx, "a.test", 2)
		if err != nil || len(got) != 2 {
			t.Fatalf("TakeSpilled(a.test, 2) = %d, %v; want 2", len(got), err)
		}
		if want := spilledRequest("a.test", 0); !sameRequest(got[0], want) {
			t.Errorf("spilled request did not round-trip:\n got %+v\nwant %+v", got[0], want)
		}
		if got[1].URL != "http://a.test/s/1" {
			t.Errorf("second taken %s, want /s/1: oldest first", got[1].URL)
		}
		rest, err := s.TakeSpilled(ctx, "a.test", 0)
		if err != nil || len(rest) != 2 || rest[0].URL != "http://a.test/s/2" || rest[1].URL != "http://a.test/s/3" {
			t.Errorf("TakeSpilled(a.test, all) = %v, %v; want /s/2 and /s/3, in that order", urls(rest), err)
		}
		if again, err := s.TakeSpilled(ctx, "a.test", 5); err != nil || len(again) != 0 {
			t.Errorf("TakeSpilled after all were taken = %v, %v; want none", urls(again), err)
		}
		if b, err := s.TakeSpilled(ctx, "b.test", 10); err != nil || len(b) != 2 || b[0].Host != "b.test" {
			t.Errorf("TakeSpilled(b.test) = %v, %v; want its 2", urls(b), err)
		}
		if listed, _ := s.ListDeferred(ctx, "a.test", 0); len(listed) != 1 {
			t.Errorf("taking spilled requests took %d deferred ones", 1-len(listed))
		}
		if none, err := s.TakeSpilled(ctx, "nowhere.test", 1); err != nil || len(none) != 0 {
			t.Errorf("TakeSpilled of a host never spilled = %v, %v", urls(none), err)
		}
	})
	t.Run("SpilledTakesAreAtomic", func(t *testing.T) {
		s := newStore(t)
		ctx := context.Background()
		const n = 60
		for i := range n { // one at a time, as a Queue spills them
			if err := s.SpillRequests(ctx, "t.test", []ext.DeferredRequest{spilledRequest("t.test", i)}); err != nil {
				t.Fatal(err)
			}
		}
		var mu sync.Mutex
		seen := map[string]int{}
		var wg sync.WaitGroup
		for range 6 {
			wg.Go(func() {
				for {
					got, err := s.TakeSpilled(ctx, "t.test", 4)
					if err != nil {
						t.Error(err)
						return
					}
					if len(got) == 0 {
						return
					}
					mu.Lock()
					for i, r := range got {
						seen[r.URL]++
						if i > 0 && r.DeferredAt.Before(got[i-1].DeferredAt) {
							t.Errorf("a take is not oldest first: %s after %s", r.URL, got[i-1].URL)
						}
					}
					mu.Unlock()
				}
			})
		}
		wg.Wait()
		if len(seen) != n {
			t.Errorf("%d distinct requests taken, want %d", len(seen), n)
		}
		for u, k := range seen {
			if k != 1 {
				t.Errorf("%s taken %d times", u, k)
			}
		}
	})
	t.Run("ConcurrentSaves", func(t *testing.T) {
		s := newStore(t)
		var wg sync.WaitGroup
		for i := range 8 {
			wg.Go(func() {
				for j := range 20 {
					st := Sample(fmt.Sprintf("c%d.test", j%4))
					st.AdaptiveDelay = time.Duration(i+1) * time.Second
					if err := s.SaveHosts(context.Background(), []ext.StoredHost{st}); err != nil {
						t.Error(err)
						return
					}
				}
			})
		}
		wg.Wait()
		for j := range 4 {
			if _, ok, err := s.LoadHost(context.Background(), fmt.Sprintf("c%d.test", j)); !ok || err != nil {
				t.Errorf("c%d.test: ok %v err %v", j, ok, err)
			}
		}
	})
}

// RunShared runs the SharedStore conformance tests. The store decides on its own clock, so waits are
// checked within a second of what they must be; order and exclusivity exactly.
func RunShared(t *testing.T, newStore func(t *testing.T) ext.SharedStore) {
	ctx := context.Background()
	admit := func(t *testing.T, s ext.SharedStore, host string, gap time.Duration) (time.Duration, bool) {
		t.Helper()
		a, err := s.Admit(ctx, host, gap)
		if err != nil {
			t.Fatal(err)
		}
		return a.Wait, a.OK
	}
	near := func(got, want time.Duration) bool { return got <= want && got > want-time.Second }
	t.Run("AdmitSpacesDepartures", func(t *testing.T) {
		s := newStore(t)
		if _, ok := admit(t, s, "r.test", time.Hour); !ok {
			t.Fatal("first departure to a new host not admitted")
		}
		if wait, ok := admit(t, s, "r.test", time.Hour); ok || !near(wait, time.Hour) {
			t.Errorf("second departure at once: ok %v, wait %v; want a wait of just under an hour", ok, wait)
		}
		if _, ok := admit(t, s, "other.test", time.Hour); !ok {
			t.Error("another host is not admitted: hosts share a schedule")
		}
	})
	t.Run("RefusedAdmissionRecordsNothing", func(t *testing.T) {
		s := newStore(t)
		admit(t, s, "n.test", time.Hour)
		first, _ := admit(t, s, "n.test", time.Hour)
		for range 5 { // waiters that then give up, or crash: nothing of them may remain
			admit(t, s, "n.test", time.Hour)
		}
		if wait, _ := admit(t, s, "n.test", time.Hour); wait > first {
			t.Errorf("wait grew from %v to %v after refused admissions: they booked something", first, wait)
		}
		if _, ok, err := s.LoadHost(ctx, "n.test"); ok || err != nil {
			t.Errorf("a host only ever admitted has saved state: ok %v, err %v", ok, err)
		}
	})
	t.Run("AdmitHonoursHold", func(t *testing.T) {
		s := newStore(t)
		st := Sample("h.test")
		st.NextDeparture, st.HoldUntil, st.AdaptiveDelay = time.Time{}, time.Now().Add(30*time.Second), 0
		if err := s.SaveHosts(ctx, []ext.StoredHost{st}); err != nil {
			t.Fatal(err)
		}
		if wait, ok := admit(t, s, "h.test", time.Second); ok || !near(wait, 30*time.Second) {
			t.Errorf("admission during a 30s hold: ok %v, wait %v", ok, wait)
		}
		st.HoldUntil = time.Now().Add(5 * time.Second) // a shorter hold does not shorten the stored one
		if err := s.SaveHosts(ctx, []ext.StoredHost{st}); err != nil {
			t.Fatal(err)
		}
		if wait, _ := admit(t, s, "h.test", time.Second); !near(wait, 30*time.Second) {
			t.Errorf("after saving a shorter hold the wait is %v, want the 30s hold kept", wait)
		}
	})
	t.Run("AdmitUsesStoredAdaptiveDelay", func(t *testing.T) {
		s := newStore(t)
		st := Sample("d.test")
		st.NextDeparture, st.HoldUntil, st.AdaptiveDelay = time.Time{}, time.Time{}, time.Hour
		if err := s.SaveHosts(ctx, []ext.StoredHost{st}); err != nil {
			t.Fatal(err)
		}
		admit(t, s, "d.test", time.Second)
		if wait, ok := admit(t, s, "d.test", time.Second); ok || !near(wait, time.Hour) {
			t.Errorf("second departure: ok %v, wait %v; want the stored adaptive delay of an hour", ok, wait)
		}
	})
	t.Run("AdmitReturnsFleetDelays", func(t *testing.T) {
		s := newStore(t)
		if a, err := s.Admit(ctx, "f.test", time.Second); err != nil || a.AdaptiveDelay != 0 || a.KnownLimit != 0 {
			t.Errorf("new host: %+v, %v; want no stored delays", a, err)
		}
		st := Sample("f.test")
		if err := s.SaveHosts(ctx, []ext.StoredHost{st}); err != nil {
			t.Fatal(err)
		}
		if a, err := s.Admit(ctx, "f.test", time.Second); err != nil || a.AdaptiveDelay != st.AdaptiveDelay || a.KnownLimit != st.KnownLimit {
			t.Errorf("saved host: %+v, %v; want the stored %v and %v", a, err, st.AdaptiveDelay, st.KnownLimit)
		}
	})
	t.Run("AdmitNumbersDepartures", func(t *testing.T) {
		// Issue 32: a fleet member judges spacing by the fleet's departures, and knows when the one
		// before its own was refused (a limiter counts from the last request it accepted).
		s := newStore(t)
		first, err := s.Admit(ctx, "q.test", 0)
		if err != nil || !first.OK || first.Seq == 0 || first.Since != 0 || first.RefusedSeq != 0 {
			t.Fatalf("first departure: %+v, %v; want admitted, numbered, no previous one, none refused", first, err)
		}
		time.Sleep(20 * time.Millisecond)
		second, err := s.Admit(ctx, "q.test", 0)
		if err != nil || !second.OK || second.Seq != first.Seq+1 || second.Since < 20*time.Millisecond || second.Since > time.Second {
			t.Fatalf("second departure 20ms later: %+v, %v; want number %d, about 20ms since the first", second, err, first.Seq+1)
		}
		if err := s.Refused(ctx, "q.test", second.Seq); err != nil {
			t.Fatal(err)
		}
		if err := s.Refused(ctx, "q.test", first.Seq); err != nil { // an older refusal reported late
			t.Fatal(err)
		}
		third, err := s.Admit(ctx, "q.test", 0)
		if err != nil || !third.OK || third.RefusedSeq != second.Seq {
			t.Errorf("after the second was refused: %+v, %v; want RefusedSeq %d", third, err, second.Seq)
		}
	})
	t.Run("PoolCountsRefusalsEachSideOfABackoff", func(t *testing.T) {
		// Issue 32: a fleet reads noise from the refusals it pooled at two paces, never from a member's
		// third of them. The pacer finds the two methods on the store; no user calls them.
		s := newStore(t)
		pool, ok := s.(interface {
			PoolRefused(ctx context.Context, host string, seq uint64) error
			PoolBackoff(ctx context.Context, host string, paced bool) error
		})
		if !ok {
			t.Skip("the store does not pool refusals: a fleet on it reads no noise")
		}
		type count struct {
			mark                                       uint64
			before, beforeRefused, after, afterRefused uint64
		}
		countOf := func(a ext.Admission) count {
			c := count{mark: a.PoolMark, before: uint64(a.PoolBefore), beforeRefused: uint64(a.PoolBeforeRefused), afterRefused: uint64(a.PoolAfterRefused)}
			if a.PoolMark > 0 {
				c.after = a.Seq - a.PoolMark
			}
			return c
		}
		depart := func(n int) (last ext.Admission) {
			t.Helper()
			for range n {
				a, err := s.Admit(ctx, "p.test", 0)
				if err != nil || !a.OK {
					t.Fatalf("admit: %+v, %v", a, err)
				}
				last = a
			}
			return last
		}
		if a := depart(1); countOf(a) != (count{}) {
			t.Fatalf("before any backoff: %+v, want no count", countOf(a))
		}
		a := depart(5) // departures 2-6: 2 and 5 refused, then the pace backs off
		for _, seq := range []uint64{a.Seq - 4, a.Seq - 1} {
			if err := pool.PoolRefused(ctx, "p.test", seq); err != nil {
				t.Fatal(err)
			}
		}
		if err := pool.PoolBackoff(ctx, "p.test", false); err != nil {
			t.Fatal(err)
		}
		mark := a.Seq
		depart(4) // 7-10: 8 refused, and 6, before the backoff, reported late
		for _, seq := range []uint64{mark + 2, mark} {
			if err := pool.PoolRefused(ctx, "p.test", seq); err != nil {
				t.Fatal(err)
			}
		}
		if err := s.Refused(ctx, "p.test", mark+3); err != nil { // a robots.txt read: not counted
			t.Fatal(err)
		}
		want := count{mark: mark, before: 6, beforeRefused: 3, after: 5, afterRefused: 1}
		if got := countOf(depart(1)); got != want {
			t.Fatalf("after a backoff at departure %d: %+v, want %+v", mark, got, want)
		}
		if err := pool.PoolBackoff(ctx, "p.test", false); err != nil { // unpaced: the pace just left is the one before
			t.Fatal(err)
		}
		want = count{mark: mark + 5, before: 5, beforeRefused: 1, after: 1}
		if got := countOf(depart(1)); got != want {
			t.Errorf("after a second backoff: %+v, want %+v", got, want)
		}
		if err := pool.PoolBackoff(ctx, "p.test", true); err != nil { // paced: the paces add up
			t.Fatal(err)
		}
		want = count{mark: mark + 6, before: 6, beforeRefused: 1, after: 1}
		if got := countOf(depart(1)); got != want {
			t.Errorf("after a backoff for a Retry-After: %+v, want %+v", got, want)
		}
	})
	t.Run("ConcurrentAdmissionsAdmitOne", func(t *testing.T) {
		s := newStore(t)
		var admitted atomic.Int32
		var wg sync.WaitGroup
		for range 8 {
			wg.Go(func() {
				a, err := s.Admit(ctx, "c.test", time.Hour)
				if err != nil {
					t.Error(err)
				}
				if a.OK {
					admitted.Add(1)
				}
			})
		}
		wg.Wait()
		if n := admitted.Load(); n != 1 {
			t.Errorf("%d of 8 simultaneous departures admitted, want 1", n)
		}
	})
}

// spilledRequest returns the i-th request spilled for host, with every field a spilled request keeps.
func spilledRequest(host string, i int) ext.DeferredRequest {
	return ext.DeferredRequest{
		Host: host, Method: http.MethodPut, URL: fmt.Sprintf("http://%s/s/%d", host, i), Depth: i + 2,
		Header: http.Header{"X-Trace": {"s" + fmt.Sprint(i)}}, Body: []byte("b=" + fmt.Sprint(i)), BodyLost: i%2 == 1,
		Ctx: map[string]string{"k": fmt.Sprint(i)}, DeferredAt: t0.Add(time.Duration(i) * time.Second),
	}
}

// sameRequest reports whether a spilled request came back as it was written (its ID is not kept).
func sameRequest(got, want ext.DeferredRequest) bool {
	return got.ID == 0 && got.Host == want.Host && got.Method == want.Method && got.URL == want.URL && got.Depth == want.Depth &&
		reflect.DeepEqual(got.Header, want.Header) && bytes.Equal(got.Body, want.Body) && got.BodyLost == want.BodyLost &&
		reflect.DeepEqual(got.Ctx, want.Ctx) && got.DeferredAt.Equal(want.DeferredAt) && got.Reason == ""
}

func urls(rs []ext.DeferredRequest) []string {
	out := make([]string, len(rs))
	for i, r := range rs {
		out[i] = r.URL
	}
	return out
}

// Sample returns a StoredHost with every field set, for round trips.
func Sample(host string) ext.StoredHost {
	return ext.StoredHost{
		Host: host, Version: ext.StateVersion,
		AdaptiveDelay: 2500 * time.Millisecond, KnownLimit: 1200 * time.Millisecond,
		RefusedInterval: 900 * time.Millisecond, ModelVersion: 42, Noise: audit.NoiseSeen,
		NextDeparture: t0.Add(3 * time.Second), HoldUntil: t0.Add(45 * time.Second), HoldTrigger: audit.TriggerRetryAfter,
		CrawlDelay: 2 * time.Second, CrawlClamped: true,
		Breaker: audit.BreakerOpen, BreakerChanged: t0.Add(-time.Minute), Failures: 7, ParkUntil: t0.Add(2 * time.Hour), UpdatedAt: t0,
	}
}

// Diff describes how got differs from want, or returns "".
func Diff(got, want ext.StoredHost) string {
	eqTime := func(a, b time.Time) bool { return a.Equal(b) }
	switch {
	case got.Host != want.Host, got.Version != want.Version:
		return fmt.Sprintf("host/version %s/%d, want %s/%d", got.Host, got.Version, want.Host, want.Version)
	case got.RefusedInterval != want.RefusedInterval, got.ModelVersion != want.ModelVersion, got.Noise != want.Noise:
		return fmt.Sprintf("model refused %v version %d noise %d, want %v version %d noise %d", got.RefusedInterval, got.ModelVersion, got.Noise,
			want.RefusedInterval, want.ModelVersion, want.Noise)
	case got.AdaptiveDelay != want.AdaptiveDelay, got.KnownLimit != want.KnownLimit, got.CrawlDelay != want.CrawlDelay:
		return fmt.Sprintf("delays %v/%v/%v, want %v/%v/%v", got.AdaptiveDelay, got.KnownLimit, got.CrawlDelay, want.AdaptiveDelay, want.KnownLimit, want.CrawlDelay)
	case !eqTime(got.NextDeparture, want.NextDeparture), !eqTime(got.HoldUntil, want.HoldUntil), got.HoldTrigger != want.HoldTrigger:
		return fmt.Sprintf("schedule %v/%v/%s, want %v/%v/%s", got.NextDeparture, got.HoldUntil, got.HoldTrigger, want.NextDeparture, want.HoldUntil, want.HoldTrigger)
	case got.CrawlClamped != want.CrawlClamped, got.Breaker != want.Breaker, !eqTime(got.BreakerChanged, want.BreakerChanged), got.Failures != want.Failures:
		return fmt.Sprintf("breaker %v/%v/%d clamped %v, want %v/%v/%d clamped %v", got.Breaker, got.BreakerChanged, got.Failures, got.CrawlClamped, want.Breaker, want.BreakerChanged, want.Failures, want.CrawlClamped)
	case !eqTime(got.ParkUntil, want.ParkUntil), got.RateInterval != want.RateInterval, !eqTime(got.RateUntil, want.RateUntil):
		return fmt.Sprintf("park %v, rate %v until %v; want %v, %v until %v", got.ParkUntil, got.RateInterval, got.RateUntil, want.ParkUntil, want.RateInterval, want.RateUntil)
	case !eqTime(got.UpdatedAt, want.UpdatedAt):
		return fmt.Sprintf("updated %v, want %v", got.UpdatedAt, want.UpdatedAt)
	}
	return ""
}

// IsCorrupt reports whether err says a stored row could not be decoded.
func IsCorrupt(err error) bool { return errors.Is(err, ext.ErrCorruptState) }

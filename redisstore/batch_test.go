package redisstore_test

import (
	"context"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/collypace/ext"
	"github.com/collypace/ext/redisstore"
	"github.com/collypace/ext/redisstore/internal/redistest"
	"github.com/redis/go-redis/v9"
)

// tripCounter counts a client's round trips: a command alone, or a pipeline.
type tripCounter struct{ n atomic.Int64 }

func (tc *tripCounter) DialHook(next redis.DialHook) redis.DialHook { return next }
func (tc *tripCounter) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		tc.n.Add(1)
		return next(ctx, cmd)
	}
}
func (tc *tripCounter) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		tc.n.Add(1)
		return next(ctx, cmds)
	}
}

// batchFixture is a Store on a client of its own whose round trips are counted, holding the lease of
// a.test with two requests taken (IDs in taken), and a client to look at the server with.
type batchFixture struct {
	srv    *redistest.Server
	st     *redisstore.Store
	trips  *tripCounter
	look   *redis.Client
	prefix string
	lease  ext.Lease
	taken  []int64
}

func newBatchFixture(t *testing.T, linger time.Duration) *batchFixture {
	t.Helper()
	srv := redistest.Start(t)
	f := &batchFixture{srv: srv, trips: &tripCounter{}, look: srv.Client(), prefix: newPrefix()}
	c := srv.Client()
	c.AddHook(f.trips)
	f.st = redisstore.New(c, redisstore.WithPrefix(f.prefix))
	t.Cleanup(func() { _ = f.st.Close() })
	redisstore.SetLinger(f.st, linger)
	reqs, keys := frontierReqs("a.test", "/0", "/1", "/2")
	if _, err := f.st.FrontierAdd(ctx, "a.test", reqs, keys, false); err != nil {
		t.Fatal(err)
	}
	leases, _, _, _, err := f.st.FrontierLease(ctx, "me", 1, nil)
	if err != nil || len(leases) != 1 {
		t.Fatalf("lease = %v, %v", leases, err)
	}
	f.lease = leases[0]
	got, held, err := f.st.FrontierTake(ctx, "me", "a.test", 2)
	if err != nil || !held || len(got) != 2 {
		t.Fatalf("take = %v, %v, %v", got, held, err)
	}
	for _, r := range got {
		f.taken = append(f.taken, r.ID)
	}
	// The scripts' first runs on a new server load them (NOSCRIPT, then EVAL): not what is counted.
	if err := f.st.FrontierDone(ctx, "a.test", []int64{-1}); err != nil {
		t.Fatal(err)
	}
	if err := f.st.FrontierRelease(ctx, "nobody", "a.test", 0); err != nil {
		t.Fatal(err)
	}
	return f
}

// isDone reports whether the server no longer holds request id of a.test as handed out.
func (f *batchFixture) isDone(t *testing.T, id int64) bool {
	t.Helper()
	base := redisstore.FrontierBase(f.st, 0)
	in, err := f.look.HExists(ctx, base+"taken:a.test", strconv.FormatInt(id, 10)).Result()
	if err != nil {
		t.Fatal(err)
	}
	return !in
}

// count is the frontier's count of requests queued or handed out, on the server.
func (f *batchFixture) count(t *testing.T) int {
	t.Helper()
	n, err := f.look.Get(ctx, redisstore.FrontierBase(f.st, 0)+"n").Int()
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// pending reports whether the server holds a pending departure of a.test, and whose.
func (f *batchFixture) pending(t *testing.T) (bool, string) {
	t.Helper()
	v, err := f.look.HMGet(ctx, f.prefix+"host:a.test", "pending", "pending_by").Result()
	if err != nil {
		t.Fatal(err)
	}
	by, _ := v[1].(string)
	return v[0] != nil, by
}

// admit admits a departure to a.test under the fixture's lease.
func (f *batchFixture) admit(t *testing.T) {
	t.Helper()
	if a, err := f.st.FrontierAdmit(ctx, f.lease, 0); err != nil || !a.OK {
		t.Fatalf("admission = %+v, %v", a, err)
	}
}

// doneAndDeparted marks requests ids of a.test done and ends its pending departure: two buffered writes.
func (f *batchFixture) doneAndDeparted(t *testing.T, ids []int64) {
	t.Helper()
	if err := f.st.FrontierDone(ctx, "a.test", ids); err != nil {
		t.Fatal(err)
	}
	if err := f.st.DepartedAtAdmission(ctx, "a.test"); err != nil {
		t.Fatal(err)
	}
}

// A request marked done and a pending departure ended go with the Store's next command, in its round
// trip: the done and the departure's end, then the next admission of the host, are one round trip,
// and the admission's new pending departure stays (the HDEL went before it).
func TestBatchRidesTheNextAdmission(t *testing.T) {
	f := newBatchFixture(t, time.Hour)
	f.admit(t)
	before := f.trips.n.Load()
	f.doneAndDeparted(t, f.taken[:1])
	if a, err := f.st.FrontierAdmit(ctx, f.lease, 0); err != nil || !a.OK {
		t.Fatalf("second admission = %+v, %v", a, err)
	}
	if n := f.trips.n.Load() - before; n != 1 {
		t.Errorf("a done, a departure's end and an admission took %d round trips, want 1", n)
	}
	if !f.isDone(t, f.taken[0]) || f.isDone(t, f.taken[1]) {
		t.Errorf("after the admission: request %d done %v (want true), %d done %v (want false)",
			f.taken[0], f.isDone(t, f.taken[0]), f.taken[1], f.isDone(t, f.taken[1]))
	}
	if n := f.count(t); n != 2 {
		t.Errorf("frontier count %d after one of three done, want 2", n)
	}
	if p, by := f.pending(t); !p || by == "" {
		t.Errorf("pending %v by %q after the second admission: want its pending departure kept (the HDEL sent before it)", p, by)
	}
}

// With nothing else to carry them, buffered writes go by themselves after the linger, together in
// one round trip.
func TestBatchLingerFlushes(t *testing.T) {
	f := newBatchFixture(t, 0) // the default linger
	f.admit(t)
	before := f.trips.n.Load()
	f.doneAndDeparted(t, f.taken)
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		p, _ := f.pending(t)
		if f.isDone(t, f.taken[0]) && f.isDone(t, f.taken[1]) && !p {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("5 s after the writes: done %v %v, pending %v; want them sent after the linger",
				f.isDone(t, f.taken[0]), f.isDone(t, f.taken[1]), p)
		}
	}
	if n := f.trips.n.Load() - before; n != 1 {
		t.Errorf("the linger's flush of a done and a departure's end took %d round trips, want 1", n)
	}
	if n := f.count(t); n != 1 {
		t.Errorf("frontier count %d after two of three done, want 1", n)
	}
}

// Close sends what is buffered.
func TestBatchCloseFlushes(t *testing.T) {
	f := newBatchFixture(t, time.Hour)
	f.admit(t)
	before := f.trips.n.Load()
	f.doneAndDeparted(t, f.taken[:1])
	if n := f.trips.n.Load() - before; n != 0 {
		t.Errorf("a done and a departure's end took %d round trips before the linger, want 0 (buffered)", n)
	}
	if err := f.st.Close(); err != nil {
		t.Fatal(err)
	}
	if !f.isDone(t, f.taken[0]) {
		t.Error("the done buffered was not sent by Close")
	}
	if p, _ := f.pending(t); p {
		t.Error("the departure's end buffered was not sent by Close")
	}
}

// A flush that fails (the server is down) keeps what it carried, says so at the next write, and the
// next flush, once the server is back, delivers it.
func TestBatchFailedFlushKeepsIDs(t *testing.T) {
	f := newBatchFixture(t, time.Hour)
	base := redisstore.FrontierBase(f.st, 0)
	f.srv.Stop()
	if err := f.st.FrontierDone(ctx, "a.test", f.taken[:1]); err != nil {
		t.Fatalf("a done buffered while the server is down: %v, want nil (nothing sent yet)", err)
	}
	if err := redisstore.Flush(f.st); err == nil {
		t.Fatal("a flush with the server down succeeded")
	}
	if err := f.st.FrontierDone(ctx, "a.test", f.taken[1:]); err == nil {
		t.Error("the write after a failed flush returned nil, want the flush's error")
	}
	// The server comes back empty: put back the requests as handed out, for the done to remove.
	f.srv.Restart()
	for _, id := range f.taken {
		f.look.HSet(ctx, base+"taken:a.test", strconv.FormatInt(id, 10), "{}")
	}
	f.look.Set(ctx, base+"n", 3, 0)
	if err := redisstore.Flush(f.st); err != nil {
		t.Fatalf("flush with the server back: %v", err)
	}
	for _, id := range f.taken {
		if !f.isDone(t, id) {
			t.Errorf("request %d, done while the server was down, not delivered by the next flush", id)
		}
	}
	if n := f.count(t); n != 1 {
		t.Errorf("frontier count %d, want 1", n)
	}
	if err := f.st.FrontierDone(ctx, "a.test", []int64{99}); err != nil {
		t.Errorf("a write after a flush that succeeded: %v, want nil", err)
	}
}

// A release after a done sends the done first, in the same round trip: the next holder is not handed
// the request again.
func TestBatchReleaseAfterDone(t *testing.T) {
	f := newBatchFixture(t, time.Hour)
	before := f.trips.n.Load()
	if err := f.st.FrontierDone(ctx, "a.test", f.taken[:1]); err != nil {
		t.Fatal(err)
	}
	if err := f.st.FrontierRelease(ctx, "me", "a.test", 0); err != nil {
		t.Fatal(err)
	}
	if n := f.trips.n.Load() - before; n != 1 {
		t.Errorf("a done and a release took %d round trips, want 1", n)
	}
	other := redisstore.New(f.look, redisstore.WithPrefix(f.prefix))
	defer other.Close()
	if leases, _, _, _, err := other.FrontierLease(ctx, "other", 1, nil); err != nil || len(leases) != 1 {
		t.Fatalf("lease by the next holder = %v, %v", leases, err)
	}
	got, _, err := other.FrontierTake(ctx, "other", "a.test", 10)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range got {
		if r.ID == f.taken[0] {
			t.Errorf("request %d, done before the release, handed out again", r.ID)
		}
	}
	if len(got) != 2 {
		t.Errorf("the next holder took %d requests, want 2 (the one released unsent and the one never taken)", len(got))
	}
}

// A Store's commands run concurrently, each carrying what the others buffered: a flush under way is
// waited for, so a host's buffered departure's end never reaches the server after the Store's next
// admission of the host (it would end that admission's pending departure). The ends cost no round
// trip of their own.
func TestBatchConcurrentOrder(t *testing.T) {
	srv := redistest.Start(t)
	prefix := newPrefix()
	c, look, trips := srv.Client(), srv.Client(), &tripCounter{}
	c.AddHook(trips)
	st := redisstore.New(c, redisstore.WithPrefix(prefix), redisstore.WithLeaseTTL(time.Minute)) // the leases outlast the test
	defer st.Close()
	redisstore.SetLinger(st, time.Hour)
	const workers, rounds = 16, 300
	lease := map[string]ext.Lease{}
	for w := range workers {
		host := fmt.Sprintf("h%d.test", w)
		reqs, keys := frontierReqs(host, "/0")
		if _, err := st.FrontierAdd(ctx, host, reqs, keys, false); err != nil {
			t.Fatal(err)
		}
	}
	leases, _, _, _, err := st.FrontierLease(ctx, "me", workers, nil)
	if err != nil || len(leases) != workers {
		t.Fatalf("leases = %v, %v; want %d", leases, err, workers)
	}
	for _, l := range leases {
		lease[l.Host] = l
	}
	before := trips.n.Load()
	var wg sync.WaitGroup
	var lost atomic.Int64
	for w := range workers {
		wg.Go(func() {
			host := fmt.Sprintf("h%d.test", w)
			for range rounds {
				if a, err := st.FrontierAdmit(ctx, lease[host], 0); err != nil || !a.OK {
					t.Errorf("admission of %s = %+v, %v", host, a, err)
					return
				}
				if err := st.DepartedAtAdmission(ctx, host); err != nil {
					t.Error(err)
					return
				}
				if a, err := st.FrontierAdmit(ctx, lease[host], 0); err != nil || !a.OK {
					t.Errorf("admission of %s = %+v, %v", host, a, err)
					return
				}
				if err := redisstore.Flush(st); err != nil {
					t.Error(err)
					return
				}
				if !look.HExists(ctx, prefix+"host:"+host, "pending").Val() {
					lost.Add(1)
				}
				if err := st.DepartedAtAdmission(ctx, host); err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	if n, most := trips.n.Load()-before, int64(3*workers*rounds+workers); n > most { // 2 admissions and a flush a round (the first runs' NOSCRIPT aside)
		t.Errorf("%d round trips for %d rounds of 2 admissions, 2 departures' ends and a flush: want at most %d", n, workers*rounds, most)
	}
	if n := lost.Load(); n > 0 {
		t.Errorf("%d of %d admissions lost their pending departure to an earlier departure's end sent after them", n, workers*rounds)
	}
}

// A departure admitted without a lease (Admit: processes pacing a host together through the store)
// ends its pending departure at once, in its own round trip, not a linger later: another process
// waits for it, and a fast host shared by several would be held to a departure a linger.
func TestUnleasedDepartureEndsItsPendingAtOnce(t *testing.T) {
	f := newBatchFixture(t, time.Hour)
	if a, err := f.st.Admit(ctx, "a.test", 0); err != nil || !a.OK {
		t.Fatalf("admission = %+v, %v", a, err)
	}
	if held, _ := f.pending(t); !held {
		t.Fatal("no pending departure after the admission")
	}
	before := f.trips.n.Load()
	if err := f.st.DepartedAtAdmission(ctx, "a.test"); err != nil {
		t.Fatal(err)
	}
	if n := f.trips.n.Load() - before; n != 1 {
		t.Errorf("the end of an unleased departure took %d round trips, want 1 (at once)", n)
	}
	if held, by := f.pending(t); held {
		t.Errorf("the unleased departure is still pending (by %q) after DepartedAtAdmission", by)
	}
}

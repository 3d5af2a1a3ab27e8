package redisstore_test

import (
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/collypace/ext"
	"github.com/collypace/ext/redisstore"
	"github.com/collypace/ext/redisstore/internal/redistest"
)

// The frontier's store side, against a real redis-server: deduplication, leases (one owner under
// contention, expiry and takeover), and what a take hands out.

func frontierReqs(host string, paths ...string) ([]ext.DeferredRequest, []string) {
	var reqs []ext.DeferredRequest
	var keys []string
	for _, p := range paths {
		u := "http://" + host + p
		reqs = append(reqs, ext.DeferredRequest{Method: http.MethodGet, URL: u, Depth: 1})
		keys = append(keys, u)
	}
	return reqs, keys
}

// Two processes adding the same URL queue it once; a retry (force) queues it again; the count says so.
func TestFrontierAddDeduplicates(t *testing.T) {
	srv := redistest.Start(t)
	prefix := newPrefix()
	a := redisstore.New(srv.Client(), redisstore.WithPrefix(prefix))
	b := redisstore.New(srv.Client(), redisstore.WithPrefix(prefix))
	reqs, keys := frontierReqs("a.test", "/0", "/1")
	if n, err := a.FrontierAdd(ctx, "a.test", reqs, keys, false); n != 2 || err != nil {
		t.Fatalf("first add = %d, %v; want 2", n, err)
	}
	if n, err := b.FrontierAdd(ctx, "a.test", reqs, keys, false); n != 0 || err != nil {
		t.Fatalf("the same URLs from another process = %d, %v; want 0", n, err)
	}
	if n, err := b.FrontierAdd(ctx, "a.test", reqs[:1], keys[:1], true); n != 1 || err != nil {
		t.Fatalf("a forced retry = %d, %v; want 1", n, err)
	}
	if n, err := a.FrontierSize(ctx); n != 3 || err != nil {
		t.Fatalf("FrontierSize = %d, %v; want 3", n, err)
	}
	if _, err := a.FrontierAdd(ctx, "a.test", reqs, keys[:1], false); err == nil {
		t.Error("FrontierAdd with fewer keys than requests: no error")
	}
}

// Many owners leasing at once: each host is leased by exactly one of them, and the requests taken,
// all of them, once each.
func TestFrontierOneOwnerPerHostUnderContention(t *testing.T) {
	srv := redistest.Start(t)
	prefix := newPrefix()
	const hosts, pages, owners = 40, 3, 8
	seed := redisstore.New(srv.Client(), redisstore.WithPrefix(prefix), redisstore.WithFrontierShards(4))
	var want []string
	for h := range hosts {
		host := fmt.Sprintf("h%02d.test", h)
		var paths []string
		for p := range pages {
			paths = append(paths, fmt.Sprintf("/%d", p))
		}
		reqs, keys := frontierReqs(host, paths...)
		if _, err := seed.FrontierAdd(ctx, host, reqs, keys, false); err != nil {
			t.Fatal(err)
		}
		want = append(want, keys...)
	}
	var mu sync.Mutex
	leasedBy := map[string][]string{}
	var taken []string
	var wg sync.WaitGroup
	for o := range owners {
		st := redisstore.New(srv.Client(), redisstore.WithPrefix(prefix), redisstore.WithFrontierShards(4))
		owner := fmt.Sprintf("owner%d", o)
		wg.Go(func() {
			for {
				got, left, _, err := leaseOf(st, owner, 2)
				if err != nil {
					t.Error(err)
					return
				}
				if len(got) == 0 && left == 0 {
					return
				}
				for _, host := range got {
					mu.Lock()
					leasedBy[host] = append(leasedBy[host], owner)
					mu.Unlock()
					for {
						reqs, held, err := st.FrontierTake(ctx, owner, host, 2)
						if err != nil {
							t.Error(err)
							return
						}
						var ids []int64
						for _, r := range reqs {
							ids = append(ids, r.ID)
						}
						mu.Lock()
						taken = append(taken, urlsOf(reqs)...)
						mu.Unlock()
						if err := st.FrontierDone(ctx, host, ids); err != nil {
							t.Error(err)
						}
						if !held {
							break
						}
					}
				}
				if len(got) == 0 {
					time.Sleep(time.Millisecond)
				}
			}
		})
	}
	wg.Wait()
	for host, by := range leasedBy {
		if len(by) != 1 {
			t.Errorf("%s leased by %v: want one owner", host, by)
		}
	}
	if len(leasedBy) != hosts {
		t.Errorf("%d hosts leased, want %d", len(leasedBy), hosts)
	}
	slices.Sort(taken)
	slices.Sort(want)
	if !slices.Equal(taken, want) {
		t.Errorf("taken %d requests (%v…), want each of the %d once", len(taken), taken[:min(len(taken), 5)], len(want))
	}
	if n, err := seed.FrontierSize(ctx); n != 0 || err != nil {
		t.Errorf("FrontierSize after every request done = %d, %v; want 0", n, err)
	}
}

// A lease that runs out unrenewed (its process died) passes to another owner, who is handed first the
// requests the dead owner took and did not finish, marked as handed out again; before it runs out,
// nobody else gets the host, and the owner's renewals keep it.
func TestFrontierLeaseExpiryAndTakeover(t *testing.T) {
	srv := redistest.Start(t)
	prefix := newPrefix()
	ttl := 500 * time.Millisecond
	dead := redisstore.New(srv.Client(), redisstore.WithPrefix(prefix), redisstore.WithLeaseTTL(ttl))
	next := redisstore.New(srv.Client(), redisstore.WithPrefix(prefix), redisstore.WithLeaseTTL(ttl))
	reqs, keys := frontierReqs("a.test", "/0", "/1", "/2", "/3")
	if _, err := dead.FrontierAdd(ctx, "a.test", reqs, keys, false); err != nil {
		t.Fatal(err)
	}
	if got, _, _, err := leaseOf(dead, "dead", 1); err != nil || !slices.Equal(got, []string{"a.test"}) {
		t.Fatalf("lease = %v, %v", got, err)
	}
	first, held, err := dead.FrontierTake(ctx, "dead", "a.test", 2)
	if err != nil || !held || !slices.Equal(urlsOf(first), keys[:2]) {
		t.Fatalf("take = %v, %v, %v; want /0 and /1", urlsOf(first), held, err)
	}
	if err := dead.FrontierDone(ctx, "a.test", []int64{first[0].ID}); err != nil { // /0 was sent; /1 was in flight
		t.Fatal(err)
	}
	if err := redisstore.Flush(dead); err != nil { // written behind: its linger or its next command sends it
		t.Fatal(err)
	}
	if got, left, _, err := leaseOf(next, "next", 1); err != nil || len(got) != 0 || left != 3 {
		t.Fatalf("lease while the first owner holds it = %v (left %d), %v; want none, 3 left", got, left, err)
	}
	if _, held, _ := next.FrontierTake(ctx, "next", "a.test", 5); held {
		t.Fatal("a take by a process that does not hold the lease succeeded")
	}
	if lost, _, _, err := dead.FrontierRenew(ctx, "dead", []string{"a.test"}); err != nil || len(lost) != 0 {
		t.Fatalf("renewal by the owner = lost %v, %v", lost, err)
	}
	// The owner dies: no more renewals. The lease runs out on the server's clock.
	var got []string
	for deadline := time.Now().Add(10 * time.Second); len(got) == 0; time.Sleep(50 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the lease never passed to another owner")
		}
		if got, _, _, err = leaseOf(next, "next", 1); err != nil {
			t.Fatal(err)
		}
	}
	if lost, _, _, err := dead.FrontierRenew(ctx, "dead", []string{"a.test"}); err != nil || !slices.Equal(lost, []string{"a.test"}) {
		t.Errorf("renewal by the dead owner after the takeover = lost %v, %v; want a.test lost", lost, err)
	}
	rest, held, err := next.FrontierTake(ctx, "next", "a.test", 10)
	if err != nil || !held || !slices.Equal(urlsOf(rest), keys[1:]) {
		t.Fatalf("take by the next owner = %v, %v, %v; want /1 (again), /2, /3", urlsOf(rest), held, err)
	}
	if rest[0].Reason != "redelivered" || rest[1].Reason != "" {
		t.Errorf("reasons %q, %q: want the request handed out again marked redelivered, the others not", rest[0].Reason, rest[1].Reason)
	}
	if err := next.FrontierDone(ctx, "a.test", []int64{rest[0].ID, rest[1].ID, rest[2].ID, first[1].ID}); err != nil {
		t.Fatal(err)
	}
	if _, held, _ := next.FrontierTake(ctx, "next", "a.test", 10); held {
		t.Error("a host with nothing left stays leased")
	}
	if n, _ := next.FrontierSize(ctx); n != 0 {
		t.Errorf("FrontierSize = %d after all done (one twice), want 0", n)
	}
}

// Released, a lease's unsent requests go back to the head of the queue, not marked, and the host is
// due again after the given time.
func TestFrontierRelease(t *testing.T) {
	srv := redistest.Start(t)
	prefix := newPrefix()
	st := redisstore.New(srv.Client(), redisstore.WithPrefix(prefix))
	reqs, keys := frontierReqs("a.test", "/0", "/1", "/2")
	if _, err := st.FrontierAdd(ctx, "a.test", reqs, keys, false); err != nil {
		t.Fatal(err)
	}
	if got, _, _, _ := leaseOf(st, "a", 1); len(got) != 1 {
		t.Fatal("not leased")
	}
	if _, _, err := st.FrontierTake(ctx, "a", "a.test", 2); err != nil {
		t.Fatal(err)
	}
	if err := st.FrontierRelease(ctx, "b", "a.test", 0); err != nil { // not b's: nothing changes
		t.Fatal(err)
	}
	if err := st.FrontierRelease(ctx, "a", "a.test", time.Hour); err != nil {
		t.Fatal(err)
	}
	if got, left, next, err := leaseOf(st, "b", 1); err != nil || len(got) != 0 || left != 3 || next < 59*time.Minute {
		t.Fatalf("lease right after a release due in an hour = %v, left %d, next %v, %v", got, left, next, err)
	}
	if err := st.FrontierRelease(ctx, "a", "a.test", 0); err != nil { // released already: a no-op
		t.Fatal(err)
	}
}

// Every key a frontier script touches carries its shard's hash tag, so that a Redis Cluster runs it
// on one slot: the keys of one host share the slot of their shard.
func TestFrontierKeysShareTheirShardsSlot(t *testing.T) {
	srv := redistest.Start(t)
	prefix := newPrefix()
	c := srv.Client()
	st := redisstore.New(c, redisstore.WithPrefix(prefix), redisstore.WithFrontierShards(8))
	for h := range 20 {
		host := fmt.Sprintf("h%d.test", h)
		reqs, keys := frontierReqs(host, "/0", "/1")
		if _, err := st.FrontierAdd(ctx, host, reqs, keys, false); err != nil {
			t.Fatal(err)
		}
	}
	got, _, _, err := leaseOf(st, "o", 20)
	if err != nil || len(got) == 0 {
		t.Fatalf("lease = %v, %v", got, err)
	}
	if _, _, err := st.FrontierTake(ctx, "o", got[0], 1); err != nil {
		t.Fatal(err)
	}
	keys, err := c.Keys(ctx, prefix+"frontier*").Result()
	if err != nil {
		t.Fatal(err)
	}
	tags := map[string]bool{}
	for _, k := range keys {
		open, end := strings.Index(k, "{"), strings.Index(k, "}")
		if open < 0 || end < open+2 {
			t.Errorf("key %q has no hash tag", k)
			continue
		}
		tags[k[open:end+1]] = true
		if host, ok := strings.CutPrefix(k[end+1:], ":q:"); ok && strings.Contains(host, "{") {
			t.Errorf("key %q: a host's name must not carry a tag of its own", k)
		}
	}
	if len(tags) < 2 || len(tags) > 8 {
		t.Errorf("%d hash tags over 8 shards (%v): want the frontier spread over its shards", len(tags), tags)
	}
}

// leaseOf is st.FrontierLease for owner holding nothing, as four results: the hosts leased, the
// count, the time until the next is due, the error.
func leaseOf(st *redisstore.Store, owner string, n int) ([]string, int, time.Duration, error) {
	got, _, left, next, err := st.FrontierLease(ctx, owner, n, nil)
	return hostsOf(got), left, next, err
}

// hostsOf is the hosts of leases.
func hostsOf(leases []ext.Lease) []string {
	out := make([]string, 0, len(leases))
	for _, l := range leases {
		out = append(out, l.Host)
	}
	return out
}

// Issue 33, item 1: a departure under a lease is admitted only while the lease holds. Once it has run
// out unrenewed it is refused, though nobody leased the host yet; once another member's lease of the
// host has been presented, the old one is refused whatever end it claims (a member paused with a
// renewal on its way). Tokens grow at every grant, even after the shard lost the host's keys. The
// fence leaves the host's hash without saved state.
func TestFrontierAdmitFencesAStaleLease(t *testing.T) {
	srv := redistest.Start(t)
	prefix := newPrefix()
	a := redisstore.New(srv.Client(), redisstore.WithPrefix(prefix), redisstore.WithLeaseTTL(300*time.Millisecond))
	b := redisstore.New(srv.Client(), redisstore.WithPrefix(prefix), redisstore.WithLeaseTTL(300*time.Millisecond))
	tb := checkFencing(t, a, b, "f.test")
	// The shard loses the host's fence key (a node restarted empty): the next token is still greater.
	if err := srv.Client().Del(ctx, prefix+"frontier{0}:fence:f.test").Err(); err != nil {
		t.Fatal(err)
	}
	if err := b.FrontierRelease(ctx, "b", "f.test", 0); err != nil {
		t.Fatal(err)
	}
	again := leaseUntilGranted(t, a, "a", "f.test")
	if again.Token <= tb {
		t.Errorf("a grant after the fence key was lost has token %d, want more than %d", again.Token, tb)
	}
}

// checkFencing runs the fencing checks on host, leased by a ("a") then by b ("b"), and returns b's
// token.
func checkFencing(t *testing.T, a, b *redisstore.Store, host string) int64 {
	t.Helper()
	reqs, keys := frontierReqs(host, "/0", "/1")
	if _, err := a.FrontierAdd(ctx, host, reqs, keys, false); err != nil {
		t.Fatal(err)
	}
	la := leaseUntilGranted(t, a, "a", host)
	if adm, err := a.FrontierAdmit(ctx, la, 0); err != nil || !adm.OK || adm.LeaseLost {
		t.Fatalf("a departure under a lease that holds = %+v, %v; want admitted", adm, err)
	}
	if err := a.Departed(ctx, host, 0); err != nil {
		t.Fatal(err)
	}
	time.Sleep(time.Until(la.Until) + 20*time.Millisecond) // a is paused: its lease runs out
	if adm, err := a.FrontierAdmit(ctx, la, 0); err != nil || adm.OK || !adm.LeaseLost || adm.Fence != la.Token {
		t.Errorf("a departure under a lease that ran out = %+v, %v; want refused, the fence still its token %d", adm, err, la.Token)
	}
	lb := leaseUntilGranted(t, b, "b", host)
	if lb.Token <= la.Token {
		t.Errorf("the next grant's token %d is not above the first's %d", lb.Token, la.Token)
	}
	if adm, err := b.FrontierAdmit(ctx, lb, 0); err != nil || !adm.OK {
		t.Fatalf("the new holder's departure = %+v, %v; want admitted", adm, err)
	}
	if err := b.Departed(ctx, host, 0); err != nil {
		t.Fatal(err)
	}
	stale := la
	stale.Until = time.Now().Add(time.Hour) // as if a renewal had come back after the pause
	if adm, err := a.FrontierAdmit(ctx, stale, 0); err != nil || adm.OK || !adm.LeaseLost || adm.Fence != lb.Token {
		t.Errorf("a departure under a lease that passed to b = %+v, %v; want refused, the fence b's token %d", adm, err, lb.Token)
	}
	if _, ok, err := a.LoadHost(ctx, host); ok || err != nil {
		t.Errorf("LoadHost of a host only admitted and fenced = ok %v, %v; want no saved state", ok, err)
	}
	return lb.Token
}

// leaseUntilGranted asks st to lease host to owner until it does (a lease held by another runs out).
func leaseUntilGranted(t *testing.T, st *redisstore.Store, owner, host string) ext.Lease {
	t.Helper()
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		got, _, _, _, err := st.FrontierLease(ctx, owner, 1, nil)
		if err != nil {
			t.Fatal(err)
		}
		for _, l := range got {
			if l.Host == host {
				if l.Token <= 0 || !l.Until.After(time.Now()) {
					t.Fatalf("lease %+v: want a token and an end ahead", l)
				}
				return l
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s never leased %s", owner, host)
		}
	}
}

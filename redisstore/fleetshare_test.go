package redisstore_test

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/collypace/ext/redisstore"
	"github.com/collypace/ext/redisstore/internal/redistest"
)

// seedFrontier queues one request on each of hosts hosts (h00.test…) and returns their names.
func seedFrontier(t *testing.T, st *redisstore.Store, hosts int) []string {
	t.Helper()
	var names []string
	for h := range hosts {
		host := fmt.Sprintf("h%02d.test", h)
		reqs, keys := frontierReqs(host, "/0")
		if _, err := st.FrontierAdd(ctx, host, reqs, keys, false); err != nil {
			t.Fatal(err)
		}
		names = append(names, host)
	}
	return names
}

// Issue 27, item 1: live members split the hosts. Three members whose heartbeats are live: the first
// to ask leases its share (12 hosts over 3 members: 4), not every host; each heartbeat says the share;
// once a member leaves, the others' shares grow at once; a member whose heartbeat ran out counts no more.
func TestFrontierLeasesAShareOfTheHosts(t *testing.T) {
	srv := redistest.Start(t)
	prefix := newPrefix()
	st := redisstore.New(srv.Client(), redisstore.WithPrefix(prefix), redisstore.WithLeaseTTL(500*time.Millisecond))
	seedFrontier(t, st, 12)
	for _, m := range []string{"a", "b", "c"} {
		if _, _, share, err := st.FrontierRenew(ctx, m, nil); err != nil || share == 0 {
			t.Fatalf("heartbeat of %s = share %d, %v", m, share, err)
		}
	}
	leases, _, _, _, err := st.FrontierLease(ctx, "a", 100, nil)
	got := hostsOf(leases)
	if err != nil || len(got) != 4 {
		t.Fatalf("the first member asked for 100 hosts and leased %v, %v: want its share, 4", got, err)
	}
	if more, _, _, _, err := st.FrontierLease(ctx, "a", 100, got); err != nil || len(more) != 0 {
		t.Errorf("asking again while holding its share leased %v, %v: want none", more, err)
	}
	b, over, _, _, err := st.FrontierLease(ctx, "b", 100, nil)
	if err != nil || len(b) != 4 || len(over) != 0 {
		t.Errorf("the second member leased %v (taken over %v), %v: want 4, none taken over", b, over, err)
	}
	if lost, _, share, err := st.FrontierRenew(ctx, "a", got); err != nil || len(lost) != 0 || share != 4 {
		t.Errorf("a's heartbeat = lost %v, share %d, %v; want nothing lost, share 4", lost, share, err)
	}
	if err := st.FrontierLeave(ctx, "c"); err != nil {
		t.Fatal(err)
	}
	if _, _, share, err := st.FrontierRenew(ctx, "a", got); err != nil || share != 6 {
		t.Errorf("a's share once c left = %d, %v; want 6 (12 hosts over 2)", share, err)
	}
	// b stops beating: once its heartbeat runs out (500 ms), a is alone, and its share is every host.
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		_, _, share, err := st.FrontierRenew(ctx, "a", got)
		if err != nil {
			t.Fatal(err)
		}
		if share == 12 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("a's share stays %d after b's heartbeat ran out, want 12", share)
		}
	}
}

// A lease that ran out unrenewed is reported taken over by the member that leases the host next; a
// host given back and leased again is not.
func TestFrontierReportsTakeovers(t *testing.T) {
	srv := redistest.Start(t)
	prefix := newPrefix()
	st := redisstore.New(srv.Client(), redisstore.WithPrefix(prefix), redisstore.WithLeaseTTL(300*time.Millisecond))
	reqs, keys := frontierReqs("a.test", "/0", "/1")
	if _, err := st.FrontierAdd(ctx, "a.test", reqs, keys, false); err != nil {
		t.Fatal(err)
	}
	if got, _, _, _, err := st.FrontierLease(ctx, "first", 1, nil); err != nil || len(got) != 1 {
		t.Fatalf("lease = %v, %v", got, err)
	}
	if err := st.FrontierRelease(ctx, "first", "a.test", 0); err != nil {
		t.Fatal(err)
	}
	got, over, _, _, err := st.FrontierLease(ctx, "second", 1, nil)
	if err != nil || len(got) != 1 || len(over) != 0 {
		t.Fatalf("lease after a release = %v (taken over %v), %v; want the host, not taken over", got, over, err)
	}
	// second dies: its lease runs out unrenewed.
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		got, over, _, _, err = st.FrontierLease(ctx, "third", 1, nil)
		if err != nil {
			t.Fatal(err)
		}
		if len(got) > 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the lease never ran out")
		}
	}
	if !slices.Equal(over, []string{"a.test"}) {
		t.Errorf("lease after a lease ran out = %v, taken over %v; want a.test taken over", got, over)
	}
}

// Issue 27, item 1: stealing from an overloaded member. A member alone leases every host; a second
// joins; at its next heartbeat the first gives up the hosts over its share, the second leases them,
// and the crawl ends with every page once, at the interval, whoever held the host. The figures reach
// the audit trail (fleet_host_stolen, fleet_member with its fleet_* fields) and the pacer's Observer.
func TestFleetQueueStealsFromAnOverloadedMember(t *testing.T) {
	srv := redistest.Start(t)
	const hosts, pages, interval = 8, 12, 100 * time.Millisecond
	site := newFrontierSite(t, pages)
	prefix := newPrefix()
	ttl := redisstore.WithLeaseTTL(600 * time.Millisecond)
	first := newFrontierMember(t, srv, site, prefix, 2, interval, ttl)
	seedHosts(t, first.q, hosts)
	firstDone := make(chan error, 1)
	go func() { firstDone <- first.q.Run(first.c) }()
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		if first.fig.get().Held == hosts {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the first member never held every host")
		}
	}
	second := newFrontierMember(t, srv, site, prefix, 2, interval, ttl)
	if err := second.q.Run(second.c); err != nil {
		t.Fatal(err)
	}
	if err := <-firstDone; err != nil {
		t.Fatal(err)
	}
	site.check(t, hosts, interval, nil, first, second)
	a, b := first.fig.get(), second.fig.get()
	if a.Stolen < 1 || b.Leased < 1 || a.TakenOver != 0 || b.TakenOver != 0 {
		t.Errorf("figures: first %+v, second %+v; want hosts stolen from the first and leased by the second, none taken over", a, b)
	}
	trail := first.trail.String()
	if !strings.Contains(trail, `"event":"fleet_host_stolen"`) {
		t.Error("the first member's trail has no fleet_host_stolen event")
	}
	want := fmt.Sprintf(`"fleet_member":%q,"fleet_held":0,"fleet_share":`, a.Member)
	if !strings.Contains(trail, `"event":"fleet_member"`) || !strings.Contains(trail, want) || !strings.Contains(trail, fmt.Sprintf(`"fleet_stolen":%d`, a.Stolen)) {
		t.Errorf("the first member's trail has no fleet_member event with its figures (%s…)", want)
	}
}

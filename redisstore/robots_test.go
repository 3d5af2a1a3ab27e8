package redisstore_test

import (
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/collypace/ext"
	"github.com/collypace/ext/redisstore"
	"github.com/collypace/ext/redisstore/internal/redistest"
	"github.com/collypace/ext/storetest"
	"github.com/gocolly/colly/v2"
)

func TestRobotsConformance(t *testing.T) {
	c := redistest.Start(t).Client()
	storetest.RunRobots(t, func(t *testing.T) storetest.RobotsStore { return redisstore.New(c, redisstore.WithPrefix(newPrefix())) })
}

func TestRobotsConformanceCluster(t *testing.T) {
	c := redistest.StartCluster(t, 3).Client(t)
	storetest.RunRobots(t, func(t *testing.T) storetest.RobotsStore { return redisstore.New(c, redisstore.WithPrefix(newPrefix())) })
}

// A robots.txt hash that does not decode is reported corrupt, for the pacer to read robots.txt again.
func TestRobotsCorruptRecord(t *testing.T) {
	srv := redistest.Start(t)
	prefix := newPrefix()
	st := redisstore.New(srv.Client(), redisstore.WithPrefix(prefix))
	const origin = "http://bad.test"
	key := prefix + "robots:{" + origin + "}"
	for name, write := range map[string]func() error{
		"not a hash":   func() error { return srv.Client().Set(ctx, key, "x", time.Hour).Err() },
		"other layout": func() error { return srv.Client().HSet(ctx, key, "v", "9").Err() },
		"bad status": func() error {
			return srv.Client().HSet(ctx, key, "v", "1", "status", "x", "fetched_at", "1", "body", "").Err()
		},
	} {
		if err := srv.Client().Del(ctx, key).Err(); err != nil {
			t.Fatal(err)
		}
		if err := write(); err != nil {
			t.Fatal(err)
		}
		if status, _, _, err := st.LoadRobots(ctx, origin); status != 0 || !errors.Is(err, ext.ErrCorruptState) {
			t.Errorf("%s: LoadRobots = status %d, err %v; want an error wrapping ErrCorruptState", name, status, err)
		}
	}
}

// robotsReads checks that each of hosts was asked for robots.txt once.
func robotsReads(t *testing.T, site *frontierSite, hosts int, when string) {
	t.Helper()
	got := site.arrivals()
	for h := range hosts {
		if n := len(got[fmt.Sprintf("http://h%d.test/robots.txt", h)]); n != 1 {
			t.Errorf("%s: h%d.test asked for robots.txt %d times, want once", when, h, n)
		}
	}
}

// Issue 35 item 3: a fleet on one frontier asks each host for robots.txt once, however its hosts pass
// from member to member; a fleet started later on the same Redis (every host changing hands) asks
// none again.
func TestFleetReadsRobotsOncePerHost(t *testing.T) {
	srv := redistest.Start(t)
	const hosts, pages, interval = 12, 5, 40 * time.Millisecond
	site := newFrontierSite(t, pages)
	prefix := newPrefix()
	first := newMemberWith(t, srv, site, prefix, 2, interval, nil)
	seedHosts(t, first.q, hosts)
	var done atomic.Int32
	first.c.OnScraped(func(*colly.Response) {
		if done.Add(1) == hosts {
			first.q.Stop()
		}
	})
	if err := first.q.Run(first.c); err != nil {
		t.Fatal(err)
	}
	var members []*frontierMember
	for range 3 {
		members = append(members, newMemberWith(t, srv, site, prefix, 2, interval, nil))
	}
	runMembers(t, members)
	site.check(t, hosts, interval, nil, append(members, first)...)
	robotsReads(t, site, hosts, "a fleet after a stopped member")
	for _, m := range members {
		if err := m.q.AddURL(fmt.Sprintf("http://h0.test/p/%d", pages)); err != nil {
			t.Fatal(err)
		}
	}
	runMembers(t, members)
	robotsReads(t, site, hosts, "a second crawl")
}

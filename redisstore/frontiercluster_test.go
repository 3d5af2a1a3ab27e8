package redisstore_test

import (
	"testing"
	"time"

	"github.com/collypace/ext"
	"github.com/collypace/ext/redisstore"
	"github.com/collypace/ext/redisstore/internal/redistest"
	"github.com/gocolly/colly/v2"
	"github.com/rs/zerolog"
)

// On a local Redis Cluster of three masters, with the frontier in six shards: every script runs (a
// key outside the script's slot would be refused by the cluster), the shards spread over the nodes,
// and two crawler processes crawl every page once, each host at its interval; a departure under a
// lease that ran out, or passed to another member, is refused.
func TestFrontierOnARedisCluster(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a three-node Redis Cluster")
	}
	cl := redistest.StartCluster(t, 3)
	const hosts, pages, interval = 8, 4, 50 * time.Millisecond
	site := newFrontierSite(t, pages)
	prefix := newPrefix()
	var members []*frontierMember
	for range 2 {
		st := redisstore.New(cl.Client(t), redisstore.WithPrefix(prefix), redisstore.WithFrontierShards(6))
		c := colly.NewCollector()
		trail := &lockedTrail{}
		p := ext.AdaptivePacing(c, ext.WithStore(st), ext.WithTransport(site.transport()), ext.WithBaseDelay(interval), ext.WithJitter(0), ext.WithoutRobots(),
			ext.WithLogger(zerolog.New(trail).Level(zerolog.InfoLevel)))
		t.Cleanup(func() { _ = p.Close() })
		q := ext.NewQueue(p, 2)
		c.OnHTML("a[href]", func(e *colly.HTMLElement) {
			if err := q.AddURL(e.Request.AbsoluteURL(e.Attr("href"))); err != nil {
				t.Error(err)
			}
		})
		seedHosts(t, q, hosts)
		members = append(members, &frontierMember{st: st, c: c, p: p, q: q, trail: trail})
	}
	runMembers(t, members)
	site.check(t, hosts, interval, nil, members...)
	c := cl.Client(t)
	nodes := map[string]bool{}
	for shard := range 6 {
		key := redisstore.FrontierBase(members[0].st, shard) + "seen:lh"
		if n, err := c.Exists(ctx, key).Result(); err != nil || n == 0 {
			continue
		}
		node, err := c.MasterForKey(ctx, key)
		if err != nil {
			t.Fatal(err)
		}
		nodes[node.Options().Addr] = true
	}
	if len(nodes) < 2 {
		t.Errorf("the frontier's shards lie on %d node(s) of 3: want them spread", len(nodes))
	}
	// Fencing, where the lease (its shard's slot) and the host's hash (its own slot) may lie on two nodes.
	fencePrefix := newPrefix()
	a := redisstore.New(cl.Client(t), redisstore.WithPrefix(fencePrefix), redisstore.WithFrontierShards(6), redisstore.WithLeaseTTL(300*time.Millisecond))
	b := redisstore.New(cl.Client(t), redisstore.WithPrefix(fencePrefix), redisstore.WithFrontierShards(6), redisstore.WithLeaseTTL(300*time.Millisecond))
	checkFencing(t, a, b, "fenced.test")
}

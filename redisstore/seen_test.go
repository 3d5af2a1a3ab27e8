package redisstore_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/collypace/ext"
	"github.com/collypace/ext/redisstore"
	"github.com/collypace/ext/redisstore/internal/redistest"
)

// Issue 35: the seen set keeps a fingerprint a request, in sets of integers Redis encodes compactly:
// 5,000 URLs of 200 characters take at most 24 bytes each (MEMORY USAGE of every key of the seen
// set), every bucket stays an intset, and deduplication stays exact across the buckets' splits.
func TestFrontierSeenSetIsSmallWhateverTheURL(t *testing.T) {
	srv := redistest.Start(t)
	prefix := newPrefix()
	st := redisstore.New(srv.Client(), redisstore.WithPrefix(prefix))
	const urls, batch = 5000, 250
	pad := strings.Repeat("x", 170)
	page := func(i int) string { return fmt.Sprintf("http://long.test/%s/%06d", pad, i) }
	for from := 0; from < urls; from += batch {
		var reqs []ext.DeferredRequest
		var keys []string
		for i := from; i < from+batch; i++ {
			reqs = append(reqs, ext.DeferredRequest{URL: page(i)})
			keys = append(keys, page(i))
		}
		if n, err := st.FrontierAdd(ctx, "long.test", reqs, keys, false); n != batch || err != nil {
			t.Fatalf("add %d–%d = %d, %v; want %d", from, from+batch, n, err, batch)
		}
		if n, err := st.FrontierAdd(ctx, "long.test", reqs, keys, false); n != 0 || err != nil {
			t.Fatalf("the same %d again = %d, %v; want 0", batch, n, err)
		}
	}
	for i := 0; i < urls; i += 7 { // every key still found once the buckets have split
		r := []ext.DeferredRequest{{URL: page(i)}}
		if n, err := st.FrontierAdd(ctx, "long.test", r, []string{page(i)}, false); n != 0 || err != nil {
			t.Fatalf("URL %d again after the splits = %d, %v; want 0", i, n, err)
		}
	}
	c := srv.Client()
	keys, err := c.Keys(ctx, prefix+"frontier{0}:seen*").Result()
	if err != nil {
		t.Fatal(err)
	}
	var bytes int64
	buckets := 0
	for _, k := range keys {
		n, err := c.MemoryUsage(ctx, k, 0).Result()
		if err != nil {
			t.Fatal(err)
		}
		bytes += n
		if strings.HasSuffix(k, ":lh") {
			continue
		}
		buckets++
		if enc, err := c.ObjectEncoding(ctx, k).Result(); enc != "intset" || err != nil {
			t.Errorf("bucket %s is %q (%v), want an intset", k, enc, err)
		}
	}
	perURL := float64(bytes) / urls
	t.Logf("the seen set: %d bytes in %d buckets for %d URLs of %d characters, %.1f a URL", bytes, buckets, urls, len(page(0)), perURL)
	if perURL > 24 || buckets < 2 {
		t.Errorf("the seen set takes %d bytes in %d buckets for %d URLs of %d characters: %.1f a URL, want at most 24", bytes, buckets, urls, len(page(0)), perURL)
	}
}

// A frontier whose seen set was written in the format before fingerprints (a set of whole keys) is
// migrated by the first FrontierAdd on its shard: a key it held is still seen, a new one is queued,
// and the old set is gone.
func TestFrontierSeenSetMigratesTheFormerFormat(t *testing.T) {
	srv := redistest.Start(t)
	prefix := newPrefix()
	c := srv.Client()
	old := prefix + "frontier{0}:seen"
	var former []any
	for i := range 1200 { // more than one SSCAN batch
		former = append(former, fmt.Sprintf("http://old.test/%d", i))
	}
	if err := c.SAdd(ctx, old, former...).Err(); err != nil {
		t.Fatal(err)
	}
	st := redisstore.New(c, redisstore.WithPrefix(prefix))
	reqs, keys := frontierReqs("old.test", "/5", "/1199", "/new")
	if n, err := st.FrontierAdd(ctx, "old.test", reqs, keys, false); n != 1 || err != nil {
		t.Fatalf("add of two URLs the former set held and a new one = %d, %v; want 1", n, err)
	}
	if n, err := c.Exists(ctx, old).Result(); n != 0 || err != nil {
		t.Errorf("the former seen set is still there (%d, %v)", n, err)
	}
	reqs, keys = frontierReqs("old.test", "/0", "/new")
	if n, err := st.FrontierAdd(ctx, "old.test", reqs, keys, false); n != 0 || err != nil {
		t.Errorf("add after the migration of URLs seen = %d, %v; want 0", n, err)
	}
}

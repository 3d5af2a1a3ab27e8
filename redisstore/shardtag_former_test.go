package redisstore_test

import (
	"errors"
	"testing"

	"github.com/collypace/ext"
	"github.com/collypace/ext/redisstore"
	"github.com/collypace/ext/redisstore/internal/redistest"
)

// A frontier of several shards written by an earlier build (shards tagged {0}, {1}, …, not read by
// this build) is not crawled on without its requests: the first add and the first lease fail with an
// error wrapping ext.ErrCorruptState that names it. One of a single shard, whose tag has not changed,
// and a fresh one work.
func TestFrontierOfFormerShardTagsIsAnError(t *testing.T) {
	srv := redistest.Start(t)
	req := []ext.DeferredRequest{{URL: "http://a.test/1"}}
	fresh := redisstore.New(srv.Client(), redisstore.WithPrefix(newPrefix()), redisstore.WithFrontierShards(3))
	if n, err := fresh.FrontierAdd(ctx, "a.test", req, []string{"http://a.test/1"}, false); n != 1 || err != nil {
		t.Fatalf("a fresh frontier of 3 shards: add = %d, %v; want 1, nil", n, err)
	}

	prefix := newPrefix()
	if err := srv.Client().Set(ctx, prefix+"frontier{0}:n", 5, 0).Err(); err != nil { // shard 0's count, as an earlier build kept it
		t.Fatal(err)
	}
	one := redisstore.New(srv.Client(), redisstore.WithPrefix(prefix))
	if _, err := one.FrontierAdd(ctx, "a.test", req, []string{"http://a.test/1"}, false); err != nil {
		t.Fatalf("one shard, whose tag is unchanged: %v", err)
	}
	three := redisstore.New(srv.Client(), redisstore.WithPrefix(prefix), redisstore.WithFrontierShards(3))
	if _, err := three.FrontierAdd(ctx, "b.test", req, []string{"http://b.test/1"}, false); !errors.Is(err, ext.ErrCorruptState) {
		t.Errorf("3 shards over a frontier of the former tags: add error %v, want ext.ErrCorruptState", err)
	}
	if _, _, _, _, err := three.FrontierLease(ctx, "m", 1, nil); !errors.Is(err, ext.ErrCorruptState) {
		t.Errorf("3 shards over a frontier of the former tags: lease error %v, want ext.ErrCorruptState", err)
	}
}

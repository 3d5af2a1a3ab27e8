package redisstore_test

import (
	"errors"
	"net/http"
	"testing"
	"time"

	"github.com/collypace/ext"
	"github.com/collypace/ext/redisstore"
	"github.com/collypace/ext/redisstore/internal/redistest"
	"github.com/redis/go-redis/v9"
)

// In the layout before spill lists, a Queue's spilled requests were members of the deferred set with the
// reason "queue_spill". Listing deferred requests moves them to their host's spill list, once.
func TestLegacySpillsMoveToTheirList(t *testing.T) {
	c := redistest.Start(t).Client()
	prefix := newPrefix()
	st := redisstore.New(c, redisstore.WithPrefix(prefix))
	at := time.Date(2026, 12, 2, 12, 0, 0, 0, time.UTC)
	members := []string{
		`{"v":1,"host":"a.test","method":"GET","url":"http://a.test/s/0","depth":1,"deferred_at":"2026-12-02T12:00:00Z","reason":"queue_spill","seq":1}`,
		`{"v":1,"host":"a.test","method":"GET","url":"http://a.test/d/0","depth":1,"deferred_at":"2026-12-02T12:00:01Z","reason":"breaker open","seq":2}`,
		`{"v":1,"host":"a.test","method":"GET","url":"http://a.test/s/1","depth":1,"deferred_at":"2026-12-02T12:00:02Z","reason":"queue_spill","seq":3}`,
	}
	for i, m := range members {
		if err := c.ZAdd(ctx, prefix+"deferred", redis.Z{Score: float64(i + 1), Member: m}).Err(); err != nil {
			t.Fatal(err)
		}
	}
	for range 2 { // the second listing finds nothing more to move
		got, err := st.ListDeferred(ctx, "", 0)
		if err != nil || len(got) != 1 || got[0].URL != "http://a.test/d/0" || got[0].ID != 2 {
			t.Fatalf("ListDeferred = %+v, %v; want only the breaker's request", got, err)
		}
	}
	spilled, err := st.TakeSpilled(ctx, "a.test", 0)
	if err != nil || len(spilled) != 2 || spilled[0].URL != "http://a.test/s/0" || spilled[1].URL != "http://a.test/s/1" {
		t.Fatalf("TakeSpilled = %+v, %v; want /s/0 then /s/1", spilled, err)
	}
	if r := spilled[0]; r.Reason != "" || r.ID != 0 || !r.DeferredAt.Equal(at) || r.Method != http.MethodGet {
		t.Errorf("moved request: %+v", r)
	}
}

// A spill list entry that cannot be decoded is taken with the others and named.
func TestTakeSpilledDropsUndecodable(t *testing.T) {
	c := redistest.Start(t).Client()
	prefix := newPrefix()
	st := redisstore.New(c, redisstore.WithPrefix(prefix))
	good := ext.DeferredRequest{Method: http.MethodGet, URL: "http://c.test/0"}
	if err := st.SpillRequests(ctx, "c.test", []ext.DeferredRequest{good}); err != nil {
		t.Fatal(err)
	}
	if err := c.RPush(ctx, prefix+"spill:c.test", "not json").Err(); err != nil {
		t.Fatal(err)
	}
	got, err := st.TakeSpilled(ctx, "c.test", 0)
	if !errors.Is(err, ext.ErrCorruptState) || len(got) != 1 || got[0].URL != good.URL || got[0].Host != "c.test" {
		t.Fatalf("TakeSpilled = %+v, %v; want the good one and ErrCorruptState", got, err)
	}
	if n, _ := c.Exists(ctx, prefix+"spill:c.test").Result(); n != 0 {
		t.Errorf("the spill list is still there after every entry was taken")
	}
}

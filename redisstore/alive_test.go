package redisstore_test

import (
	"testing"
	"time"

	"github.com/collypace/ext/redisstore"
	"github.com/collypace/ext/redisstore/internal/redistest"
)

// A member killed between a departure's admission and the report of its wire instant no longer holds
// the host for pendingBound (30 s): once its alive key runs out (it died), the next admission ends its
// pending departure, counted as a departure at that instant, and waits a gap from it. While its alive
// key lasts, the pending departure holds.
func TestDeadMembersPendingDepartureEnds(t *testing.T) {
	srv := redistest.Start(t)
	prefix := newPrefix()
	dead := redisstore.New(srv.Client(), redisstore.WithPrefix(prefix))
	live := redisstore.New(srv.Client(), redisstore.WithPrefix(prefix))
	const gap = 50 * time.Millisecond
	if a, err := dead.Admit(ctx, "x.test", gap); err != nil || !a.OK {
		t.Fatalf("the first member's admission = %+v, %v", a, err)
	}
	// It dies before reporting the wire instant: its departure stays pending.
	if ttl := srv.Client().PTTL(ctx, redisstore.AliveKey(dead)).Val(); ttl <= 0 || ttl > 2*time.Second {
		t.Fatalf("the admitting member's alive key lasts %v, want up to 2 s", ttl)
	}
	time.Sleep(gap) // the gap itself has passed: only the pending departure holds the host
	if a, err := live.Admit(ctx, "x.test", gap); err != nil || a.OK || !a.Pending {
		t.Fatalf("admission while the first member is alive = %+v, %v; want a wait for its pending departure", a, err)
	}
	if err := srv.Client().Del(ctx, redisstore.AliveKey(dead)).Err(); err != nil { // its alive key ran out
		t.Fatal(err)
	}
	a, err := live.Admit(ctx, "x.test", gap)
	if err != nil || a.OK || a.Pending || a.Wait <= 0 || a.Wait > gap {
		t.Fatalf("admission once the first member is dead = %+v, %v; want no pending wait, a gap from now", a, err)
	}
	time.Sleep(a.Wait)
	if a, err := live.Admit(ctx, "x.test", gap); err != nil || !a.OK {
		t.Errorf("admission a gap later = %+v, %v; want OK", a, err)
	}
}

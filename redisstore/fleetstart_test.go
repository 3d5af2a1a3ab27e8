package redisstore_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/collypace/ext/redisstore"
	"github.com/collypace/ext/redisstore/internal/redistest"
)

// Issue 27, item 3: members that start together send at once. A Store that first sees an epoch
// another created a moment ago (a fleet starting on a fresh store) admits at once; the loss grace
// fires only after a loss.
func TestNoStartUpWaitOnAFreshEpoch(t *testing.T) {
	srv := redistest.Start(t)
	prefix := newPrefix()
	first := redisstore.New(srv.Client(), redisstore.WithPrefix(prefix))
	if lost, err := first.CheckLost(ctx); lost || err != nil { // creates the epoch
		t.Fatalf("CheckLost on a fresh store = %v, %v", lost, err)
	}
	for i, host := range []string{"a.test", "b.test"} {
		joiner := redisstore.New(srv.Client(), redisstore.WithPrefix(prefix))
		if a, err := joiner.Admit(ctx, host, time.Millisecond); err != nil || !a.OK || a.Lost || a.Wait != 0 {
			t.Errorf("member %d's first admission, just after the epoch began: %+v, %v; want OK at once", i+2, a, err)
		}
	}
}

// After a loss the grace holds, for the Stores that knew the lost epoch and for one joining within
// it (it cannot have written back holds it never knew, but others are writing theirs).
func TestGraceAfterALossHoldsForAJoiner(t *testing.T) {
	srv := redistest.Start(t)
	prefix := newPrefix()
	old := redisstore.New(srv.Client(), redisstore.WithPrefix(prefix))
	if _, err := old.CheckLost(ctx); err != nil {
		t.Fatal(err)
	}
	if err := srv.Client().FlushAll(ctx).Err(); err != nil { // the server lost its state
		t.Fatal(err)
	}
	if lost, err := old.CheckLost(ctx); !lost || err != nil {
		t.Fatalf("CheckLost after the flush = %v, %v; want the loss", lost, err)
	}
	if lost, err := old.CheckLost(ctx); lost || err != nil {
		t.Errorf("CheckLost again = %v, %v; want the loss reported once", lost, err)
	}
	joiner := redisstore.New(srv.Client(), redisstore.WithPrefix(prefix))
	a, err := joiner.Admit(ctx, "c.test", time.Millisecond)
	if err != nil || a.OK || a.Wait <= 0 || a.Wait > time.Second {
		t.Errorf("a joiner's admission within the grace after a loss = %+v, %v; want a wait of at most the grace", a, err)
	}
	if a, err := old.Admit(ctx, "d.test", time.Millisecond); err != nil || a.OK || a.Wait <= 0 {
		t.Errorf("the old member's admission within the grace = %+v, %v; want a wait", a, err)
	}
}

// A member that created the epoch after a restart, not knowing of the loss, learns of it when another
// member marks the epoch lost, and keeps the rest of the grace from then on, without reporting a loss
// itself (it has nothing to write back).
func TestCreatorLearnsOfALossLater(t *testing.T) {
	srv := redistest.Start(t)
	prefix := newPrefix()
	old := redisstore.New(srv.Client(), redisstore.WithPrefix(prefix))
	if _, err := old.CheckLost(ctx); err != nil {
		t.Fatal(err)
	}
	if err := srv.Client().FlushAll(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	creator := redisstore.New(srv.Client(), redisstore.WithPrefix(prefix))
	if a, err := creator.Admit(ctx, "e.test", time.Millisecond); err != nil || !a.OK {
		t.Fatalf("the creator's first admission = %+v, %v; want OK (it cannot know of the loss yet)", a, err)
	}
	if lost, err := old.CheckLost(ctx); !lost || err != nil {
		t.Fatalf("the old member's CheckLost = %v, %v; want the loss", lost, err)
	}
	if lost, err := creator.CheckLost(ctx); lost || err != nil {
		t.Errorf("the creator's CheckLost = %v, %v; want no loss of its own", lost, err)
	}
	if a, err := creator.Admit(ctx, "f.test", time.Millisecond); err != nil || a.OK || a.Wait <= 0 {
		t.Errorf("the creator's admission once the loss is known = %+v, %v; want a wait for the grace", a, err)
	}
}

// Ready returns at once on a store that answers and lost nothing; on a server not up yet, it returns
// once the server answers; after a loss, once the grace is over (an admission then goes at once).
func TestReady(t *testing.T) {
	srv := redistest.Start(t)
	prefix := newPrefix()
	st := redisstore.New(srv.Client(), redisstore.WithPrefix(prefix))
	if err := st.Ready(ctx); err != nil {
		t.Fatalf("Ready on a fresh store = %v", err)
	}
	if a, err := st.Admit(ctx, "r.test", time.Millisecond); err != nil || !a.OK {
		t.Errorf("admission after Ready = %+v, %v; want OK", a, err)
	}
	srv.Stop()
	done := make(chan error, 1)
	go func() { done <- st.Ready(ctx) }()
	select {
	case err := <-done:
		t.Fatalf("Ready returned %v while the server was down", err)
	case <-time.After(300 * time.Millisecond):
	}
	srv.Restart() // empty: the store lost its state
	if err := <-done; err != nil {
		t.Fatalf("Ready after the restart = %v", err)
	}
	if a, err := st.Admit(ctx, "r2.test", time.Millisecond); err != nil || !a.OK {
		t.Errorf("admission once Ready returned after a loss = %+v, %v; want OK (the grace is over)", a, err)
	}
	short, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
	defer cancel()
	srv.Stop()
	if err := st.Ready(short); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Ready on a server down, past its context = %v; want the deadline, wrapped", err)
	}
}

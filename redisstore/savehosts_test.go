package redisstore_test

import (
	"strconv"
	"testing"
	"time"

	"github.com/collypace/ext"
	"github.com/collypace/ext/redisstore"
	"github.com/collypace/ext/redisstore/internal/redistest"
)

// Issue 35: a pacer on the Store writes a host's state once, then leaves it out of its write-behind
// flushes while only its departures change it (the admission records them: updated_at stays that of
// the first write); a key that expired (WithTTL) or was deleted is written again after the host's next
// departure, the state whole.
func TestUnchangedStateWrittenOnceAndAgainWhenGone(t *testing.T) {
	c := redistest.Start(t).Client()
	key := redisstore.DefaultPrefix + "host:h.test"
	field := func(name string) string {
		t.Helper()
		v, _ := c.HGet(ctx, key, name).Result()
		return v
	}
	for _, ttl := range []time.Duration{0, 800 * time.Millisecond} {
		c.FlushDB(ctx)
		st := redisstore.New(c, redisstore.WithTTL(ttl))
		p := ext.NewPacer(ext.WithStore(st), ext.WithBaseDelay(100*time.Millisecond), ext.WithJitter(0), ext.WithoutRobots(),
			ext.WithFlushInterval(50*time.Millisecond))
		depart := func(n int) {
			t.Helper()
			for range n {
				_, release, err := p.Wait(ctx, "h.test")
				if err != nil {
					t.Fatal(err)
				}
				release()
			}
			time.Sleep(150 * time.Millisecond) // two flushes
		}
		depart(1)
		first := field("updated_at")
		if first == "" || field("adaptive_delay") != "100000000" {
			t.Fatalf("ttl %v: after a departure and a flush, updated_at %q, adaptive_delay %q: want the state written", ttl, first, field("adaptive_delay"))
		}
		depart(3) // 300 ms, under half the TTL
		if got := field("updated_at"); got != first {
			t.Errorf("ttl %v: updated_at %s after departures that changed nothing else, want %s: written again", ttl, got, first)
		}
		if ttl > 0 {
			time.Sleep(ttl) // the key expires
		} else {
			c.Del(ctx, key) // evicted, say
		}
		if n := c.Exists(ctx, key).Val(); n != 0 {
			t.Fatalf("ttl %v: key still there", ttl)
		}
		depart(1)
		if field("updated_at") == "" || field("adaptive_delay") != "100000000" || field("v") == "" {
			t.Errorf("ttl %v: after the key was gone and a departure, updated_at %q, adaptive_delay %q: want the state written again",
				ttl, field("updated_at"), field("adaptive_delay"))
		}
		if ttl > 0 {
			if d := c.PTTL(ctx, key).Val(); d <= 0 || d > ttl {
				t.Errorf("ttl %v: the key's TTL %v, want it set", ttl, d)
			}
		}
		if err := p.Close(); err != nil {
			t.Fatal(err)
		}
	}
}

// Issue 35: DepartedAtAdmission ends a pending departure as Departed with the admission's ago does,
// in plain commands: another Store, held by the pending departure once the gap has passed, is admitted
// once it has ended; the last departure stays the admission's instant, and with WithTTL the key's
// expiry is refreshed.
func TestDepartedAtAdmissionEndsThePending(t *testing.T) {
	c := redistest.Start(t).Client()
	a := redisstore.New(c, redisstore.WithTTL(time.Hour))
	b := redisstore.New(c, redisstore.WithTTL(time.Hour))
	key := redisstore.DefaultPrefix + "host:w.test"
	const gap = 50 * time.Millisecond
	adm, at, err := redisstore.AdmitNow(a, ctx, "w.test", gap)
	if err != nil || !adm.OK {
		t.Fatal(adm, err)
	}
	time.Sleep(gap + 10*time.Millisecond)
	wait, err := b.Admit(ctx, "w.test", gap)
	if err != nil || wait.OK || !wait.Pending {
		t.Fatalf("another Store the gap after the admission, before its wire instant: %+v, %v; want a wait for the pending departure", wait, err)
	}
	c.PExpire(ctx, key, time.Minute)
	if err := a.DepartedAtAdmission(ctx, "w.test"); err != nil {
		t.Fatal(err)
	}
	if err := redisstore.Flush(a); err != nil { // written behind: its linger or its next command sends it
		t.Fatal(err)
	}
	if v := c.HGet(ctx, key, "last_departure").Val(); v != strconv.FormatInt(at.UnixNano(), 10) {
		t.Errorf("last_departure %s after DepartedAtAdmission, want the admission's %d", v, at.UnixNano())
	}
	if c.HExists(ctx, key, "pending").Val() || c.HExists(ctx, key, "pending_by").Val() {
		t.Error("still pending")
	}
	if d := c.PTTL(ctx, key).Val(); d <= 59*time.Minute {
		t.Errorf("TTL %v, want refreshed to about an hour", d)
	}
	if adm, err := b.Admit(ctx, "w.test", gap); err != nil || !adm.OK || adm.Since < gap {
		t.Errorf("another Store once the departure ended: %+v, %v; want admitted, at least the gap after the admission", adm, err)
	}
}

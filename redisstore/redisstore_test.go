package redisstore_test

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"math"
	"math/rand/v2"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/collypace/ext"
	"github.com/collypace/ext/internal/storetest"
	"github.com/collypace/ext/redisstore"
	"github.com/collypace/ext/redisstore/internal/redistest"
	"github.com/redis/go-redis/v9"
)

var (
	ctx = context.Background()
	// t0 has nanoseconds, to show that the schedule is exact to the nanosecond.
	t0 = time.Date(2026, 12, 2, 12, 0, 0, 123456789, time.UTC)
)

// prefixes makes the key prefix of each store a test makes distinct, so stores sharing a server
// start empty.
var prefixes atomic.Int64

func newPrefix() string { return fmt.Sprintf("test%d:", prefixes.Add(1)) }

func TestConformance(t *testing.T) {
	c := redistest.Start(t).Client()
	storetest.Run(t, func(t *testing.T) ext.Store { return redisstore.New(c, redisstore.WithPrefix(newPrefix())) })
}

func TestSharedConformance(t *testing.T) {
	c := redistest.Start(t).Client()
	storetest.RunShared(t, func(t *testing.T) ext.SharedStore {
		return redisstore.New(c, redisstore.WithPrefix(newPrefix()))
	})
}

func TestOpen(t *testing.T) {
	srv := redistest.Start(t)
	st, err := redisstore.Open(srv.Addr())
	if err != nil {
		t.Fatal(err)
	}
	if err := st.SaveHosts(ctx, []ext.HostState{storetest.Sample("o.test")}); err != nil {
		t.Error(err)
	}
	if err := st.Close(); err != nil {
		t.Error(err)
	}
	if err := st.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
	if _, _, err := st.LoadHost(ctx, "o.test"); err == nil {
		t.Error("LoadHost after Close succeeded; Open's client should be closed")
	}

	missing := "unix://" + t.TempDir() + "/nothing.sock"
	if _, err := redisstore.Open(missing); err == nil || !strings.HasPrefix(err.Error(), "redisstore: open "+missing+": ping: ") {
		t.Errorf("Open(%s) = %v, want a redisstore: open …: ping: error", missing, err)
	}
	if _, err := redisstore.Open("redis://user:s3cret@127.0.0.1:1/0"); err == nil || strings.Contains(err.Error(), "s3cret") {
		t.Errorf("Open of an unreachable URL with a password = %v, want an error without the password", err)
	}
}

func TestNewLeavesClientOpen(t *testing.T) {
	c := redistest.Start(t).Client()
	st := redisstore.New(c)
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	if err := c.Ping(ctx).Err(); err != nil {
		t.Errorf("client given to New closed by Close: %v", err)
	}
}

func TestKeyLayout(t *testing.T) {
	c := redistest.Start(t).Client()
	for _, prefix := range []string{"", "fleet7:"} {
		var st *redisstore.Store
		if prefix == "" {
			prefix = redisstore.DefaultPrefix
			st = redisstore.New(c)
		} else {
			st = redisstore.New(c, redisstore.WithPrefix(prefix))
		}
		s := storetest.Sample("k.test:8080")
		if err := st.SaveHosts(ctx, []ext.HostState{s}); err != nil {
			t.Fatal(err)
		}
		got, err := c.HGetAll(ctx, prefix+"host:k.test:8080").Result()
		if err != nil {
			t.Fatal(err)
		}
		want := map[string]string{
			"v": "1", "adaptive_delay": "2500000000", "known_limit": "1200000000",
			"next_departure": fmt.Sprint(s.NextDeparture.UnixNano()), "hold_until": fmt.Sprint(s.HoldUntil.UnixNano()),
			"hold_trigger": "retry_after", "crawl_delay": "2000000000", "crawl_clamped": "1", "breaker": "1",
			"breaker_changed": fmt.Sprint(s.BreakerChanged.UnixNano()), "failures": "7", "updated_at": fmt.Sprint(s.UpdatedAt.UnixNano()),
		}
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("hash %shost:k.test:8080 =\n%v\nwant\n%v", prefix, got, want)
		}
		if _, err := st.AddDeferred(ctx, ext.DeferredRequest{Host: "k.test", URL: "http://k.test/"}); err != nil {
			t.Fatal(err)
		}
		for key, typ := range map[string]string{prefix + "deferred": "zset", prefix + "deferred:seq": "string"} {
			if got := c.Type(ctx, key).Val(); got != typ {
				t.Errorf("TYPE %s = %q, want %q", key, got, typ)
			}
		}
	}
}

// TestThreeProcesses books one host from three stores on three clients, as three crawler processes
// would: every slot is distinct, and together they are contiguous.
func TestThreeProcesses(t *testing.T) {
	srv := redistest.Start(t)
	const (
		perProcess = 60
		interval   = 1500*time.Millisecond + 7 // odd nanoseconds: the arithmetic must be exact
	)
	var (
		mu  sync.Mutex
		got []time.Time
		wg  sync.WaitGroup
	)
	for range 3 {
		st := redisstore.New(srv.Client(), redisstore.WithPrefix("fleet:"))
		wg.Go(func() {
			for range perProcess {
				at, err := st.ReserveDeparture(ctx, "shared.test", t0, interval)
				if err != nil {
					t.Error(err)
					return
				}
				mu.Lock()
				got = append(got, at)
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	slices.SortFunc(got, time.Time.Compare)
	if len(got) != 3*perProcess {
		t.Fatalf("%d reservations, want %d", len(got), 3*perProcess)
	}
	for i, at := range got {
		if want := t0.Add(time.Duration(i) * interval); !at.Equal(want) {
			t.Fatalf("slot %d at %v, want %v: slots overlap or leave a gap", i, at, want)
		}
	}
}

func TestReserveExact(t *testing.T) {
	st := redisstore.New(redistest.Start(t).Client())
	now := time.Now() // about 1.8e18 unix nanoseconds: more than a double holds exactly
	for _, tc := range []struct {
		name     string
		now      time.Time
		interval time.Duration
	}{
		{"now", now, time.Nanosecond},
		{"carry", time.Unix(1_800_000_000, 999_999_999), time.Second + 1},
		{"before 1970", time.Unix(-5, 300), time.Second - 301},
		{"around the epoch", time.Unix(-1, 999_999_999), 1},
		{"max interval", t0, math.MaxInt64},
	} {
		host := tc.name + ".test"
		at, err := st.ReserveDeparture(ctx, host, tc.now, tc.interval)
		if err != nil || !at.Equal(tc.now) {
			t.Errorf("%s: first reservation %v (%v), want %v", tc.name, at, err, tc.now)
		}
		want := tc.now.Add(tc.interval)
		if tc.interval == math.MaxInt64 {
			want = time.Unix(0, math.MaxInt64) // clamped
		}
		at, err = st.ReserveDeparture(ctx, host, tc.now, tc.interval)
		if err != nil || !at.Equal(want) {
			t.Errorf("%s: second reservation %v (%v), want %v", tc.name, at, err, want)
		}
	}
	if _, err := st.ReserveDeparture(ctx, "z.test", time.Time{}, time.Second); err == nil {
		t.Error("ReserveDeparture with a zero now succeeded")
	}
}

func TestRoundTripExtremes(t *testing.T) {
	st := redisstore.New(redistest.Start(t).Client())
	s := storetest.Sample("x.test")
	s.NextDeparture = time.Time{}
	s.HoldUntil = time.Date(3000, 1, 1, 0, 0, 0, 0, time.UTC) // beyond an int64 of nanoseconds
	s.BreakerChanged = time.Unix(-86400, 1)
	s.UpdatedAt = time.Now()
	s.AdaptiveDelay, s.Failures, s.Breaker = -time.Nanosecond, -3, 42 // for the pacer to repair
	if err := st.SaveHosts(ctx, []ext.HostState{s}); err != nil {
		t.Fatal(err)
	}
	got, ok, err := st.LoadHost(ctx, "x.test")
	if !ok || err != nil {
		t.Fatalf("LoadHost = %v, %v", ok, err)
	}
	want := s
	want.HoldUntil = time.Unix(0, math.MaxInt64)
	if d := storetest.Diff(got, want); d != "" {
		t.Error(d)
	}
	if !got.NextDeparture.IsZero() {
		t.Errorf("zero NextDeparture loaded as %v", got.NextDeparture)
	}
}

// TestReservedOnly: a host only ever reserved has no saved state, and a later save keeps its booking.
func TestReservedOnly(t *testing.T) {
	st := redisstore.New(redistest.Start(t).Client())
	if _, err := st.ReserveDeparture(ctx, "r.test", t0, time.Minute); err != nil {
		t.Fatal(err)
	}
	if _, ok, err := st.LoadHost(ctx, "r.test"); ok || err != nil {
		t.Errorf("LoadHost of a reserved-only host = ok %v, err %v; want false, nil", ok, err)
	}
	s := storetest.Sample("r.test")
	s.NextDeparture = time.Time{}
	if err := st.SaveHosts(ctx, []ext.HostState{s}); err != nil {
		t.Fatal(err)
	}
	got, _, err := st.LoadHost(ctx, "r.test")
	if err != nil || !got.NextDeparture.Equal(t0.Add(time.Minute)) {
		t.Errorf("after save: next departure %v (%v), want the booked %v", got.NextDeparture, err, t0.Add(time.Minute))
	}
}

func TestCorruptHost(t *testing.T) {
	c := redistest.Start(t).Client()
	st := redisstore.New(c)
	good := redisstore.EncodeHostHash(storetest.Sample("ignored"))
	with := func(field, value string) map[string]string {
		m := maps.Clone(good)
		m[field] = value
		return m
	}
	without := func(field string) map[string]string {
		m := maps.Clone(good)
		delete(m, field)
		return m
	}
	for _, tc := range []struct {
		name    string
		set     func(key string) error
		reserve bool // ReserveDeparture fails too
	}{
		{"string key", func(k string) error { return c.Set(ctx, k, "hello", 0).Err() }, true},
		{"list key", func(k string) error { return c.RPush(ctx, k, "a", "b").Err() }, true},
		{"zset key", func(k string) error { return c.ZAdd(ctx, k, redis.Z{Score: 1, Member: "m"}).Err() }, true},
		{"not a number", hset(c, with("adaptive_delay", "fast")), true},
		{"float", hset(c, with("next_departure", "1.5e18")), true},
		{"huge", hset(c, with("hold_until", "99999999999999999999")), true},
		{"plus sign", hset(c, with("next_departure", "+1")), true},
		{"empty delay", hset(c, with("adaptive_delay", "")), true},
		{"missing field", hset(c, without("failures")), false},
		{"missing version", hset(c, without("v")), false},
		{"bool", hset(c, with("crawl_clamped", "yes")), false},
		{"huge failures", hset(c, with("failures", "1e400")), false},
		{"garbage only", hset(c, map[string]string{"\x00": "\xff"}), false},
	} {
		host := strings.ReplaceAll(tc.name, " ", "-") + ".test"
		key := redisstore.DefaultPrefix + "host:" + host
		if err := tc.set(key); err != nil {
			t.Fatal(err)
		}
		_, ok, err := st.LoadHost(ctx, host)
		if ok || !errors.Is(err, ext.ErrCorruptState) || !strings.HasPrefix(err.Error(), "redisstore: ") {
			t.Errorf("%s: LoadHost = ok %v, err %v; want an error wrapping ErrCorruptState", tc.name, ok, err)
		}
		want := storetest.Sample(host)
		at, err := st.ReserveDeparture(ctx, host, t0, time.Second)
		switch {
		case tc.reserve && !errors.Is(err, ext.ErrCorruptState):
			t.Errorf("%s: ReserveDeparture err %v, want one wrapping ErrCorruptState", tc.name, err)
		case tc.reserve:
		case tc.name == "garbage only":
			if err != nil || !at.Equal(t0) {
				t.Errorf("%s: ReserveDeparture = %v, %v; want now", tc.name, at, err)
			}
		case err != nil || !at.Equal(want.HoldUntil):
			t.Errorf("%s: ReserveDeparture = %v, %v; want the stored hold %v", tc.name, at, err, want.HoldUntil)
		default:
			want.NextDeparture = at.Add(want.AdaptiveDelay) // booked, and kept by the merge
		}
		// Saving is the repair: it overwrites what it cannot read.
		if err := st.SaveHosts(ctx, []ext.HostState{storetest.Sample(host)}); err != nil {
			t.Errorf("%s: SaveHosts over a corrupt record: %v", tc.name, err)
			continue
		}
		if got, ok, err := st.LoadHost(ctx, host); !ok || err != nil || storetest.Diff(got, want) != "" {
			t.Errorf("%s: after the repairing save: ok %v err %v diff %s", tc.name, ok, err, storetest.Diff(got, want))
		}
	}

	// Another version decodes to its version alone, whatever its other fields: the pacer discards it.
	if err := hset(c, map[string]string{"v": "99", "adaptive_delay": "fast"})(redisstore.DefaultPrefix + "host:v99.test"); err != nil {
		t.Fatal(err)
	}
	if got, ok, err := st.LoadHost(ctx, "v99.test"); !ok || err != nil || got != (ext.HostState{Host: "v99.test", Version: 99}) {
		t.Errorf("version 99: LoadHost = %+v, ok %v, err %v; want only the host and version 99", got, ok, err)
	}
}

func hset(c *redis.Client, m map[string]string) func(key string) error {
	return func(key string) error { return c.HSet(ctx, key, m).Err() }
}

func TestCorruptDeferred(t *testing.T) {
	c := redistest.Start(t).Client()
	st := redisstore.New(c)
	id1, err := st.AddDeferred(ctx, ext.DeferredRequest{Host: "a.test", URL: "http://a.test/1", Method: http.MethodGet})
	if err != nil {
		t.Fatal(err)
	}
	for score, member := range map[float64]string{1000: "{not json", 1001: `{"v":7,"host":"a.test"}`} {
		if err := c.ZAdd(ctx, redisstore.DefaultPrefix+"deferred", redis.Z{Score: score, Member: member}).Err(); err != nil {
			t.Fatal(err)
		}
	}
	id2, err := st.AddDeferred(ctx, ext.DeferredRequest{Host: "a.test", URL: "http://a.test/2", Method: http.MethodGet})
	if err != nil {
		t.Fatal(err)
	}
	got, err := st.ListDeferred(ctx, "a.test", 0)
	if !errors.Is(err, ext.ErrCorruptState) || !strings.Contains(err.Error(), "1000") || !strings.Contains(err.Error(), "1001") {
		t.Errorf("ListDeferred err = %v, want one wrapping ErrCorruptState naming 1000 and 1001", err)
	}
	if len(got) != 2 || got[0].ID != id1 || got[1].ID != id2 {
		t.Errorf("ListDeferred = %+v, want the two good requests", got)
	}
	if err := st.DeleteDeferred(ctx, []int64{1000, 1001}); err != nil {
		t.Fatal(err)
	}
	if got, err := st.ListDeferred(ctx, "", 0); err != nil || len(got) != 2 {
		t.Errorf("after deleting the corrupt entries: %d, %v", len(got), err)
	}

	bad := redisstore.New(c, redisstore.WithPrefix("bad:"))
	if err := c.Set(ctx, "bad:deferred", "x", 0).Err(); err != nil {
		t.Fatal(err)
	}
	if _, err := bad.ListDeferred(ctx, "", 0); !errors.Is(err, ext.ErrCorruptState) {
		t.Errorf("ListDeferred of a string key: %v, want ErrCorruptState", err)
	}
	if _, err := bad.AddDeferred(ctx, ext.DeferredRequest{Host: "a.test"}); !errors.Is(err, ext.ErrCorruptState) {
		t.Errorf("AddDeferred to a string key: %v, want ErrCorruptState", err)
	}
}

// TestListDeferredPages reads more requests than one page, with a host filter and a limit.
func TestListDeferredPages(t *testing.T) {
	st := redisstore.New(redistest.Start(t).Client())
	const n = 600
	for i := range n {
		host := "even.test"
		if i%2 == 1 {
			host = "odd.test"
		}
		if _, err := st.AddDeferred(ctx, ext.DeferredRequest{Host: host, URL: fmt.Sprint(i)}); err != nil {
			t.Fatal(err)
		}
	}
	for _, tc := range []struct {
		host        string
		limit, want int
	}{{"", 0, n}, {"", 257, 257}, {"odd.test", 0, n / 2}, {"odd.test", 290, 290}, {"none.test", 0, 0}} {
		got, err := st.ListDeferred(ctx, tc.host, tc.limit)
		if err != nil || len(got) != tc.want {
			t.Errorf("ListDeferred(%q, %d) = %d, %v; want %d", tc.host, tc.limit, len(got), err, tc.want)
			continue
		}
		for i := 1; i < len(got); i++ {
			if got[i].ID <= got[i-1].ID || (tc.host != "" && got[i].Host != tc.host) {
				t.Errorf("ListDeferred(%q, %d): entry %d out of order or of another host", tc.host, tc.limit, i)
				break
			}
		}
	}
}

// TestRedisRestart kills the server: every call fails with a clear error while it is down, and works
// again once it is back on the same socket.
func TestRedisRestart(t *testing.T) {
	srv := redistest.Start(t)
	st, err := redisstore.Open(srv.Addr())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() })
	if _, err := st.ReserveDeparture(ctx, "k.test", t0, time.Second); err != nil {
		t.Fatal(err)
	}

	srv.Stop()
	start := time.Now()
	calls := map[string]func() error{
		"ReserveDeparture": func() error { _, err := st.ReserveDeparture(ctx, "k.test", t0, time.Second); return err },
		"LoadHost":         func() error { _, _, err := st.LoadHost(ctx, "k.test"); return err },
		"SaveHosts":        func() error { return st.SaveHosts(ctx, []ext.HostState{storetest.Sample("k.test")}) },
		"AddDeferred":      func() error { _, err := st.AddDeferred(ctx, ext.DeferredRequest{Host: "k.test"}); return err },
		"ListDeferred":     func() error { _, err := st.ListDeferred(ctx, "", 0); return err },
		"DeleteDeferred":   func() error { return st.DeleteDeferred(ctx, []int64{1}) },
	}
	for name, call := range calls {
		err := call()
		if err == nil || !strings.HasPrefix(err.Error(), "redisstore: ") || errors.Is(err, ext.ErrCorruptState) {
			t.Errorf("%s while Redis is down: %v; want a redisstore: error, not ErrCorruptState", name, err)
		} else {
			t.Logf("%s while Redis is down: %v", name, err)
		}
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("failing calls took %v", d)
	}

	srv.Restart() // an empty server, without the scripts
	deadline := time.Now().Add(5 * time.Second)
	for {
		at, err := st.ReserveDeparture(ctx, "k.test", t0, time.Second)
		if err == nil {
			if !at.Equal(t0) {
				t.Errorf("first reservation after restart at %v, want %v: the restarted server starts empty", at, t0)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("ReserveDeparture still failing 5 s after the restart: %v", err)
		}
		time.Sleep(20 * time.Millisecond)
	}
	for name, call := range calls {
		if err := call(); err != nil {
			t.Errorf("%s after restart: %v", name, err)
		}
	}
}

// TestScriptFlush: the scripts are loaded again when the server has lost them.
func TestScriptFlush(t *testing.T) {
	c := redistest.Start(t).Client()
	st := redisstore.New(c)
	batch := []ext.HostState{storetest.Sample("a.test"), storetest.Sample("b.test")}
	for range 2 {
		if err := c.ScriptFlush(ctx).Err(); err != nil {
			t.Fatal(err)
		}
		if err := st.SaveHosts(ctx, batch); err != nil {
			t.Fatal(err)
		}
		if _, err := st.ReserveDeparture(ctx, "a.test", t0, time.Second); err != nil {
			t.Fatal(err)
		}
	}
}

func TestContextCanceled(t *testing.T) {
	st := redisstore.New(redistest.Start(t).Client())
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := st.ReserveDeparture(cctx, "a.test", t0, time.Second); !errors.Is(err, context.Canceled) {
		t.Errorf("ReserveDeparture with a canceled context: %v", err)
	}
	if err := st.SaveHosts(cctx, []ext.HostState{storetest.Sample("a.test")}); !errors.Is(err, context.Canceled) {
		t.Errorf("SaveHosts with a canceled context: %v", err)
	}
}

// TestReserveMatchesGo compares the script's arithmetic with Go's on random schedules across the
// whole int64 range of unix nanoseconds, before and after 1970, with zero times and clamping.
func TestReserveMatchesGo(t *testing.T) {
	st := redisstore.New(redistest.Start(t).Client())
	rng := rand.New(rand.NewPCG(1, 2))
	randNanos := func() int64 {
		switch rng.IntN(4) {
		case 0:
			return rng.Int64() - rng.Int64() // anywhere, either sign
		case 1:
			return time.Now().UnixNano() + rng.Int64N(int64(time.Hour))
		case 2:
			return rng.Int64N(1e12) - 5e11 // around the epoch
		}
		return math.MaxInt64 - rng.Int64N(int64(time.Hour))
	}
	randTime := func() time.Time {
		if rng.IntN(5) == 0 {
			return time.Time{}
		}
		return time.Unix(0, randNanos())
	}
	randDuration := func() time.Duration {
		switch rng.IntN(4) {
		case 0:
			return time.Duration(rng.Int64())
		case 1:
			return -time.Duration(rng.Int64N(1e12))
		}
		return time.Duration(rng.Int64N(int64(time.Minute)))
	}
	for i := range 400 {
		host := fmt.Sprintf("rand%d.test", i)
		s := storetest.Sample(host)
		s.NextDeparture, s.HoldUntil, s.AdaptiveDelay = randTime(), randTime(), randDuration()
		now, interval := time.Unix(0, randNanos()), randDuration()
		if err := st.SaveHosts(ctx, []ext.HostState{s}); err != nil {
			t.Fatal(err)
		}
		wantAt := now
		for _, x := range []time.Time{s.NextDeparture, s.HoldUntil} {
			if !x.IsZero() && x.After(wantAt) {
				wantAt = x
			}
		}
		step := max(interval, s.AdaptiveDelay, 0)
		wantNext := time.Unix(0, math.MaxInt64)
		if wantAt.UnixNano() <= math.MaxInt64-int64(step) {
			wantNext = wantAt.Add(step)
		}
		at, err := st.ReserveDeparture(ctx, host, now, interval)
		if err != nil || !at.Equal(wantAt) {
			t.Fatalf("case %d (%+v, now %d, interval %d): at %d (%v), want %d", i, s, now.UnixNano(), interval, at.UnixNano(), err, wantAt.UnixNano())
		}
		got, _, err := st.LoadHost(ctx, host)
		if err != nil || !got.NextDeparture.Equal(wantNext) {
			t.Fatalf("case %d (%+v, now %d, interval %d): next %d (%v), want %d", i, s, now.UnixNano(), interval, got.NextDeparture.UnixNano(), err, wantNext.UnixNano())
		}
	}
}

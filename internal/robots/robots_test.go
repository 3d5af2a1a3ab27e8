package robots

import (
	"errors"
	"fmt"
	"net"
	"syscall"
	"testing"
	"time"
)

// The tries of an unavailable robots.txt back off from RetryFirst, doubling up to the retry delay;
// without an earlier copy the last try falls at the limit, and the failure after it trips the
// breaker; with one, the copy applies and nothing trips.
func TestFailBacksOffThenTrips(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	const retry, limit = 10 * time.Second, 20 * time.Second
	var prev *Entry
	at := t0
	for _, want := range []struct {
		wait    time.Duration
		tripped bool
	}{{1 * time.Second, false}, {2 * time.Second, false}, {4 * time.Second, false}, {8 * time.Second, false}, {5 * time.Second, false}, {0, true}} {
		e := &Entry{FetchedAt: at, Status: 503}
		e.Fail(prev, retry, limit)
		if got := e.RetryAt.Sub(at); got != want.wait || e.Tripped != want.tripped || e.Since != t0 || e.Cached != nil {
			t.Fatalf("attempt %d at +%v: next try after %v, tripped %v, since %v; want %v, %v, %v",
				e.Attempt, at.Sub(t0), got, e.Tripped, e.Since, want.wait, want.tripped, t0)
		}
		prev, at = e, e.RetryAt
	}

	read := &Entry{FetchedAt: t0, Status: 200}
	e := &Entry{FetchedAt: t0.Add(time.Hour), Status: 503}
	e.Fail(read, retry, limit)
	if e.Cached != read || e.Tripped || e.RetryAt != e.FetchedAt.Add(RetryFirst) || e.Rules() != read {
		t.Errorf("a failure after a read: cached %v, tripped %v, next try %v; want the read, false, %v", e.Cached, e.Tripped, e.RetryAt, e.FetchedAt.Add(RetryFirst))
	}
}

func TestUnreachable(t *testing.T) {
	for _, c := range []struct {
		err  error
		want bool
	}{
		{&net.DNSError{Err: "no such host", IsNotFound: true}, true},
		{&net.DNSError{Err: "timeout", IsTimeout: true}, false},
		{fmt.Errorf("dial: %w", syscall.ECONNREFUSED), true},
		{syscall.EHOSTUNREACH, true},
		{errors.New("EOF"), false},
		{nil, false},
	} {
		if got := Unreachable(c.err); got != c.want {
			t.Errorf("Unreachable(%v) = %v, want %v", c.err, got, c.want)
		}
	}
}

func TestShareable(t *testing.T) {
	for _, c := range []struct {
		status int
		err    error
		want   bool
	}{{200, nil, true}, {301, nil, true}, {404, nil, true}, {429, nil, false}, {503, nil, false}, {200, errors.New("reset"), false}} {
		if got := Shareable(c.status, c.err); got != c.want {
			t.Errorf("Shareable(%d, %v) = %v, want %v", c.status, c.err, got, c.want)
		}
	}
}

// Evicted hosts keep their rules up to IdleHosts of them, but for a host that came back; rules due
// to be read again leave at once.
func TestHostsEvicted(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	const ttl = 24 * time.Hour
	var c Cache
	c.Init()
	keys := make([]string, IdleHosts+2)
	for i := range keys {
		keys[i] = fmt.Sprintf("h%d", i)
		origin := "http://" + keys[i]
		c.byKey[keys[i]] = []string{origin}
		c.m[origin] = &Entry{Key: keys[i], FetchedAt: t0, Status: 200}
	}
	back := func(key string) bool { return key == "h1" }
	c.HostsEvicted(keys, t0.Add(time.Hour), ttl, back)
	if origins, byKey, idle := c.Sizes(); origins != IdleHosts+1 || byKey != IdleHosts+1 || idle != IdleHosts {
		t.Errorf("after evicting %d hosts: %d origins, %d keys, %d idle; want %d, %d, %d", len(keys), origins, byKey, idle, IdleHosts+1, IdleHosts+1, IdleHosts)
	}
	if c.Lookup("http://h0") != nil || c.Lookup("http://h1") == nil {
		t.Errorf("h0 (evicted first) kept, or h1 (back) forgotten")
	}
	c.HostsEvicted([]string{"h1"}, t0.Add(ttl), ttl, func(string) bool { return false })
	if origins, _, idle := c.Sizes(); origins != 0 || idle != 0 {
		t.Errorf("rules due to be read again: %d origins, %d idle kept, want none", origins, idle)
	}
}

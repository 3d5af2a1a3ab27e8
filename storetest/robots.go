package storetest

import (
	"bytes"
	"context"
	"testing"
	"time"
)

// RobotsStore is a store that shares robots.txt reads among the pacers using it: the methods the
// pacer looks for on its store, so that a fleet reads each origin's robots.txt once per expiry.
type RobotsStore interface {
	LoadRobots(ctx context.Context, origin string) (status int, body []byte, fetchedAt time.Time, err error)
	SaveRobots(ctx context.Context, origin string, status int, body []byte, fetchedAt time.Time, ttl time.Duration) error
	ClaimRobots(ctx context.Context, origin, token string, ttl time.Duration) (bool, error)
	ReleaseRobots(ctx context.Context, origin, token string) error
}

// RunRobots runs the conformance tests of shared robots.txt reads against fresh stores made by
// newStore. Expiry is checked by waiting past it (150 ms, three times the time to live): the stores
// keep time by the clock.
func RunRobots(t *testing.T, newStore func(t *testing.T) RobotsStore) {
	ctx := context.Background()
	const origin = "https://a.test:8443"
	body := []byte("User-agent: *\r\nCrawl-delay: 2\n\x00\xff")
	t.Run("RoundTrip", func(t *testing.T) {
		s := newStore(t)
		if status, _, _, err := s.LoadRobots(ctx, origin); status != 0 || err != nil {
			t.Fatalf("LoadRobots of an unknown origin = status %d, err %v; want 0, nil", status, err)
		}
		at := time.Now().Truncate(time.Microsecond)
		if err := s.SaveRobots(ctx, origin, 200, body, at, time.Hour); err != nil {
			t.Fatal(err)
		}
		status, got, fetchedAt, err := s.LoadRobots(ctx, origin)
		if status != 200 || !bytes.Equal(got, body) || !fetchedAt.Equal(at) || err != nil {
			t.Errorf("LoadRobots = %d %q read at %v, err %v; want 200 %q read at %v", status, got, fetchedAt, err, body, at)
		}
		if status, _, _, _ := s.LoadRobots(ctx, "http://a.test:8443"); status != 0 {
			t.Error("another origin of the host found the read: reads are per origin")
		}
		if err := s.SaveRobots(ctx, origin, 404, nil, at, time.Hour); err != nil {
			t.Fatal(err)
		}
		if status, got, _, err := s.LoadRobots(ctx, origin); status != 404 || len(got) != 0 || err != nil {
			t.Errorf("after a 404 replaced it, LoadRobots = %d %q, err %v; want 404 and no body", status, got, err)
		}
	})
	t.Run("Expiry", func(t *testing.T) {
		s := newStore(t)
		if err := s.SaveRobots(ctx, origin, 200, body, time.Now(), 50*time.Millisecond); err != nil {
			t.Fatal(err)
		}
		time.Sleep(150 * time.Millisecond)
		if status, _, _, err := s.LoadRobots(ctx, origin); status != 0 || err != nil {
			t.Errorf("after its expiry, LoadRobots = status %d, err %v; want 0, nil", status, err)
		}
		if err := s.SaveRobots(ctx, origin, 200, body, time.Now(), time.Hour); err != nil {
			t.Fatal(err)
		}
		if err := s.SaveRobots(ctx, origin, 200, body, time.Now(), 0); err != nil {
			t.Fatal(err)
		}
		if status, _, _, err := s.LoadRobots(ctx, origin); status != 0 || err != nil {
			t.Errorf("after a save with no time to live, LoadRobots = status %d, err %v; want 0, nil", status, err)
		}
	})
	t.Run("Claim", func(t *testing.T) {
		s := newStore(t)
		claim := func(token string, ttl time.Duration) bool {
			t.Helper()
			ok, err := s.ClaimRobots(ctx, origin, token, ttl)
			if err != nil {
				t.Fatal(err)
			}
			return ok
		}
		if !claim("a", time.Hour) {
			t.Fatal("the first claim was refused")
		}
		if claim("b", time.Hour) {
			t.Error("a second claim was granted while the first holds")
		}
		if err := s.ReleaseRobots(ctx, origin, "b"); err != nil {
			t.Fatal(err)
		}
		if claim("b", time.Hour) {
			t.Error("another token's release ended the claim")
		}
		if err := s.ReleaseRobots(ctx, origin, "a"); err != nil {
			t.Fatal(err)
		}
		if !claim("b", time.Hour) {
			t.Error("the claim was refused after its holder released it")
		}
		if err := s.SaveRobots(ctx, origin, 200, body, time.Now(), time.Hour); err != nil {
			t.Fatal(err)
		}
		if !claim("c", 50*time.Millisecond) {
			t.Error("the claim was refused after the read was saved")
		}
		time.Sleep(150 * time.Millisecond)
		if !claim("d", time.Hour) {
			t.Error("the claim was refused after the last one ran out")
		}
	})
}

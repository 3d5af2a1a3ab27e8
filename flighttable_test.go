package ext

import (
	"net/url"
	"testing"
)

// A flight is taken once: take returns what store put under that key, then nil; keys that share a
// shard (IDs 32 apart) keep their own flights.
func TestFlightTableTakesOnce(t *testing.T) {
	var ids flightTable[uint32]
	ids.index = byRequestID
	a, b := &flight{}, &flight{}
	ids.store(1, a)
	ids.store(1+flightShards, b)
	if got := ids.take(1); got != a {
		t.Errorf("take(1) = %p, want the flight stored under 1 (%p)", got, a)
	}
	if got := ids.take(1); got != nil {
		t.Errorf("a second take(1) = %p, want nil", got)
	}
	if got := ids.take(1 + flightShards); got != b {
		t.Errorf("take(%d) = %p, want its own flight (%p)", 1+flightShards, got, b)
	}
	var urls flightTable[*url.URL]
	urls.index = byURL
	u, v := &url.URL{}, &url.URL{}
	urls.store(u, a)
	if urls.take(v) != nil || urls.take(u) != a {
		t.Error("a URL's flight is found by that URL's identity only")
	}
}

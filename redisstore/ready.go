package redisstore

import (
	"context"
	"fmt"
	"time"
)

// readyPoll is how often Ready asks a server that does not answer yet.
const readyPoll = 100 * time.Millisecond

// Ready waits until the store answers and admits departures: the server reachable (asked every 100 ms),
// its epoch read, and the grace that follows a loss of its state over (see CheckLost). A fleet starting
// on a store that lost nothing needs no wait, and a pacer waits for the store on its own; Ready is for
// a program that wants to know, before it starts crawling, that Redis is there (a member started
// before its Redis, say). It returns ctx's error, wrapped, when ctx ends first.
func (s *Store) Ready(ctx context.Context) error {
	for {
		_, err := s.CheckLost(ctx)
		if err == nil {
			break
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("redisstore: ready: %w (last: %v)", context.Cause(ctx), err)
		case <-time.After(readyPoll):
		}
	}
	nb := s.notBefore.Load()
	if nb == nil {
		return nil
	}
	end, err := parseInt(*nb, 64)
	if err != nil {
		return nil
	}
	now, err := s.c.Time(ctx).Result()
	if err != nil {
		return wrapErr(err, "ready: read the server's clock")
	}
	if wait := time.Duration(end - now.UnixNano()); wait > 0 {
		t := time.NewTimer(wait)
		defer t.Stop()
		select {
		case <-ctx.Done():
			return fmt.Errorf("redisstore: ready: %w", context.Cause(ctx))
		case <-t.C:
		}
	}
	return nil
}

package redisstore

import (
	"context"
	"errors"
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
)

// The write-behind batch. FrontierDone and DepartedAtAdmission only buffer what they write: it goes to
// Redis ahead of the Store's next command, in that command's pipeline (a round trip that happens
// anyway), or batchLinger after it was buffered when nothing else goes, and before Close returns.
// Every command of the Store waits for a flush under way before it is sent, so what was buffered
// before it reaches the server before it: a host's done requests before its next take, lease or
// release, a host's pending departure's end before this Store's next admission of the host. A flush
// that fails keeps what it carried for the next one.

// batchLinger is how long a write waits at most for a command to carry it: well under a page's
// interval (a Store pacing a leased host without the lease waits that much longer for a pending
// departure) and under the 250 ms a crawl's measure gives an answered page to be marked done. 20 ms
// carried about 1.9 round trips a URL, 60 ms about 1.75 (queuebench -fleet 3).
const batchLinger = 60 * time.Millisecond

// batchMax bounds the writes buffered: beyond it (flushes failing), a write is flushed at once, and
// returns the error when that fails, keeping nothing more.
const batchMax = 4096

// flushTimeout bounds a flush of the linger timer or of Close.
const flushTimeout = 2 * time.Second

// batch is a Store's buffered writes.
type batch struct {
	mu      sync.Mutex
	dones   map[string][]int64   // host → IDs done (FrontierDone)
	departs map[string]time.Time // host → when its pending departure's end was first buffered (DepartedAtAdmission)
	n       int                  // IDs and hosts buffered
	err     error                // why the last flush failed (what it carried is buffered again); nil once one succeeds
	flight  *flight              // the flush under way, nil for none
	timer   *time.Timer          // the linger's (time.AfterFunc), nil until first armed
	linger  time.Duration        // 0: batchLinger (the tests set it)
	armed   bool
	closed  bool // Close began: every write is flushed at once
	// leased: hosts whose last departure admitted here was under a frontier's lease (FrontierAdmit),
	// and false for one admitted without (Admit), until DepartedAtAdmission or Departed reads it: only a
	// leased departure's end is written behind (see Store.DepartedAtAdmission).
	leased map[string]bool
}

// admitted notes that a departure to host was admitted here, under a lease or not.
func (b *batch) admitted(host string, leased bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.leased == nil {
		b.leased = map[string]bool{}
	}
	b.leased[host] = leased
}

// leasedDeparture reports whether host's departure admitted here was under a lease, and forgets it.
func (b *batch) leasedDeparture(host string) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	leased := b.leased[host]
	delete(b.leased, host)
	return leased
}

// flight is one flush: the writes it took from the batch, the commands carrying them, and done, closed
// when it ended.
type flight struct {
	dones    map[string][]int64
	departs  map[string]time.Time
	done     chan struct{}
	doneCmds []*redis.Cmd // one a shard
	doneOf   [][]string   // the hosts of each of doneCmds
	hosts    []string     // the hosts of hdels
	hdels    []*redis.IntCmd
}

// buffer adds a write with add (which returns how many items it added), arms the linger, and returns
// the last flush's error while what it carried waits. A full batch is flushed first.
func (s *Store) buffer(ctx context.Context, add func(b *batch) int) error {
	b := &s.batch
	b.mu.Lock()
	full := b.n >= batchMax
	b.mu.Unlock()
	if full {
		if err := s.flush(ctx); err != nil {
			return err
		}
	}
	b.mu.Lock()
	b.n += add(b)
	err, closed := b.err, b.closed
	if !closed {
		s.armLocked()
	}
	b.mu.Unlock()
	if closed {
		return s.flush(ctx)
	}
	return err
}

// armLocked starts the linger timer, unless it runs.
func (s *Store) armLocked() {
	b := &s.batch
	if b.armed {
		return
	}
	b.armed = true
	d := b.linger
	if d == 0 {
		d = batchLinger
	}
	if b.timer == nil {
		b.timer = time.AfterFunc(d, s.lingerFlush)
		return
	}
	b.timer.Reset(d)
}

// lingerFlush is the linger timer's: it flushes the batch.
func (s *Store) lingerFlush() {
	b := &s.batch
	b.mu.Lock()
	b.armed = false
	closed := b.closed
	b.mu.Unlock()
	if closed {
		return // Close flushes
	}
	ctx, cancel := context.WithTimeout(context.Background(), flushTimeout)
	defer cancel()
	_ = s.flush(ctx)
}

// flush sends what is buffered, alone, and returns what failed.
func (s *Store) flush(ctx context.Context) error {
	_, err := s.pipelined(ctx, nil)
	return err
}

// begin waits for the flush under way, then takes what is buffered as a new one (nil when nothing is).
func (b *batch) begin(ctx context.Context) (*flight, error) {
	for {
		b.mu.Lock()
		under := b.flight
		if under == nil {
			f := b.takeLocked()
			b.flight = f
			b.mu.Unlock()
			return f, nil
		}
		b.mu.Unlock()
		select {
		case <-under.done:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
}

// takeLocked empties the batch into a flight, nil when empty; the linger stops.
func (b *batch) takeLocked() *flight {
	if b.n == 0 {
		return nil
	}
	f := &flight{dones: b.dones, departs: b.departs, done: make(chan struct{})}
	b.dones, b.departs, b.n = nil, nil, 0
	if b.armed && b.timer.Stop() {
		b.armed = false
	}
	return f
}

// queue puts f's writes in p: a done script a shard (every host of the shard in one run), an HDEL of
// each host's pending departure (and a PEXPIRE with WithTTL). They are separate commands, as each
// touches one slot.
func (s *Store) queue(ctx context.Context, f *flight, p redis.Pipeliner) {
	f.doneCmds, f.doneOf = s.queueDones(ctx, p, f.dones, frontierDoneScript.EvalSha)
	for _, host := range slices.Sorted(maps.Keys(f.departs)) {
		f.hosts = append(f.hosts, host)
		f.hdels = append(f.hdels, s.queueEndPending(ctx, p, host))
	}
}

// queueEndPending puts in p the end of host's pending departure: an HDEL, and a PEXPIRE with WithTTL.
func (s *Store) queueEndPending(ctx context.Context, p redis.Pipeliner, host string) *redis.IntCmd {
	key := s.hostKey(host)
	hdel := p.HDel(ctx, key, "pending", "pending_by")
	if ttl := s.ttlMS(); ttl > 0 {
		p.PExpire(ctx, key, time.Duration(ttl)*time.Millisecond)
	}
	return hdel
}

// queueDones puts in p a done script run a shard (by run: EvalSha, or Eval), and returns them with the
// hosts of each.
func (s *Store) queueDones(ctx context.Context, p redis.Pipeliner, dones map[string][]int64,
	run func(context.Context, redis.Scripter, []string, ...any) *redis.Cmd) ([]*redis.Cmd, [][]string) {
	byShard := map[int][]string{}
	for host := range dones {
		sh := s.shardOf(host)
		byShard[sh] = append(byShard[sh], host)
	}
	var cmds []*redis.Cmd
	var of [][]string
	for _, sh := range slices.Sorted(maps.Keys(byShard)) {
		_, count, _ := s.shardKeys(sh)
		hosts := byShard[sh]
		slices.Sort(hosts)
		args := []any{s.frontierBase(sh)}
		for _, h := range hosts {
			args = append(args, h, len(dones[h]))
			for _, id := range dones[h] {
				args = append(args, id)
			}
		}
		cmds = append(cmds, run(ctx, p, []string{count}, args...))
		of = append(of, hosts)
	}
	return cmds, of
}

// end ends flight f (nil: none) after its pipeline: done scripts the server's script cache had lost
// are sent again at once, as EVAL; the writes that failed for want of the server go back to the batch,
// those the server refused are dropped. It returns the first failure.
func (s *Store) end(ctx context.Context, f *flight) error {
	if f == nil {
		return nil
	}
	var err error
	keep := func(e error) bool {
		if e == nil {
			return false
		}
		if err == nil {
			err = e
		}
		_, refused := errors.AsType[redis.Error](e)
		return !refused
	}
	lost := map[string][]int64{}
	for i, c := range f.doneCmds {
		if redis.HasErrorPrefix(c.Err(), "NOSCRIPT") {
			for _, h := range f.doneOf[i] {
				lost[h] = f.dones[h]
			}
		}
	}
	doneCmds, doneOf := f.doneCmds, f.doneOf
	if len(lost) > 0 {
		var again []*redis.Cmd
		var againOf [][]string
		_, _ = s.c.Pipelined(ctx, func(p redis.Pipeliner) error {
			again, againOf = s.queueDones(ctx, p, lost, frontierDoneScript.Eval)
			return nil
		})
		doneCmds, doneOf = append(doneCmds, again...), append(doneOf, againOf...)
	}
	kept := &flight{dones: map[string][]int64{}, departs: map[string]time.Time{}}
	for i, c := range doneCmds {
		if !redis.HasErrorPrefix(c.Err(), "NOSCRIPT") && keep(c.Err()) {
			for _, h := range doneOf[i] {
				kept.dones[h] = f.dones[h]
			}
		}
	}
	for i, c := range f.hdels {
		if at := f.departs[f.hosts[i]]; keep(c.Err()) && time.Since(at) < pendingBound { // later, the departure is no longer pending
			kept.departs[f.hosts[i]] = at
		}
	}
	b := &s.batch
	b.mu.Lock()
	for h, ids := range kept.dones {
		b.n += addIDs(b, h, ids)
	}
	for h, at := range kept.departs {
		b.n += addDepart(b, h, at)
	}
	b.err = err
	b.flight = nil
	close(f.done)
	b.mu.Unlock()
	return err
}

// addIDs buffers host's done IDs, each once, and returns how many were new.
func addIDs(b *batch, host string, ids []int64) int {
	if b.dones == nil {
		b.dones = map[string][]int64{}
	}
	n := 0
	for _, id := range ids {
		if !slices.Contains(b.dones[host], id) {
			b.dones[host] = append(b.dones[host], id)
			n++
		}
	}
	return n
}

// addDepart buffers the end of host's pending departure, first buffered at at, and returns 1 when it
// was not buffered yet.
func addDepart(b *batch, host string, at time.Time) int {
	if b.departs == nil {
		b.departs = map[string]time.Time{}
	}
	if first, ok := b.departs[host]; ok {
		if at.Before(first) {
			b.departs[host] = at
		}
		return 0
	}
	b.departs[host] = at
	return 1
}

// pipelined runs fn's commands in one pipeline after what is buffered (waiting first for a flush
// under way), and returns fn's commands and the first of their errors, as redis's Pipelined does. A
// nil fn flushes: it returns the buffered writes' error.
func (s *Store) pipelined(ctx context.Context, fn func(p redis.Pipeliner)) ([]redis.Cmder, error) {
	p := s.c.Pipeline()
	f, err := s.batch.begin(ctx)
	if err != nil {
		if fn == nil {
			return nil, err
		}
		fn(p)
		cmds := p.Cmds()
		for _, c := range cmds {
			c.SetErr(err)
		}
		return cmds, err
	}
	if f != nil {
		s.queue(ctx, f, p)
	}
	carried := p.Len()
	if fn != nil {
		fn(p)
	}
	var all []redis.Cmder
	if p.Len() > 0 {
		all, _ = p.Exec(ctx)
	}
	ferr := s.end(ctx, f)
	if fn == nil {
		return nil, ferr
	}
	cmds := all[carried:]
	for _, c := range cmds {
		if err := c.Err(); err != nil {
			return cmds, err
		}
	}
	return cmds, nil
}

// run is script.Run (EVALSHA, then EVAL when the server lost its script cache) after what is
// buffered, in one pipeline.
func (s *Store) run(ctx context.Context, script *redis.Script, keys []string, args ...any) *redis.Cmd {
	var c *redis.Cmd
	_, _ = s.pipelined(ctx, func(p redis.Pipeliner) { c = script.EvalSha(ctx, p, keys, args...) })
	if redis.HasErrorPrefix(c.Err(), "NOSCRIPT") {
		_, _ = s.pipelined(ctx, func(p redis.Pipeliner) { c = script.Eval(ctx, p, keys, args...) })
	}
	return c
}

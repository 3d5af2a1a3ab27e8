package redisstore

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/collypace/ext"
	"github.com/redis/go-redis/v9"
)

// DefaultPrefix starts the name of every key a Store writes, unless WithPrefix says otherwise.
const DefaultPrefix = "collypace:"

// Store is an ext.SharedStore in Redis. It is safe for concurrent use, by goroutines and by processes
// sharing the server. Its zero value is not usable: make one with New or Open.
type Store struct {
	c      redis.UniversalClient
	prefix string
	owned  bool // the client was made by Open: Close closes it

	closeOnce sync.Once
	closeErr  error // set by closeOnce
}

var _ ext.SharedStore = (*Store)(nil)

// Option configures a Store made by New or Open.
type Option func(*Store)

// WithPrefix sets the string every key name starts with (default DefaultPrefix), so that several
// fleets, or tests, can share one Redis database.
func WithPrefix(prefix string) Option {
	return func(s *Store) { s.prefix = prefix }
}

// New returns a Store using client, which may be a single-node, sentinel or cluster client: every
// atomic step touches one key. The caller keeps ownership of client: Close does not close it.
func New(client redis.UniversalClient, opts ...Option) *Store {
	s := &Store{c: client, prefix: DefaultPrefix}
	for _, o := range opts {
		o(s)
	}
	return s
}

// openTimeout bounds Open's PING.
const openTimeout = 5 * time.Second

// Open connects to the Redis server at addr and PINGs it once. addr is "host:port", "unix:///path/to.sock"
// or a redis:// or rediss:// URL (with a password, a database number or client options such as
// dial_timeout). The Store owns the client: Close closes it.
//
// The client fails fast, so that a pacer falls back to local pacing at once when Redis is gone:
// a call dials once (go-redis's default: 5 times), within 2 s (5 s) unless the URL sets dial_timeout,
// and is retried once (3 times) unless it sets max_retries: enough to replace a connection that a
// restarted server has closed. go-redis
// reports failed dials through its own logger (redis.SetLogger).
func Open(addr string, opts ...Option) (*Store, error) {
	var o *redis.Options
	if strings.Contains(addr, "://") {
		var err error
		if o, err = redis.ParseURL(addr); err != nil {
			return nil, fmt.Errorf("redisstore: open %s: %w", redact(addr), err)
		}
	} else {
		o = &redis.Options{Addr: addr}
	}
	if o.DialerRetries == 0 {
		o.DialerRetries = 1
	}
	if o.DialTimeout == 0 {
		o.DialTimeout = 2 * time.Second
	}
	if o.MaxRetries == 0 {
		o.MaxRetries = 1
	}
	c := redis.NewClient(o)
	ctx, cancel := context.WithTimeout(context.Background(), openTimeout)
	defer cancel()
	if err := c.Ping(ctx).Err(); err != nil {
		_ = c.Close()
		return nil, fmt.Errorf("redisstore: open %s: ping: %w", redact(addr), err)
	}
	s := New(c, opts...)
	s.owned = true
	return s, nil
}

// redact hides the password of a URL address.
func redact(addr string) string {
	if u, err := url.Parse(addr); err == nil && u.User != nil {
		return u.Redacted()
	}
	return addr
}

func (s *Store) hostKey(host string) string { return s.prefix + "host:" + host }
func (s *Store) deferredKey() string        { return s.prefix + "deferred" }
func (s *Store) deferredSeqKey() string     { return s.prefix + "deferred:seq" }

// wrapErr prefixes err with what the store was doing, and makes the server's CORRUPT (from a script)
// and WRONGTYPE errors wrap ext.ErrCorruptState.
func wrapErr(err error, format string, args ...any) error {
	what := fmt.Sprintf(format, args...)
	if redis.HasErrorPrefix(err, "CORRUPT") || redis.HasErrorPrefix(err, "WRONGTYPE") {
		return fmt.Errorf("redisstore: %s: %w (%w)", what, ext.ErrCorruptState, err)
	}
	return fmt.Errorf("redisstore: %s: %w", what, err)
}

// LoadHost implements ext.Store. A key of another type than a hash, a missing field or a field that
// does not parse returns an error wrapping ext.ErrCorruptState. A host that was only ever reserved
// (ReserveDeparture before any SaveHosts) has no saved state: ok is false.
func (s *Store) LoadHost(ctx context.Context, host string) (ext.HostState, bool, error) {
	m, err := s.c.HGetAll(ctx, s.hostKey(host)).Result()
	if err != nil {
		return ext.HostState{}, false, wrapErr(err, "load host %q", host)
	}
	return decodeHostHash(host, m)
}

// SaveHosts implements ext.Store: one script a host, applying the merge rule atomically, the whole
// batch in one pipeline (one round trip). A record that cannot be read, even a key of another type,
// is overwritten.
func (s *Store) SaveHosts(ctx context.Context, states []ext.HostState) error {
	if len(states) == 0 {
		return nil
	}
	run := func() ([]redis.Cmder, error) {
		return s.c.Pipelined(ctx, func(p redis.Pipeliner) error {
			for _, st := range states {
				saveScript.EvalSha(ctx, p, []string{s.hostKey(st.Host)}, hostArgs(st)...)
			}
			return nil
		})
	}
	cmds, err := run()
	if noScript(cmds) {
		// The server lost its script cache (a restart or SCRIPT FLUSH): load the script and save the
		// batch again, which the merge rule makes harmless for the hosts that were saved.
		if err = saveScript.Load(ctx, s.c).Err(); err == nil {
			cmds, err = run()
		}
	}
	if err != nil {
		for i, c := range cmds { // a server's answer about one host, such as CORRUPT
			if rerr, ok := errors.AsType[redis.Error](c.Err()); ok {
				return wrapErr(rerr, "save host %q", states[i].Host)
			}
		}
		return wrapErr(err, "save %d host states", len(states))
	}
	return nil
}

func noScript(cmds []redis.Cmder) bool {
	for _, c := range cmds {
		if redis.HasErrorPrefix(c.Err(), "NOSCRIPT") {
			return true
		}
	}
	return false
}

// ReserveDeparture implements ext.SharedStore in one script run (EVALSHA, one round trip). The script
// computes exactly, to the nanosecond, on (seconds, nanoseconds) pairs; times are clamped to the years
// 1678 to 2262 that an int64 of unix nanoseconds spans, and a negative interval counts as 0.
// now must not be the zero time. A corrupt next_departure, hold_until or adaptive_delay, or a key of
// another type, returns an error wrapping ext.ErrCorruptState until a SaveHosts overwrites it.
func (s *Store) ReserveDeparture(ctx context.Context, host string, now time.Time, interval time.Duration) (time.Time, error) {
	if now.IsZero() {
		return time.Time{}, fmt.Errorf("redisstore: reserve departure for host %q: zero now", host)
	}
	if now.Before(minTime) { // clamp to what an int64 of nanoseconds can name
		now = minTime
	} else if now.After(maxTime) {
		now = maxTime
	}
	interval = max(interval, 0)
	res, err := reserveScript.Run(ctx, s.c, []string{s.hostKey(host)},
		now.Unix(), now.Nanosecond(), int64(interval/time.Second), int64(interval%time.Second)).Text()
	if err != nil {
		return time.Time{}, wrapErr(err, "reserve departure for host %q", host)
	}
	at, err := decodeTime(res)
	if err != nil {
		return time.Time{}, fmt.Errorf("redisstore: reserve departure for host %q: script returned %q: %w", host, res, ext.ErrCorruptState)
	}
	return at, nil
}

// Close implements ext.Store. It closes the client when Open made it; a client given to New stays
// open. Close is idempotent.
func (s *Store) Close() error {
	s.closeOnce.Do(func() {
		if s.owned {
			if err := s.c.Close(); err != nil && !errors.Is(err, redis.ErrClosed) {
				s.closeErr = fmt.Errorf("redisstore: close: %w", err)
			}
		}
	})
	return s.closeErr
}

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
	ttl    time.Duration // host keys expire this long after their last write; 0: never
	owned  bool          // the client was made by Open: Close closes it

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

// WithTTL makes every host key expire d after its last write (each admitted departure and each saved
// state refreshes it), so that a fleet crawling millions of hosts does not grow Redis forever. Choose d
// well above the longest hold and interval you expect (a day, say): an expired host starts afresh, as a
// host never seen. The default, 0, keeps keys forever. Deferred requests never expire.
func WithTTL(d time.Duration) Option {
	return func(s *Store) { s.ttl = max(d, 0) }
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
// does not parse returns an error wrapping ext.ErrCorruptState. A host that was only ever admitted
// (Admit before any SaveHosts) has no saved state: ok is false.
func (s *Store) LoadHost(ctx context.Context, host string) (ext.StoredHost, bool, error) {
	m, err := s.c.HGetAll(ctx, s.hostKey(host)).Result()
	if err != nil {
		return ext.StoredHost{}, false, wrapErr(err, "load host %q", host)
	}
	return decodeHostHash(host, m)
}

// SaveHosts implements ext.Store: one script a host, applying the merge rule atomically, the whole
// batch in one pipeline (one round trip). A record that cannot be read, even a key of another type,
// is overwritten.
func (s *Store) SaveHosts(ctx context.Context, states []ext.StoredHost) error {
	if len(states) == 0 {
		return nil
	}
	run := func() ([]redis.Cmder, error) {
		return s.c.Pipelined(ctx, func(p redis.Pipeliner) error {
			now := time.Now()
			for _, st := range states {
				left := int64(0) // the hold's time left, which the script puts on the server's clock
				if st.HoldUntil.After(now) {
					left = int64(st.HoldUntil.Sub(now))
				}
				saveScript.EvalSha(ctx, p, []string{s.hostKey(st.Host)}, append(hostArgs(st), left, s.ttlMS())...)
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

// Admit implements ext.SharedStore in one script run (EVALSHA, one round trip) on the server's clock
// (TIME inside the script), exact to the nanosecond. It records nothing unless the departure is
// admitted, so a process that crashes or gives up while waiting leaves nothing behind. A negative gap
// counts as 0. A corrupt last_departure, hold_srv or adaptive_delay, or a key of another type, returns
// an error wrapping ext.ErrCorruptState until a SaveHosts overwrites it.
func (s *Store) Admit(ctx context.Context, host string, gap time.Duration) (ext.Admission, error) {
	a, _, err := s.admit(ctx, host, gap)
	return a, err
}

// admit is Admit, also returning the server's now at the decision.
func (s *Store) admit(ctx context.Context, host string, gap time.Duration) (ext.Admission, time.Time, error) {
	gap = max(gap, 0)
	res, err := admitScript.Run(ctx, s.c, []string{s.hostKey(host)},
		int64(gap/time.Second), int64(gap%time.Second), s.ttlMS()).Slice()
	if err != nil {
		return ext.Admission{}, time.Time{}, wrapErr(err, "admit a departure to host %q", host)
	}
	bad := func() (ext.Admission, time.Time, error) {
		return ext.Admission{}, time.Time{}, fmt.Errorf("redisstore: admit a departure to host %q: script returned %v: %w", host, res, ext.ErrCorruptState)
	}
	if len(res) != 5 {
		return bad()
	}
	text := make([]string, 4)
	for i := range text {
		text[i], _ = res[i+1].(string)
	}
	ok, _ := res[0].(int64)
	wait, werr := parseInt(text[0], 64)
	now, nerr := decodeTime(text[1])
	ad, aerr := optionalDuration(text[2])
	kl, kerr := optionalDuration(text[3])
	if werr != nil || nerr != nil || aerr != nil || kerr != nil || wait < 0 {
		return bad()
	}
	return ext.Admission{OK: ok == 1, Wait: time.Duration(wait), AdaptiveDelay: ad, KnownLimit: kl}, now, nil
}

// optionalDuration decodes a stored duration, "" for none (0).
func optionalDuration(s string) (time.Duration, error) {
	if s == "" {
		return 0, nil
	}
	n, err := parseInt(s, 64)
	return time.Duration(n), err
}

// Departed implements ext.SharedStore: the host's last departure becomes at least ago before the
// server's now.
func (s *Store) Departed(ctx context.Context, host string, ago time.Duration) error {
	if err := departedScript.Run(ctx, s.c, []string{s.hostKey(host)}, int64(max(ago, 0)), s.ttlMS()).Err(); err != nil {
		return wrapErr(err, "record the departure of host %q", host)
	}
	return nil
}

// ttlMS is the host keys' TTL in milliseconds, 0 for none.
func (s *Store) ttlMS() int64 {
	if s.ttl <= 0 {
		return 0
	}
	return max(s.ttl.Milliseconds(), 1)
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

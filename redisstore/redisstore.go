package redisstore

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"math"
	"net"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/collypace/ext"
	"github.com/collypace/ext/audit"
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

	invalid []error // option values set aside (see Option)
	token   string  // names this Store's pending departures (admitScript)

	frontier frontierConfig // the shared frontier's options (frontier.go)

	aliveAt   atomic.Int64           // when this Store last marked itself alive (alive.go), unix ns by the local clock
	epoch     atomic.Pointer[string] // the store's epoch as last seen (epochScript); nil before the first look
	notBefore atomic.Pointer[string] // after a loss: nothing admitted before this server instant (unix ns)

	acksMu sync.Mutex
	acks   []pendingAck // acknowledgements of takes that failed, sent again before the next take

	batch batch // writes buffered for the next round trip (batch.go)

	closeOnce sync.Once
	closeErr  error // set by closeOnce
}

var _ ext.SharedStore = (*Store)(nil)

// Option configures a Store made by New, NewErr or Open. Invalid values follow the root package's rule
// (see ext.Option): NewErr and Open return them as an error wrapping ext.ErrInvalidOption; New uses
// the default instead, and the pacer given the Store (ext.WithStore) reports each one as an
// option_invalid audit event and to its WithAlert function. Each option says which values are valid.
type Option func(*Store)

// WithPrefix sets the string every key name starts with (default DefaultPrefix), so that several
// fleets, or tests, can share one Redis database. It must not be empty (the keys would mingle with
// whatever else the database holds) nor contain control characters.
func WithPrefix(prefix string) Option {
	return func(s *Store) {
		if prefix == "" || strings.IndexFunc(prefix, func(r rune) bool { return r < 0x20 || r == 0x7f }) >= 0 {
			s.reject("WithPrefix", fmt.Sprintf("%q", prefix), "empty or with control characters")
			return
		}
		s.prefix = prefix
	}
}

// WithTTL makes every host key expire d after its last write (each admitted departure and each saved
// state refreshes it), so that a fleet crawling millions of hosts does not grow Redis forever. Choose d
// well above the longest hold and interval you expect (a day, say): an expired host starts afresh, as a
// host never seen. The default, 0, keeps keys forever; a negative d is invalid. Deferred requests never
// expire.
func WithTTL(d time.Duration) Option {
	return func(s *Store) {
		if d < 0 {
			s.reject("WithTTL", d.String(), "negative")
			return
		}
		s.ttl = d
	}
}

// HostTTL returns how long a host key lasts after its last write (WithTTL; 0: for ever). A pacer on
// the Store reads it: its write-behind leaves out a host's state unchanged since its last write, and
// writes it again before half of this has passed, so that the key never expires while it is active.
func (s *Store) HostTTL() time.Duration { return s.ttl }

// reject sets an option value aside as invalid: the default stays (see Option).
func (s *Store) reject(option, value, why string) {
	s.invalid = append(s.invalid, fmt.Errorf("%w: redisstore.%s(%s): %s", ext.ErrInvalidOption, option, value, why))
}

// InvalidOptions returns the option values New set aside, for the pacer to report (see Option).
func (s *Store) InvalidOptions() []error { return s.invalid }

// New returns a Store using client, which may be a single-node, sentinel or cluster client: every
// atomic step touches one key. The caller keeps ownership of client: Close does not close it. Set
// the client's ContextTimeoutEnabled, as Open does, so that the pacer's time limit on each store call
// (2 s) holds: without it go-redis waits for its own read and write timeouts. Invalid option values
// are replaced by their defaults (see Option).
func New(client redis.UniversalClient, opts ...Option) *Store {
	s := &Store{c: client, prefix: DefaultPrefix, token: newToken()}
	for _, o := range opts {
		o(s)
	}
	return s
}

// NewErr is New, returning the invalid option values as an error wrapping ext.ErrInvalidOption, and
// no Store, instead of using their defaults.
func NewErr(client redis.UniversalClient, opts ...Option) (*Store, error) {
	s := New(client, opts...)
	if len(s.invalid) > 0 {
		return nil, errors.Join(s.invalid...)
	}
	return s, nil
}

// openTimeout bounds Open's PING.
const openTimeout = 5 * time.Second

// Open connects to the Redis server at addr and PINGs it once. addr is what go-redis takes:
// "host:port", a unix socket's path ("/path/to.sock", or "unix:///path/to.sock"), or a redis://,
// rediss:// or unix:// URL (with a password, a database number or client options such as
// dial_timeout). The Store owns the client: Close closes it.
//
// The client fails fast, so that a pacer knows at once that Redis is gone (its departures then wait for
// it): a call dials once (go-redis's default: 5 times), within 2 s (5 s) unless the URL sets
// dial_timeout, and is retried once (3 times) unless it sets max_retries: enough to replace a
// connection that a restarted server has closed. Every call ends by its context's deadline
// (ContextTimeoutEnabled), so the pacer's 2 s limit on a store call holds even while the server is
// paused. Invalid option values are an error wrapping ext.ErrInvalidOption (see Option).
//
// go-redis prints failed dials through a logger that is global to the process (redis.SetLogger) and
// has no per-client setting; Open does not touch it, since it belongs to the program. So that Open's
// failures are returned and never printed, Open first dials the server itself (once, within the dial
// timeout) and hands the address to go-redis only when it answers. While a Store runs, go-redis prints
// a line for each failed dial; the pacer audits the outage itself (store_unavailable), so a program
// may silence go-redis with redis.SetLogger.
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
	o.ContextTimeoutEnabled = true
	probe := New(nil, opts...)
	if len(probe.invalid) > 0 {
		return nil, fmt.Errorf("redisstore: open %s: %w", redact(addr), errors.Join(probe.invalid...))
	}
	ctx, cancel := context.WithTimeout(context.Background(), openTimeout)
	defer cancel()
	if err := reach(ctx, o); err != nil {
		return nil, fmt.Errorf("redisstore: open %s: ping: %w", redact(addr), err)
	}
	c := redis.NewClient(o)
	if err := c.Ping(ctx).Err(); err != nil {
		_ = c.Close()
		return nil, fmt.Errorf("redisstore: open %s: ping: %w", redact(addr), err)
	}
	s := New(c, opts...)
	s.owned = true
	return s, nil
}

// reach dials the server of o once, within its dial timeout, and hangs up: a server that cannot be
// reached is reported without go-redis's pool printing its failed dials.
func reach(ctx context.Context, o *redis.Options) error {
	network := o.Network
	if network == "" { // as go-redis decides: a path is a unix socket
		network = "tcp"
		if strings.HasPrefix(o.Addr, "/") {
			network = "unix"
		}
	}
	if o.Dialer != nil {
		return nil // the program dials its own way
	}
	d := net.Dialer{Timeout: o.DialTimeout}
	conn, err := d.DialContext(ctx, network, o.Addr)
	if err != nil {
		return err
	}
	return conn.Close()
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
func (s *Store) epochKey() string           { return s.prefix + "epoch" }

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
	var get *redis.MapStringStringCmd
	_, _ = s.pipelined(ctx, func(p redis.Pipeliner) { get = p.HGetAll(ctx, s.hostKey(host)) })
	m, err := get.Result()
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
		return s.pipelined(ctx, func(p redis.Pipeliner) {
			now := time.Now()
			for _, st := range states {
				args := append(hostArgs(st), timeLeft(st.HoldUntil, now), s.ttlMS(),
					strconv.FormatInt(int64(st.RateInterval), 10), timeLeft(st.RateUntil, now), encodeTime(st.RateUntil), encodeTime(st.ParkUntil),
					strconv.FormatInt(int64(st.RefusedInterval), 10), strconv.FormatInt(st.ModelVersion, 10), strconv.Itoa(int(st.Noise)))
				saveScript.EvalSha(ctx, p, []string{s.hostKey(st.Host)}, args...)
			}
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

// timeLeft is how long after now t is, in nanoseconds (0 when it is not after now): the script puts
// it on the server's clock.
func timeLeft(t, now time.Time) int64 {
	if t.After(now) {
		return int64(t.Sub(now))
	}
	return 0
}

func noScript(cmds []redis.Cmder) bool {
	for _, c := range cmds {
		if redis.HasErrorPrefix(c.Err(), "NOSCRIPT") {
			return true
		}
	}
	return false
}

// Admit implements ext.SharedStore in one script run (EVALSHA, one round trip, pipelined with a GET of
// the store's epoch) on the server's clock (TIME inside the script), exact to the nanosecond. It
// records nothing unless the departure is admitted, so a process that crashes or gives up while
// waiting leaves nothing behind but, when admitted, a pending departure of at most pendingBound. A
// negative gap counts as 0. A corrupt last_departure, hold_srv or adaptive_delay, or a key of another
// type, returns an error wrapping ext.ErrCorruptState until a SaveHosts overwrites it. When the epoch
// it knew is gone (the server restarted empty), the Admission says Lost and nothing is admitted for
// lostGrace (see CheckLost).
func (s *Store) Admit(ctx context.Context, host string, gap time.Duration) (ext.Admission, error) {
	a, _, err := s.admit(ctx, host, gap, nil)
	return a, err
}

// FrontierAdmit implements ext.Frontier: Admit, with the lease checked in the same script run on the
// host's hash (admitScript), so on a Redis Cluster too. The host's fence, the greatest token presented,
// lives in the hash: a member paused past its lease is refused once the next holder has asked (its
// token is greater), and before that once the lease's end has passed by the server's clock (the
// frontier's shard and the host's hash may be on two nodes of a cluster: their clocks' skew, which NTP
// keeps to milliseconds, is the margin of that second check).
func (s *Store) FrontierAdmit(ctx context.Context, lease ext.Lease, gap time.Duration) (ext.Admission, error) {
	a, _, err := s.admit(ctx, lease.Host, gap, &lease)
	return a, err
}

// pendingBound is how long an admitted departure holds the host for the fleet before its wire instant
// is known (Departed): the local rule's bound on a departure on its way to the wire.
const pendingBound = 30 * time.Second

// lostGrace is how long, after the store is found to have lost its state, nothing is admitted: long
// enough for every process to find the loss (each looks every 200 ms) and write back its holds.
const lostGrace = time.Second

// admit is Admit, also returning the server's now at the decision. A wait for a pending departure of
// a Store that died is ended (endDeadPending), and the departure asked again once.
func (s *Store) admit(ctx context.Context, host string, gap time.Duration, lease *ext.Lease) (ext.Admission, time.Time, error) {
	a, now, by, err := s.admitOnce(ctx, host, gap, lease)
	if err == nil && !a.OK && a.Pending && by != "" && by != s.token && s.endDeadPending(ctx, host, by) {
		a, now, _, err = s.admitOnce(ctx, host, gap, lease)
	}
	if err == nil && a.OK {
		s.batch.admitted(host, lease != nil)
	}
	return a, now, err
}

// admitOnce is one admission: the Admission, the server's now and, for a wait on a pending departure,
// the token of the Store whose departure it is.
func (s *Store) admitOnce(ctx context.Context, host string, gap time.Duration, lease *ext.Lease) (ext.Admission, time.Time, string, error) {
	gap = max(gap, 0)
	notBefore := ""
	if nb := s.notBefore.Load(); nb != nil {
		notBefore = *nb
	}
	token, until := "", ""
	if lease != nil {
		token, until = strconv.FormatInt(lease.Token, 10), strconv.FormatInt(lease.Until.UnixMilli(), 10)
	}
	keys := []string{s.hostKey(host)}
	args := []any{int64(gap / time.Second), int64(gap % time.Second), s.ttlMS(), int64(pendingBound), notBefore, s.token, token, until}
	var epoch *redis.StringCmd
	var res *redis.Cmd
	alive := s.aliveDue()
	run := func() ([]redis.Cmder, error) {
		return s.pipelined(ctx, func(p redis.Pipeliner) {
			if alive {
				s.markAlive(ctx, p)
			}
			epoch = p.Get(ctx, s.epochKey())
			res = admitScript.EvalSha(ctx, p, keys, args...)
		})
	}
	cmds, err := run()
	if noScript(cmds) {
		if err = admitScript.Load(ctx, s.c).Err(); err == nil {
			cmds, err = run()
		}
	}
	_ = cmds
	if err != nil && !errors.Is(err, redis.Nil) {
		if rerr := res.Err(); rerr != nil {
			err = rerr
		}
		return ext.Admission{}, time.Time{}, "", wrapErr(err, "admit a departure to host %q", host)
	}
	if alive {
		s.aliveAt.Store(time.Now().UnixNano())
	}
	a, now, by, err := decodeAdmission(host, res)
	if err != nil {
		return a, now, "", err
	}
	seen, gerr := epoch.Result()
	if known := s.epoch.Load(); gerr == nil && known != nil && *known == seen {
		return a, now, by, nil
	}
	lost, err := s.lookAtEpoch(ctx)
	if err != nil {
		return a, now, by, err
	}
	wait := lostGrace
	if !lost { // the same epoch, perhaps just marked lost by another Store: in its grace?
		nb := s.notBefore.Load()
		if nb == nil {
			return a, now, by, nil
		}
		end, err := parseInt(*nb, 64)
		if err != nil || end <= now.UnixNano() {
			return a, now, by, nil
		}
		wait = time.Duration(end - now.UnixNano())
	}
	if a.OK { // admitted on a store that forgot the holds: not a departure, and not pending
		_ = s.Departed(ctx, host, 0)
	}
	a.OK, a.Lost, a.Wait = false, lost, wait
	return a, now, "", nil
}

// decodeAdmission reads admitScript's answer, and the token of the Store whose pending departure the
// wait is for ("" for none).
func decodeAdmission(host string, cmd *redis.Cmd) (ext.Admission, time.Time, string, error) {
	res, err := cmd.Slice()
	if err != nil {
		return ext.Admission{}, time.Time{}, "", wrapErr(err, "admit a departure to host %q", host)
	}
	bad := func() (ext.Admission, time.Time, string, error) {
		return ext.Admission{}, time.Time{}, "", fmt.Errorf("redisstore: admit a departure to host %q: script returned %v: %w", host, res, ext.ErrCorruptState)
	}
	if len(res) != 19 {
		return bad()
	}
	var pool [4]int64 // mark, before, refused before, refused after
	for i := range pool {
		pool[i], _ = res[15+i].(int64)
		if pool[i] < 0 {
			return bad()
		}
	}
	seq, _ := res[12].(int64)
	sinceText, _ := res[13].(string)
	refusedSeq, _ := res[14].(int64)
	since, serr := optionalDuration(sinceText)
	if serr != nil || seq < 0 || refusedSeq < 0 {
		return bad()
	}
	by, _ := res[8].(string)
	noise, _ := res[9].(int64)
	leaseState, _ := res[10].(int64)
	fence, _ := res[11].(int64)
	text := make([]string, 6) // wait, now, adaptive_delay, known_limit, refused_interval, model_ver
	for i := range text {
		j := i + 1
		if i >= 4 {
			j++ // after pending
		}
		text[i], _ = res[j].(string)
	}
	ok, _ := res[0].(int64)
	pending, _ := res[5].(int64)
	wait, werr := parseInt(text[0], 64)
	now, nerr := decodeTime(text[1])
	ad, aerr := optionalDuration(text[2])
	kl, kerr := optionalDuration(text[3])
	ri, rerr := optionalDuration(text[4])
	mv, verr := optionalDuration(text[5])
	if werr != nil || nerr != nil || aerr != nil || kerr != nil || rerr != nil || verr != nil || wait < 0 {
		return bad()
	}
	if noise < 0 || noise > int64(audit.NoiseRefuted) { // not a verdict this version knows: none
		noise = 0
	}
	return ext.Admission{OK: ok == 1, Wait: time.Duration(wait), AdaptiveDelay: ad, KnownLimit: kl, Pending: pending == 1,
		RefusedInterval: ri, ModelVersion: int64(mv), Noise: audit.NoiseVerdict(noise), LeaseLost: leaseState != 0, Fence: fence,
		Seq: uint64(seq), Since: since, RefusedSeq: uint64(refusedSeq),
		PoolMark: uint64(pool[0]), PoolBefore: count32(pool[1]), PoolBeforeRefused: count32(pool[2]), PoolAfterRefused: count32(pool[3])}, now, by, nil
}

// CheckLost implements ext.SharedStore: the store keeps an epoch key (<prefix>epoch), created by the
// first Store to find it missing; a server restarted empty, or a FLUSHDB, loses it. A Store that knew
// another epoch, or found none where it knew one, reports the loss once, and from then on admits
// nothing until lostGrace after the new epoch began, on the server's clock: the other processes find
// the loss meanwhile (the pacer looks every 200 ms) and write their holds back before anyone departs.
// A Store that never looked adopts the epoch it finds.
func (s *Store) CheckLost(ctx context.Context) (bool, error) {
	var get *redis.StringCmd
	_, err := s.pipelined(ctx, func(p redis.Pipeliner) {
		s.markAlive(ctx, p) // the pacer calls it every 200 ms: this process's heartbeat
		get = p.Get(ctx, s.epochKey())
	})
	if err == nil || errors.Is(err, redis.Nil) {
		s.aliveAt.Store(time.Now().UnixNano())
	}
	seen, err := get.Result()
	if err != nil && !errors.Is(err, redis.Nil) {
		return false, wrapErr(err, "read the epoch")
	}
	if known := s.epoch.Load(); err == nil && known != nil && *known == seen {
		return false, nil
	}
	return s.lookAtEpoch(ctx)
}

// lookAtEpoch reads the epoch, creating it when missing, and reports whether it differs from the one
// this Store knew (the ":lost" mark aside: it is the same epoch). A loss starts the grace: the epoch
// is marked lost (epochScript), and a Store that knew none and finds a lost epoch less than lostGrace
// old (a process joining just after a loss) keeps the grace too. A Store joining a store that lost
// nothing starts at once: the grace fires only after a loss.
func (s *Store) lookAtEpoch(ctx context.Context) (bool, error) {
	knew := ""
	if k := s.epoch.Load(); k != nil {
		knew = *k
	}
	res, err := s.run(ctx, epochScript, []string{s.epochKey()}, newToken(), knew).Slice()
	if err == nil && len(res) != 3 {
		err = fmt.Errorf("script returned %v", res)
	}
	if err != nil {
		return false, wrapErr(err, "read the epoch")
	}
	seen, _ := res[0].(string)
	nowText, _ := res[1].(string)
	s.epoch.Store(&seen)
	lost := knew != "" && epochID(knew) != epochID(seen)
	marked := strings.HasSuffix(seen, epochLostMark)
	if !lost && !marked {
		return false, nil
	}
	bornText, _, _ := strings.Cut(seen, ":")
	born, berr := parseInt(bornText, 64)
	now, nerr := parseInt(nowText, 64)
	if berr != nil || nerr != nil {
		return lost, nil
	}
	if lost || now-born < int64(lostGrace) {
		nb := strconv.FormatInt(born+int64(lostGrace), 10)
		s.notBefore.Store(&nb)
	}
	return lost, nil
}

// epochLostMark ends the value of an epoch begun by a loss (epochScript).
const epochLostMark = ":lost"

// epochID is an epoch without its lost mark.
func epochID(e string) string { return strings.TrimSuffix(e, epochLostMark) }

// newToken returns a random hex string naming one take, or one epoch.
func newToken() string {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
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
	s.batch.leasedDeparture(host) // its end goes now
	if err := s.run(ctx, departedScript, []string{s.hostKey(host)}, int64(max(ago, 0)), s.ttlMS()).Err(); err != nil {
		return wrapErr(err, "record the departure of host %q", host)
	}
	return nil
}

// DepartedAtAdmission ends host's pending departure, which reached the wire at its admission (within
// the pacer's slack of a millisecond) or never will: Departed with the ago of the admission, whose
// instant the admission recorded as the last departure already. It is plain commands, an HDEL of the
// pending departure and a PEXPIRE of the key with WithTTL. For a departure admitted under a lease
// (FrontierAdmit) they are written behind (batch.go): they go with the Store's next command, at most
// batchLinger later, so a process pacing the host without the lease waits that much longer at most,
// never less; the error is then an earlier write's that failed, kept for the next flush (this one is
// buffered all the same). A pacer on the Store calls it instead of Departed for such a departure.
func (s *Store) DepartedAtAdmission(ctx context.Context, host string) error {
	if !s.batch.leasedDeparture(host) {
		// Admitted without a lease (Admit): other processes pace the host through the store as well,
		// and each waits for this pending departure to end: written at once, as a fast host shared by
		// several processes would otherwise be held to a departure a linger.
		if err := s.endPending(ctx, host); err != nil {
			return wrapErr(err, "record the departure of host %q", host)
		}
		return nil
	}
	now := time.Now()
	if err := s.buffer(ctx, func(b *batch) int { return addDepart(b, host, now) }); err != nil {
		return wrapErr(err, "record the departure of host %q", host)
	}
	return nil
}

// endPending ends host's pending departure now, in one round trip with what is buffered.
func (s *Store) endPending(ctx context.Context, host string) error {
	_, err := s.pipelined(ctx, func(p redis.Pipeliner) { s.queueEndPending(ctx, p, host) })
	return err
}

// Refused implements ext.SharedStore in one script run: the fleet's departure seq to host was refused
// (or was a robots.txt read).
func (s *Store) Refused(ctx context.Context, host string, seq uint64) error {
	return s.refused(ctx, host, seq, false)
}

// PoolRefused is Refused for a refusal, counted in the pool of refusals on its side of the last backoff
// mark, for the fleet's noise test (the pacer finds the method on the Store; no user calls it).
func (s *Store) PoolRefused(ctx context.Context, host string, seq uint64) error {
	return s.refused(ctx, host, seq, true)
}

// refused runs refusedScript for the fleet's departure seq to host, counting it in the pool when pool.
func (s *Store) refused(ctx context.Context, host string, seq uint64, pool bool) error {
	if err := s.run(ctx, refusedScript, []string{s.hostKey(host)}, seq, s.ttlMS(), encodeBool(pool)).Err(); err != nil {
		return wrapErr(err, "record the refusal of a departure to host %q", host)
	}
	return nil
}

// PoolBackoff marks, in one script run, a backoff of the fleet's pace on host in the pool of refusals
// (paced: for a Retry-After), as PoolRefused for the pacer.
func (s *Store) PoolBackoff(ctx context.Context, host string, paced bool) error {
	if err := s.run(ctx, poolBackoffScript, []string{s.hostKey(host)}, encodeBool(paced), s.ttlMS()).Err(); err != nil {
		return wrapErr(err, "mark a backoff of the fleet's pace on host %q", host)
	}
	return nil
}

// count32 is a count the pool of refusals keeps (never negative: decodeAdmission checks), saturated.
func count32(v int64) uint32 { return uint32(min(v, math.MaxUint32)) }

// ttlMS is the host keys' TTL in milliseconds, 0 for none.
func (s *Store) ttlMS() int64 {
	if s.ttl <= 0 {
		return 0
	}
	return max(s.ttl.Milliseconds(), 1)
}

// Close implements ext.Store. It sends the writes buffered (batch.go) and stops the linger timer, then
// closes the client when Open made it; a client given to New stays open. Close is idempotent.
func (s *Store) Close() error {
	s.closeOnce.Do(func() {
		s.batch.mu.Lock()
		s.batch.closed = true
		if s.batch.timer != nil {
			s.batch.timer.Stop()
		}
		s.batch.mu.Unlock()
		ctx, cancel := context.WithTimeout(context.Background(), flushTimeout)
		err := s.flush(ctx)
		cancel()
		if err != nil {
			s.closeErr = fmt.Errorf("redisstore: close: flush the buffered writes: %w", err)
		}
		if s.owned {
			if err := s.c.Close(); err != nil && !errors.Is(err, redis.ErrClosed) {
				s.closeErr = errors.Join(s.closeErr, fmt.Errorf("redisstore: close: %w", err))
			}
		}
	})
	return s.closeErr
}

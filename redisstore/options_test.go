package redisstore_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/collypace/ext"
	"github.com/collypace/ext/audit"
	"github.com/collypace/ext/redisstore"
	"github.com/collypace/ext/redisstore/internal/redistest"
	"github.com/redis/go-redis/v9"
	"github.com/rs/zerolog"
)

// Issue 17 item 12: WithPrefix (and WithTTL) follow the root package's invalid-value rule: NewErr and
// Open return the value as an error wrapping ext.ErrInvalidOption; New keeps the default, and the pacer
// given the store reports it (option_invalid, and its WithAlert function).
func TestInvalidOptions(t *testing.T) {
	c := redistest.Start(t).Client()
	for _, opt := range []redisstore.Option{redisstore.WithPrefix(""), redisstore.WithPrefix("a\nb"), redisstore.WithTTL(-1)} {
		if st, err := redisstore.NewErr(c, opt); st != nil || !errors.Is(err, ext.ErrInvalidOption) {
			t.Errorf("NewErr = %v, %v; want no store and ErrInvalidOption", st, err)
		}
	}
	st := redisstore.New(c, redisstore.WithPrefix(""))
	if err := st.SaveHosts(ctx, []ext.StoredHost{{Host: "p.test", Version: ext.StateVersion}}); err != nil {
		t.Fatal(err)
	}
	if n, err := c.Exists(ctx, redisstore.DefaultPrefix+"host:p.test").Result(); err != nil || n != 1 {
		t.Errorf("with an empty prefix set aside, the key is not under the default prefix (%d, %v)", n, err)
	}
	var trail strings.Builder
	var alerts []audit.Event
	p := ext.NewPacer(ext.WithStore(st), ext.WithLogger(zerolog.New(&trail)), ext.WithAlert(func(a ext.Alert) { alerts = append(alerts, a.Event) }))
	defer p.Close()
	if !strings.Contains(trail.String(), `"event":"option_invalid"`) || !strings.Contains(trail.String(), "WithPrefix") || len(alerts) != 1 {
		t.Errorf("the pacer did not report the store's invalid option: alerts %v, trail:\n%s", alerts, &trail)
	}
	if _, err := redisstore.Open("127.0.0.1:1", redisstore.WithPrefix("")); !errors.Is(err, ext.ErrInvalidOption) {
		t.Errorf("Open with an empty prefix: %v, want ErrInvalidOption", err)
	}
}

// recordingLogger records go-redis's log lines.
type recordingLogger struct {
	mu    sync.Mutex
	lines []string
}

func (l *recordingLogger) Printf(_ context.Context, format string, v ...any) {
	l.mu.Lock()
	l.lines = append(l.lines, fmt.Sprintf(format, v...))
	l.mu.Unlock()
}

// Issue 17 item 9: Open's failures are returned, not printed: go-redis's pool logs nothing, since Open
// dials the server itself first.
func TestOpenFailurePrintsNothing(t *testing.T) {
	rec := &recordingLogger{}
	redis.SetLogger(rec)
	defer redis.SetLogger(quiet{})
	for _, addr := range []string{"unix://" + t.TempDir() + "/nothing.sock", "127.0.0.1:1"} {
		if _, err := redisstore.Open(addr); err == nil {
			t.Errorf("Open(%s) succeeded", addr)
		}
	}
	rec.mu.Lock()
	defer rec.mu.Unlock()
	if len(rec.lines) != 0 {
		t.Errorf("go-redis printed %q", rec.lines)
	}
}

package redisstore_test

import (
	"testing"
	"time"

	"github.com/collypace/ext/redisstore"
	"github.com/collypace/ext/redisstore/internal/redistest"
)

// Issue 28, item 9: a unix socket's bare path is an address, as go-redis takes it.
func TestOpenTakesASocketPath(t *testing.T) {
	srv := redistest.Start(t)
	st, err := redisstore.Open(srv.Socket(), redisstore.WithPrefix(newPrefix()))
	if err != nil {
		t.Fatalf("Open(%q) = %v, want the socket opened", srv.Socket(), err)
	}
	defer st.Close()
	if a, err := st.Admit(ctx, "sock.test", time.Millisecond); err != nil || !a.OK {
		t.Errorf("Admit on a Store opened by its socket's path = %+v, %v; want OK", a, err)
	}
}

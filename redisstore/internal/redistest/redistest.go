// Package redistest starts a private redis-server for a test: on a unix socket in a temporary
// folder, without persistence, killed when the test ends. The server can be stopped and started again
// on the same socket, to test what a crawler does while Redis is gone.
//
// Without redis-server on the PATH the test is skipped, unless the environment variable CI is set
// (.ci/run sets CI=true): then it fails, because CI must run the Redis tests.
package redistest

import (
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/collypace/ext/internal/redisproc"
	"github.com/redis/go-redis/v9"
)

// startTimeout bounds how long Start and Restart wait for the server to answer.
const startTimeout = 10 * time.Second

// Server is a private redis-server. Its methods must be called from the test's goroutine.
type Server struct {
	tb     testing.TB
	bin    string
	dir    string
	socket string
	cmd    *exec.Cmd
	exited chan struct{} // closed when cmd has been waited for
}

// Start starts a redis-server for tb and registers its end in tb.Cleanup. It skips tb when
// redis-server is not installed, or fails it when the environment variable CI is set.
func Start(tb testing.TB) *Server {
	tb.Helper()
	bin := serverBinary(tb)
	dir := tb.TempDir()
	// A unix socket path must fit in sun_path (108 bytes on Linux).
	if len(dir) > 90 {
		var err error
		if dir, err = os.MkdirTemp("/tmp", "redis"); err != nil {
			tb.Fatal(err)
		}
		tb.Cleanup(func() { _ = os.RemoveAll(dir) })
	}
	s := &Server{tb: tb, bin: bin, dir: dir, socket: filepath.Join(dir, "redis.sock")}
	tb.Cleanup(s.Stop)
	s.start()
	return s
}

// Socket returns the path of the server's unix socket.
func (s *Server) Socket() string { return s.socket }

// Addr returns the server's address for redisstore.Open: "unix://" and the socket's path.
func (s *Server) Addr() string { return "unix://" + s.socket }

// Client returns a new client of the server, closed when the test ends.
func (s *Server) Client() *redis.Client {
	c := redis.NewClient(&redis.Options{Network: "unix", Addr: s.socket})
	s.tb.Cleanup(func() { _ = c.Close() })
	return c
}

// Stop kills the server (SIGKILL, as a crash would) and waits for it to exit. Stopping a stopped
// server does nothing.
func (s *Server) Stop() {
	if s.cmd == nil {
		return
	}
	_ = s.cmd.Process.Kill()
	<-s.exited
	s.cmd = nil
}

// Pause stops the server's process (SIGSTOP) without closing its socket: calls hang, as with a server
// that is overloaded or behind a dead link. Resume continues it.
func (s *Server) Pause() {
	if s.cmd != nil {
		_ = s.cmd.Process.Signal(syscall.SIGSTOP)
	}
}

// Resume continues a paused server (SIGCONT).
func (s *Server) Resume() {
	if s.cmd != nil {
		_ = s.cmd.Process.Signal(syscall.SIGCONT)
	}
}

// Restart starts the server again on the same socket, with an empty database, after Stop.
func (s *Server) Restart() {
	s.tb.Helper()
	s.Stop()
	s.start()
}

func (s *Server) start() {
	s.tb.Helper()
	logfile := filepath.Join(s.dir, "redis.log")
	cmd := exec.Command(s.bin,
		"--port", "0",
		"--unixsocket", s.socket,
		"--unixsocketperm", "700",
		"--save", "",
		"--appendonly", "no",
		"--dir", s.dir,
		"--logfile", logfile,
		"--daemonize", "no",
	)
	if err := cmd.Start(); err != nil {
		s.tb.Fatalf("redistest: start %s: %v", s.bin, err)
	}
	exited := make(chan struct{})
	go func() {
		_ = cmd.Wait()
		close(exited)
	}()
	s.cmd, s.exited = cmd, exited

	deadline := time.Now().Add(startTimeout)
	for {
		if redisproc.Ping(s.socket) {
			return
		}
		select {
		case <-exited:
			s.cmd = nil
			s.tb.Fatalf("redistest: redis-server exited before answering: %s", redisproc.LogTail(logfile))
		case <-time.After(5 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			s.Stop()
			s.tb.Fatalf("redistest: redis-server did not answer within %v: %s", startTimeout, redisproc.LogTail(logfile))
		}
	}
}

// serverBinary is redis-server's path. Without it, tb is skipped, or failed when the environment
// variable CI is set (the Redis tests must run in CI).
func serverBinary(tb testing.TB) string {
	tb.Helper()
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		if os.Getenv("CI") != "" {
			tb.Fatalf("redis-server not found, and CI is set: the Redis tests must run in CI (apt-get install redis-server): %v", err)
		}
		tb.Skip("redis-server not found: apt-get install redis-server")
	}
	return bin
}

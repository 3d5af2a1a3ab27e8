// Package redisproc holds what the programs and tests that start a private redis-server share: the
// server itself (Start), a PING over its unix socket, and the tail of its log for error messages.
package redisproc

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"
)

// ErrNotFound is returned by Start when redis-server is not on the PATH.
var ErrNotFound = errors.New("redis-server not found on the PATH (apt-get install redis-server)")

// startTimeout bounds how long Start waits for the server to answer.
const startTimeout = 10 * time.Second

// Server is a private redis-server on a unix socket in a temporary folder, without persistence.
type Server struct {
	dir    string
	socket string
	cmd    *exec.Cmd
	exited chan struct{} // closed when cmd has been waited for
}

// Start starts a private redis-server, its folder named after name, and waits until it answers
// PING. Close it when done.
func Start(ctx context.Context, name string) (*Server, error) {
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		return nil, ErrNotFound
	}
	// A unix socket path must fit in sun_path (108 bytes on Linux): stay in /tmp.
	dir, err := os.MkdirTemp("/tmp", name+"-redis")
	if err != nil {
		return nil, err
	}
	s := &Server{dir: dir, socket: filepath.Join(dir, "redis.sock"), exited: make(chan struct{})}
	logfile := filepath.Join(dir, "redis.log")
	s.cmd = exec.Command(bin,
		"--port", "0",
		"--unixsocket", s.socket,
		"--unixsocketperm", "700",
		"--save", "",
		"--appendonly", "no",
		"--dir", dir,
		"--logfile", logfile,
		"--daemonize", "no",
	)
	if err := s.cmd.Start(); err != nil {
		_ = os.RemoveAll(dir)
		return nil, fmt.Errorf("start %s: %w", bin, err)
	}
	go func() {
		_ = s.cmd.Wait()
		close(s.exited)
	}()
	deadline := time.NewTimer(startTimeout)
	defer deadline.Stop()
	for !Ping(s.socket) {
		select {
		case <-s.exited:
			s.Close()
			return nil, fmt.Errorf("redis-server exited before answering: %s", LogTail(logfile))
		case <-deadline.C:
			s.Close()
			return nil, fmt.Errorf("redis-server did not answer within %v: %s", startTimeout, LogTail(logfile))
		case <-ctx.Done():
			s.Close()
			return nil, ctx.Err()
		case <-time.After(5 * time.Millisecond):
		}
	}
	return s, nil
}

// Addr is the server's address for redisstore.Open.
func (s *Server) Addr() string { return "unix://" + s.socket }

// Close kills the server, waits for it to exit and removes its folder.
func (s *Server) Close() {
	_ = s.cmd.Process.Kill()
	<-s.exited
	_ = os.RemoveAll(s.dir)
}

// Ping reports whether a server answers PING on the unix socket within a second.
func Ping(socket string) bool {
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	var d net.Dialer
	conn, err := d.DialContext(ctx, "unix", socket)
	if err != nil {
		return false
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(time.Second))
	if _, err := conn.Write([]byte("PING\r\n")); err != nil {
		return false
	}
	line, err := bufio.NewReader(conn).ReadString('\n')
	return err == nil && strings.HasPrefix(line, "+PONG")
}

// LogTail returns the last 500 bytes of a log file, for an error message.
func LogTail(path string) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return "(no log: " + err.Error() + ")"
	}
	s := strings.TrimSpace(string(b))
	if len(s) > 500 {
		s = s[len(s)-500:]
	}
	return s
}

package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"time"

	"github.com/collypace/ext/internal/redisproc"
)

// errNoRedis is returned when the fleet crawl needs redis-server and it is not on the PATH.
var errNoRedis = errors.New("redis-server not found on the PATH (apt-get install redis-server): queuebench -fleet needs it")

// redisStartTimeout bounds how long startRedis waits for the server to answer.
const redisStartTimeout = 10 * time.Second

// redisServer is a private redis-server for the fleet crawl: on a unix socket in a temporary folder,
// without persistence (as redisstore/internal/redistest starts one for a test).
type redisServer struct {
	dir    string
	socket string
	cmd    *exec.Cmd
	exited chan struct{} // closed when cmd has been waited for
}

// startRedis starts a private redis-server and waits until it answers PING. Close it when done.
func startRedis(ctx context.Context) (*redisServer, error) {
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		return nil, errNoRedis
	}
	// A unix socket path must fit in sun_path (108 bytes on Linux): stay in /tmp.
	dir, err := os.MkdirTemp("/tmp", "queuebench-redis")
	if err != nil {
		return nil, err
	}
	s := &redisServer{dir: dir, socket: filepath.Join(dir, "redis.sock"), exited: make(chan struct{})}
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
	deadline := time.NewTimer(redisStartTimeout)
	defer deadline.Stop()
	for !redisproc.Ping(s.socket) {
		select {
		case <-s.exited:
			s.Close()
			return nil, fmt.Errorf("redis-server exited before answering: %s", redisproc.LogTail(logfile))
		case <-deadline.C:
			s.Close()
			return nil, fmt.Errorf("redis-server did not answer within %v: %s", redisStartTimeout, redisproc.LogTail(logfile))
		case <-ctx.Done():
			s.Close()
			return nil, ctx.Err()
		case <-time.After(5 * time.Millisecond):
		}
	}
	return s, nil
}

// Addr is the server's address for redisstore.Open.
func (s *redisServer) Addr() string { return "unix://" + s.socket }

// Close kills the server, waits for it to exit and removes its folder.
func (s *redisServer) Close() {
	_ = s.cmd.Process.Kill()
	<-s.exited
	_ = os.RemoveAll(s.dir)
}

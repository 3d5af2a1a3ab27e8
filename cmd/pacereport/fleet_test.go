package main

import (
	"bytes"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/collypace/ext"
	"github.com/collypace/ext/internal/redisproc"
	"github.com/collypace/ext/redisstore"
	"github.com/gocolly/colly/v2"
	"github.com/rs/zerolog"
)

// startRedis starts a private redis-server on a unix socket (no persistence, no TCP port) and
// returns its address for redisstore.Open; it is killed when the test ends.
func startRedis(t *testing.T) string {
	t.Helper()
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		t.Fatalf("redis-server not on the PATH (apt-get install redis-server): %v", err)
	}
	dir, err := os.MkdirTemp("/tmp", "pacereport-redis") // a unix socket path must fit in 108 bytes
	if err != nil {
		t.Fatal(err)
	}
	socket, logfile := filepath.Join(dir, "redis.sock"), filepath.Join(dir, "redis.log")
	cmd := exec.Command(bin, "--port", "0", "--unixsocket", socket, "--unixsocketperm", "700", "--save", "",
		"--appendonly", "no", "--dir", dir, "--logfile", logfile, "--daemonize", "no")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-exited
		_ = os.RemoveAll(dir)
	})
	for i := 0; !redisproc.Ping(socket); i++ {
		select {
		case <-exited:
			t.Fatalf("redis-server exited: %s", redisproc.LogTail(logfile))
		case <-time.After(10 * time.Millisecond):
		}
		if i == 1000 {
			t.Fatalf("redis-server did not answer within 10 s: %s", redisproc.LogTail(logfile))
		}
	}
	return "unix://" + socket
}

// member is one process of a fleet: a collector paced by its own Pacer over the shared Redis store,
// writing its audit trail to a file.
type member struct {
	c     *colly.Collector
	pacer *ext.Pacer
	trail string
	file  *os.File
}

func newMember(t *testing.T, name, redisAddr, prefix string) *member {
	t.Helper()
	store, err := redisstore.Open(redisAddr, redisstore.WithPrefix(prefix))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = store.Close() })
	m := &member{trail: filepath.Join(t.TempDir(), name+".jsonl")}
	if m.file, err = os.Create(m.trail); err != nil {
		t.Fatal(err)
	}
	m.c = colly.NewCollector(colly.UserAgent(name), colly.AllowURLRevisit())
	m.pacer = ext.AdaptivePacing(m.c, ext.WithoutRobots(), ext.WithBaseDelay(50*time.Millisecond), ext.WithJitter(0),
		ext.WithStore(store), ext.WithPipelineID(name), ext.WithLogger(zerolog.New(zerolog.SyncWriter(m.file))))
	return m
}

func (m *member) visit(t *testing.T, urls ...string) {
	t.Helper()
	for _, u := range urls {
		if err := m.c.Visit(u); err != nil {
			t.Fatalf("%s: %v", u, err)
		}
	}
}

func (m *member) close(t *testing.T) {
	t.Helper()
	m.pacer.Close()
	if err := m.file.Close(); err != nil {
		t.Fatal(err)
	}
}

// TestMergedFleetTrailRevealsOtherProcessesConstraint: two real pacers on one private redis-server
// crawl one loopback host as a fleet that is misconfigured: each has its own key prefix, so they share
// nothing. The host publishes a rate limit (one request left, reset in 4 s: an interval of 4 s / 2 =
// 2 s) to member A only; B, pacing by its 50 ms floor, departs within 2 s of A's departure. Each trail
// alone is clean; the merged report finds B's departure, under the interval A learned. (Sharing one
// prefix, B would wait out A's interval: the store keeps it until its reset.)
func TestMergedFleetTrailRevealsOtherProcessesConstraint(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.UserAgent() == "member-a" {
			w.Header().Set("X-RateLimit-Limit", "10")
			w.Header().Set("X-RateLimit-Remaining", "1")
			w.Header().Set("X-RateLimit-Reset", "4")
		}
		fmt.Fprint(w, "ok")
	}))
	defer srv.Close()
	addr := startRedis(t)
	prefix := "fleet-" + strings.ReplaceAll(t.Name(), "/", "-")
	a, b := newMember(t, "member-a", addr, prefix+"-a:"), newMember(t, "member-b", addr, prefix+"-b:")
	a.visit(t, srv.URL+"/a1")                               // A learns the 2 s interval
	b.visit(t, srv.URL+"/b1", srv.URL+"/b2", srv.URL+"/b3") // B does not, and paces by its floor
	a.visit(t, srv.URL+"/a2")                               // A waits 2 s after B's last departure
	a.close(t)
	b.close(t)

	for _, trail := range []string{a.trail, b.trail} {
		var stdout, stderr bytes.Buffer
		if status := run([]string{trail}, &stdout, &stderr); status != exitOK {
			t.Fatalf("%s alone: status %d, want %d (clean)\n%s%s", filepath.Base(trail), status, exitOK, stdout.String(), stderr.String())
		}
	}
	var stdout, stderr bytes.Buffer
	status := run([]string{a.trail, b.trail}, &stdout, &stderr)
	want := srv.URL + "/b1: "
	if status != exitViolation || !strings.Contains(stderr.String(), want) || !strings.Contains(stderr.String(), "under the rate-limit interval of 2s learned by "+a.trail) {
		t.Errorf("merged: status %d, want %d naming B's first departure (%s) under A's 2 s interval\n%s%s", status, exitViolation, want, stdout.String(), stderr.String())
	}
}

package redistest

import (
	"context"
	"fmt"
	"net"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// Cluster is a private Redis Cluster of masters on 127.0.0.1, without replicas or persistence,
// killed when the test ends.
type Cluster struct {
	Addrs []string // each master's "127.0.0.1:port"
}

// StartCluster starts a cluster of n masters sharing the 16384 slots, waits until every node says the
// cluster is ok, and registers its end in tb.Cleanup. Like Start, it skips tb without redis-server
// (fails it when CI is set).
func StartCluster(tb testing.TB, n int) *Cluster {
	tb.Helper()
	bin := serverBinary(tb)
	cl := &Cluster{}
	var clients []*redis.Client
	var buses []int
	for i := range n {
		dir := tb.TempDir()
		port, bus := freePort(tb), freePort(tb)
		cmd := exec.Command(bin,
			"--bind", "127.0.0.1", "--port", strconv.Itoa(port), "--cluster-port", strconv.Itoa(bus),
			"--cluster-enabled", "yes", "--cluster-config-file", filepath.Join(dir, "nodes.conf"),
			"--save", "", "--appendonly", "no", "--dir", dir, "--logfile", filepath.Join(dir, "redis.log"), "--daemonize", "no")
		if err := cmd.Start(); err != nil {
			tb.Fatalf("redistest: start cluster node %d: %v", i, err)
		}
		exited := make(chan struct{})
		go func() { _ = cmd.Wait(); close(exited) }()
		tb.Cleanup(func() { _ = cmd.Process.Kill(); <-exited })
		buses = append(buses, bus)
		addr := "127.0.0.1:" + strconv.Itoa(port)
		cl.Addrs = append(cl.Addrs, addr)
		c := redis.NewClient(&redis.Options{Addr: addr})
		tb.Cleanup(func() { _ = c.Close() })
		clients = append(clients, c)
	}
	ctx, cancel := context.WithTimeout(context.Background(), startTimeout)
	defer cancel()
	for i, c := range clients {
		for c.Ping(ctx).Err() != nil {
			if ctx.Err() != nil {
				tb.Fatalf("redistest: cluster node %d did not answer", i)
			}
			time.Sleep(5 * time.Millisecond)
		}
		lo, hi := i*16384/n, (i+1)*16384/n-1
		if err := c.ClusterAddSlotsRange(ctx, lo, hi).Err(); err != nil {
			tb.Fatalf("redistest: cluster node %d: add slots %d-%d: %v", i, lo, hi, err)
		}
		if i > 0 {
			host, port, _ := net.SplitHostPort(cl.Addrs[0])
			if err := c.Do(ctx, "CLUSTER", "MEET", host, port, buses[0]).Err(); err != nil {
				tb.Fatalf("redistest: cluster node %d: meet: %v", i, err)
			}
		}
	}
	for i, c := range clients {
		for {
			info, err := c.ClusterInfo(ctx).Result()
			if err == nil && strings.Contains(info, "cluster_state:ok") && strings.Contains(info, fmt.Sprintf("cluster_known_nodes:%d", n)) {
				break
			}
			if ctx.Err() != nil {
				tb.Fatalf("redistest: cluster node %d never ok: %s %v", i, info, err)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	return cl
}

// Client returns a cluster client, closed when the test ends.
func (cl *Cluster) Client(tb testing.TB) *redis.ClusterClient {
	c := redis.NewClusterClient(&redis.ClusterOptions{Addrs: cl.Addrs})
	tb.Cleanup(func() { _ = c.Close() })
	return c
}

// freePort returns a TCP port free on 127.0.0.1 a moment ago.
func freePort(tb testing.TB) int {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

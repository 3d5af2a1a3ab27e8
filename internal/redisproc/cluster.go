package redisproc

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

// Cluster is a private Redis Cluster of masters on 127.0.0.1, without replicas or persistence, for
// the benchmark programs and the tests (redisstore/internal/redistest wraps it).
type Cluster struct {
	Addrs []string // each master's "127.0.0.1:port"
	dir   string
	nodes []*exec.Cmd
	ended []chan struct{} // closed when the node's process has been waited for
}

// clusterAttempts bounds how many times StartCluster starts the nodes afresh when one of them exits
// before answering: its port was taken between the check and redis-server's bind.
const clusterAttempts = 3

// errNodeExited says a node's process ended before it answered PING.
var errNodeExited = errors.New("exited before answering")

// StartCluster starts a cluster of n masters sharing the 16384 slots, and waits until every node says
// the cluster is ok. Close it when done.
func StartCluster(ctx context.Context, name string, n int) (*Cluster, error) {
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		return nil, ErrNotFound
	}
	for attempt := 1; ; attempt++ {
		cl, err := startCluster(ctx, bin, name, n)
		if err == nil || !errors.Is(err, errNodeExited) || attempt == clusterAttempts {
			return cl, err
		}
	}
}

// startCluster is one attempt of StartCluster.
func startCluster(ctx context.Context, bin, name string, n int) (cl *Cluster, err error) {
	dir, err := os.MkdirTemp("", name+"-cluster")
	if err != nil {
		return nil, err
	}
	cl = &Cluster{dir: dir}
	defer func() {
		if err != nil {
			cl.Close()
			cl = nil
		}
	}()
	ports, err := freePorts(2 * n)
	if err != nil {
		return nil, err
	}
	var buses []int
	for i := range n {
		port, bus := ports[2*i], ports[2*i+1]
		node := filepath.Join(dir, strconv.Itoa(i))
		if err := os.Mkdir(node, 0o700); err != nil {
			return nil, err
		}
		cmd := exec.Command(bin, "--bind", "127.0.0.1", "--port", strconv.Itoa(port), "--cluster-port", strconv.Itoa(bus),
			"--cluster-enabled", "yes", "--cluster-config-file", filepath.Join(node, "nodes.conf"),
			"--save", "", "--appendonly", "no", "--dir", node, "--logfile", filepath.Join(node, "redis.log"), "--daemonize", "no")
		if err := cmd.Start(); err != nil {
			return nil, fmt.Errorf("start cluster node %d: %w", i, err)
		}
		ended := make(chan struct{})
		go func() { _ = cmd.Wait(); close(ended) }()
		cl.nodes, cl.ended = append(cl.nodes, cmd), append(cl.ended, ended)
		cl.Addrs = append(cl.Addrs, "127.0.0.1:"+strconv.Itoa(port))
		buses = append(buses, bus)
	}
	ctx, cancel := context.WithTimeout(ctx, startTimeout)
	defer cancel()
	for i, addr := range cl.Addrs {
		if err := cl.join(ctx, i, addr, n, buses[0]); err != nil {
			return nil, err
		}
	}
	for i, addr := range cl.Addrs {
		if err := waitOK(ctx, addr, n); err != nil {
			return nil, fmt.Errorf("cluster node %d: %w: %s", i, err, cl.logTail(i))
		}
	}
	return cl, nil
}

// join waits until node i answers, gives it its share of the slots and, past the first, introduces it
// to the first node.
func (cl *Cluster) join(ctx context.Context, i int, addr string, n, firstBus int) error {
	c := redis.NewClient(&redis.Options{Addr: addr})
	defer c.Close()
	for c.Ping(ctx).Err() != nil {
		select {
		case <-cl.ended[i]:
			return fmt.Errorf("cluster node %d %w: %s", i, errNodeExited, cl.logTail(i))
		case <-ctx.Done():
			return fmt.Errorf("cluster node %d did not answer within %v: %s", i, startTimeout, cl.logTail(i))
		case <-time.After(5 * time.Millisecond):
		}
	}
	lo, hi := i*16384/n, (i+1)*16384/n-1
	if err := c.ClusterAddSlotsRange(ctx, lo, hi).Err(); err != nil {
		return fmt.Errorf("cluster node %d: add slots %d-%d: %w", i, lo, hi, err)
	}
	if i > 0 {
		host, port, _ := net.SplitHostPort(cl.Addrs[0])
		if err := c.Do(ctx, "CLUSTER", "MEET", host, port, firstBus).Err(); err != nil {
			return fmt.Errorf("cluster node %d: meet: %w", i, err)
		}
	}
	return nil
}

// logTail is the end of node i's log, for an error message.
func (cl *Cluster) logTail(i int) string {
	return LogTail(filepath.Join(cl.dir, strconv.Itoa(i), "redis.log"))
}

// waitOK waits until the node at addr knows n nodes and says the cluster is ok.
func waitOK(ctx context.Context, addr string, n int) error {
	c := redis.NewClient(&redis.Options{Addr: addr})
	defer c.Close()
	for {
		info, err := c.ClusterInfo(ctx).Result()
		if err == nil && strings.Contains(info, "cluster_state:ok") && strings.Contains(info, fmt.Sprintf("cluster_known_nodes:%d", n)) {
			return nil
		}
		if ctx.Err() != nil {
			return errors.Join(errors.New("the cluster never said ok"), err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// Close kills every node, waits for them to exit and removes their folder.
func (cl *Cluster) Close() {
	for i, cmd := range cl.nodes {
		_ = cmd.Process.Kill()
		<-cl.ended[i]
	}
	_ = os.RemoveAll(cl.dir)
}

// Ports are drawn below Linux's ephemeral range (32768-60999 by default), so that no client socket of
// a test running beside the cluster takes one between the check and redis-server's bind.
const portLow, portHigh = 20000, 32768

// freePorts returns k distinct TCP ports of 127.0.0.1, each free a moment ago: all are held open
// together while drawn, so none is handed out twice.
func freePorts(k int) ([]int, error) {
	var ports []int
	var held []net.Listener
	defer func() {
		for _, l := range held {
			_ = l.Close()
		}
	}()
	for tries := 0; len(ports) < k; tries++ {
		if tries == 1000 {
			return nil, fmt.Errorf("no %d free ports in %d-%d", k, portLow, portHigh)
		}
		port := portLow + rand.IntN(portHigh-portLow)
		l, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(port))
		if err != nil {
			continue // in use, or drawn twice while held
		}
		held = append(held, l)
		ports = append(ports, port)
	}
	return ports, nil
}

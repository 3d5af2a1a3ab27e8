package redisproc

import (
	"context"
	"errors"
	"fmt"
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
// the benchmark programs (the tests' own is redisstore/internal/redistest's).
type Cluster struct {
	Addrs []string // each master's "127.0.0.1:port"
	dir   string
	nodes []*exec.Cmd
	ended []chan struct{} // closed when the node's process has been waited for
}

// StartCluster starts a cluster of n masters sharing the 16384 slots, and waits until every node says
// the cluster is ok. Close it when done.
func StartCluster(ctx context.Context, name string, n int) (cl *Cluster, err error) {
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		return nil, ErrNotFound
	}
	dir, err := os.MkdirTemp("", name+"-cluster")
	if err != nil {
		return nil, err
	}
	cl = &Cluster{dir: dir}
	defer func() {
		if err != nil {
			cl.Close()
		}
	}()
	var buses []int
	for i := range n {
		port, bus, err := freePorts()
		if err != nil {
			return nil, err
		}
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
			return nil, fmt.Errorf("cluster node %d: %w: %s", i, err, LogTail(filepath.Join(dir, strconv.Itoa(i), "redis.log")))
		}
	}
	return cl, nil
}

// join gives node i its share of the slots and, past the first, introduces it to the first node.
func (cl *Cluster) join(ctx context.Context, i int, addr string, n, firstBus int) error {
	c := redis.NewClient(&redis.Options{Addr: addr})
	defer c.Close()
	for c.Ping(ctx).Err() != nil {
		if ctx.Err() != nil {
			return fmt.Errorf("cluster node %d did not answer: %s", i, LogTail(filepath.Join(cl.dir, strconv.Itoa(i), "redis.log")))
		}
		time.Sleep(5 * time.Millisecond)
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

// freePorts returns two TCP ports free on 127.0.0.1 a moment ago: a node's and its cluster bus's.
func freePorts() (int, int, error) {
	var ports []int
	for range 2 {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return 0, 0, err
		}
		defer l.Close()
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	return ports[0], ports[1], nil
}

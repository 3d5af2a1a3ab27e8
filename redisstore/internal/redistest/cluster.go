package redistest

import (
	"context"
	"testing"

	"github.com/collypace/ext/internal/redisproc"
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
	serverBinary(tb)
	cl, err := redisproc.StartCluster(context.Background(), "redistest", n)
	if err != nil {
		tb.Fatalf("redistest: %v", err)
	}
	tb.Cleanup(cl.Close)
	return &Cluster{Addrs: cl.Addrs}
}

// Client returns a cluster client, closed when the test ends.
func (cl *Cluster) Client(tb testing.TB) *redis.ClusterClient {
	c := redis.NewClusterClient(&redis.ClusterOptions{Addrs: cl.Addrs})
	tb.Cleanup(func() { _ = c.Close() })
	return c
}

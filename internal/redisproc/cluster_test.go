package redisproc

import (
	"net"
	"strconv"
	"testing"
)

// The ports of a cluster are distinct, below the ephemeral range and free when handed out.
func TestFreePortsAreDistinctAndFree(t *testing.T) {
	ports, err := freePorts(6)
	if err != nil {
		t.Fatal(err)
	}
	seen := map[int]bool{}
	for _, p := range ports {
		if seen[p] {
			t.Fatalf("port %d handed out twice: %v", p, ports)
		}
		seen[p] = true
		if p < portLow || p >= portHigh {
			t.Fatalf("port %d outside %d-%d", p, portLow, portHigh)
		}
		l, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(p))
		if err != nil {
			t.Fatalf("port %d not free: %v", p, err)
		}
		_ = l.Close()
	}
}

package ext_test

import (
	"testing"

	"github.com/collypace/ext"
	"github.com/collypace/ext/storetest"
)

func TestMemoryStoreConformance(t *testing.T) {
	storetest.Run(t, func(t *testing.T) ext.Store { return ext.NewMemoryStoreForTest() })
}

// BenchmarkDeparture is a departure with state in memory only, the baseline of the stores' own.
func BenchmarkDeparture(b *testing.B) { storetest.BenchDeparture(b, nil) }

// BenchmarkDepartureMemoryStore writes behind to the in-memory store.
func BenchmarkDepartureMemoryStore(b *testing.B) {
	storetest.BenchDeparture(b, ext.NewMemoryStoreForTest())
}

func TestMemoryStoreRobotsConformance(t *testing.T) {
	storetest.RunRobots(t, func(t *testing.T) storetest.RobotsStore { return ext.NewMemoryStoreForTest() })
}

package ext_test

import (
	"testing"

	"github.com/collypace/ext"
	"github.com/collypace/ext/storetest"
)

// The virtual-time grid's fleet store keeps the contracts redisstore keeps, so that a fleet's figures
// there say something about a fleet on Redis.
func TestSimSharedConformance(t *testing.T) {
	storetest.Run(t, func(t *testing.T) ext.Store { return ext.NewSharedMemoryStoreForTest() })
	storetest.RunShared(t, func(t *testing.T) ext.SharedStore { return ext.NewSharedMemoryStoreForTest() })
}

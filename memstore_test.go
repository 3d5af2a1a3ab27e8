package ext_test

import (
	"testing"

	"github.com/collypace/ext"
	"github.com/collypace/ext/internal/storetest"
)

func TestMemoryStoreConformance(t *testing.T) {
	storetest.Run(t, func(t *testing.T) ext.Store { return ext.NewMemoryStore() })
}

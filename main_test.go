package ext

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the package when a goroutine outlives the tests: a pacer whose wait, retry, robots
// fetch or write-behind loop never ends would keep a long crawl's memory and connections forever.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

package redisstore_test

import (
	"context"
	"flag"
	"fmt"
	"os"
	"runtime"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// quiet drops go-redis's log lines: the tests that stop the server make it log every failed dial.
type quiet struct{}

func (quiet) Printf(context.Context, string, ...any) {}

// TestMain runs a fleet worker when asked (faults_test.go); otherwise it silences go-redis and, when the tests pass, checks that they left no goroutine behind:
// every client closed, every server waited for.
func TestMain(m *testing.M) {
	if spec := os.Getenv(workerEnv); spec != "" { // a fleet worker of the fault tests
		os.Exit(runWorker(spec))
	}
	redis.SetLogger(quiet{})
	code := m.Run()
	if f := flag.Lookup("test.fuzz"); code == 0 && (f == nil || f.Value.String() == "") {
		for deadline := time.Now().Add(3 * time.Second); runtime.NumGoroutine() > 1; time.Sleep(10 * time.Millisecond) {
			if time.Now().After(deadline) {
				buf := make([]byte, 1<<20)
				fmt.Fprintf(os.Stderr, "goroutines left behind:\n%s\n", buf[:runtime.Stack(buf, true)])
				code = 1
				break
			}
		}
	}
	os.Exit(code)
}

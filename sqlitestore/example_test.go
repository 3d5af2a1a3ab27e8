package sqlitestore_test

import (
	"context"
	"fmt"
	"log"
	"os"
	"path/filepath"
	"time"

	"github.com/collypace/ext"
	"github.com/collypace/ext/sqlitestore"
	"github.com/gocolly/colly/v2"
)

// A crawler restarted on the same file still honours the Retry-After window a host set before.
func ExampleOpen() {
	dir, err := os.MkdirTemp("", "pacing")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	path := filepath.Join(dir, "pacing.db")
	now := time.Now()

	// What the previous run left: example.com asked it to wait five more minutes.
	prev, err := sqlitestore.Open(path)
	if err != nil {
		log.Fatal(err)
	}
	err = prev.SaveHosts(context.Background(), []ext.HostState{{
		Host: "example.com", Version: ext.StateVersion, AdaptiveDelay: 2 * time.Second,
		HoldUntil: now.Add(5 * time.Minute), HoldTrigger: ext.TriggerRetryAfter, UpdatedAt: now,
	}})
	if err != nil {
		log.Fatal(err)
	}
	prev.Close()

	// This run: the pacer reads a host's state from the file when it first meets the host.
	st, err := sqlitestore.Open(path)
	if err != nil {
		log.Fatal(err)
	}
	defer st.Close() // after the pacer's Close (deferred calls run last first)
	c := colly.NewCollector()
	p := ext.AdaptivePacing(c, ext.WithStore(st))
	defer p.Close() // writes the state not yet written behind

	res := p.ReserveAt("example.com", now) // what c.Visit("https://example.com/") would wait for
	fmt.Println(res.At.Sub(now), res.Trigger)
	// Output: 5m0s retry_after
}

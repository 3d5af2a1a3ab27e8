package sqlitestore_test

import (
	"fmt"
	"log"
	"net/http"
	"os"
	"path/filepath"
	"time"

	"github.com/collypace/ext"
	"github.com/collypace/ext/sqlitestore"
	"github.com/gocolly/colly/v2"
)

// A crawler restarted on the same file still honours the Retry-After window a host set in the run
// before, and starts from the adaptive delay that run had reached.
func ExampleOpen() {
	dir, err := os.MkdirTemp("", "pacing")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	path := filepath.Join(dir, "pacing.db")
	now := time.Now()

	// The previous run: example.com answered 429 with Retry-After: 300 (the explicit-time forms stand
	// for a Colly crawl here). The window is written through to the file before anything else departs.
	prev, err := sqlitestore.Open(path)
	if err != nil {
		log.Fatal(err)
	}
	p := ext.NewPacer(ext.WithStore(prev))
	res := p.ReserveAt("example.com", now)
	p.ObserveAt(res, ext.Outcome{Status: http.StatusTooManyRequests, Header: http.Header{"Retry-After": {"300"}}}, now)
	if err := p.Close(); err != nil { // writes the state not yet written behind
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
	pacer := ext.AdaptivePacing(c, ext.WithStore(st))
	defer pacer.Close()

	later := now.Add(time.Minute)
	res = pacer.ReserveAt("example.com", later) // what c.Visit("https://example.com/") would wait for
	fmt.Println(res.At.Sub(now), res.Trigger)   // 300 s and the 10% safety buffer, from the 429
	h, _ := pacer.HostAt("example.com", later)
	fmt.Println(h.AdaptiveDelay) // backed off ×1.5 from the 1 s base by the refusal
	// Output:
	// 5m30s retry_after
	// 1.5s
}

package main

import (
	"fmt"
	"io"

	"github.com/collypace/ext"
	"github.com/collypace/ext/sqlitestore"
)

// openState opens the SQLite file that keeps the pacing state (each host's delay, Retry-After window,
// Crawl-delay, breaker) and the deferred requests between runs, and returns the option that hands it to
// ext.AdaptivePacing and the function that closes it. An empty path keeps the state in memory.
func openState(path string, out io.Writer) (opts []ext.Option, closeState func() error, err error) {
	if path == "" {
		_, _ = fmt.Fprintln(out, "state:  in memory (-state \"\")")
		return nil, func() error { return nil }, nil
	}
	st, err := sqlitestore.Open(path)
	if err != nil {
		return nil, nil, err
	}
	_, _ = fmt.Fprintf(out, "state:  %s (SQLite; survives restarts)\n", path)
	return []ext.Option{ext.WithStore(st)}, st.Close, nil
}

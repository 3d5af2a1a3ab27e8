package main

import (
	"fmt"
	"io"

	"github.com/collypace/ext"
)

// openState is the single spot where the durable pacing state will be opened.
//
// TODO(issue 3): the SQLite store does not exist yet. Once it does, open it at path here and return
// the option that hands it to ext.AdaptivePacing, with a close function that closes it. Until then
// the state lives in the pacer's memory and path is unused.
func openState(path string, out io.Writer) (opts []ext.Option, closeState func() error, err error) {
	_ = path
	_, _ = fmt.Fprintln(out, "state:  in memory (sqlite store not built yet)")
	return nil, func() error { return nil }, nil
}

package ext

import (
	"fmt"
	"io"
	"sync"

	"github.com/collypace/ext/audit"
	"github.com/rs/zerolog"
)

// WithAuditWriter writes the audit trail as JSON lines to w, as WithLogger(zerolog.New(w)) does, and
// watches every write: an audit trail that silently stops is worse than none for a compliance review.
// When a write fails (an error, or fewer bytes written than given: a file opened read-only, a full
// disk, a closed pipe), the pacer raises an alert (WithAlert, Event audit.EventAuditWriteFailed) at the
// first failure of a run of them, and Pacer.Close returns it, with the count of events lost (even after
// a later write succeeded: the trail has a hole either way). zerolog still prints its own "could not write event" line to stderr. A Logger given with
// WithLogger cannot be watched (zerolog reports its write errors only to a process-wide handler, which
// a library must not set): give the writer here instead. The last of WithAuditWriter and WithLogger
// wins. w must be safe for concurrent use (an *os.File is) and must not be nil.
func WithAuditWriter(w io.Writer) Option {
	return func(c *config) {
		if w == nil {
			c.reject("WithAuditWriter", "nil", "no Writer", "")
			return
		}
		c.auditWriter, c.logger = w, zerolog.Nop()
		c.accept("WithAuditWriter", fmt.Sprintf("%T", w))
	}
}

// watchAudit puts an auditWriter before the WithAuditWriter writer, if one was given.
func (p *Pacer) watchAudit() {
	if p.cfg.auditWriter == nil {
		return
	}
	p.auditOut = &auditWriter{w: p.cfg.auditWriter, p: p}
	p.audit.logger = zerolog.New(p.auditOut)
}

// auditWriter is the writer the pacer puts between zerolog and the WithAuditWriter writer, to see
// its failures.
type auditWriter struct {
	w io.Writer
	p *Pacer

	mu      sync.Mutex // protects the fields below
	failing bool       // the last write failed: the next failure raises no new alert
	lost    int        // events not written in full
	err     error      // the last write's error
}

func (a *auditWriter) Write(b []byte) (int, error) {
	n, err := a.w.Write(b)
	if err == nil && n < len(b) {
		err = io.ErrShortWrite
	}
	a.mu.Lock()
	if err == nil {
		a.failing = false
		a.mu.Unlock()
		return n, nil
	}
	first := !a.failing
	a.failing, a.err = true, err
	a.lost++
	lost := a.lost
	a.mu.Unlock()
	if first {
		now := a.p.now()
		a.p.alert(Alert{At: now, Event: audit.EventAuditWriteFailed,
			Detail: fmt.Sprintf("the audit trail could not be written (%v): %d event(s) lost so far (Pacer.Close returns the count)", err, lost)})
	}
	return n, err
}

// failure is nil while every write succeeded, otherwise an error counting the events lost and wrapping
// the last write's error. A nil auditWriter (no WithAuditWriter) has none.
func (a *auditWriter) failure() error {
	if a == nil {
		return nil
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.err == nil {
		return nil
	}
	return fmt.Errorf("ext: audit trail: %d event(s) not written, the last because: %w", a.lost, a.err)
}

package ext

import (
	"fmt"
	"sync"
	"time"

	"github.com/collypace/ext/audit"
	"github.com/rs/zerolog"
)

// A store's health as the crawl sees it: a failing or slow store named once in the audit trail (and
// through WithAlert), the backoff before asking it again, and the end of the stall.

// storeHealth is a stall of the store: since its first failure (or slow answer), and whether it was
// announced in the audit trail and through WithAlert.
type storeHealth struct {
	mu        sync.Mutex
	since     time.Time // zero when the store answers
	failures  int       // consecutive failures, for the backoff
	announced bool
}

// storeStalled notes a store call that failed (err) or answered slowly (err nil) between start and
// now, names the stall once it has lasted storeStallBound (at once for a read or a write, whose state
// is not shared meanwhile), and returns how long to wait before asking again.
func (p *Pacer) storeStalled(host, op string, err error, start, now time.Time) time.Duration {
	sh := &p.persist.health
	sh.mu.Lock()
	if sh.since.IsZero() {
		sh.since = start
	}
	if err != nil {
		sh.failures++
	}
	stalled := now.Sub(sh.since)
	announce := !sh.announced && (stalled >= storeStallBound || op == "read" || op == "write")
	sh.announced = sh.announced || announce
	backoff := min(storeRetryFirst<<min(sh.failures, 10), storeRetryMax)
	sh.mu.Unlock()
	if announce {
		event, level := audit.EventStoreUnavailable, zerolog.ErrorLevel
		detail := fmt.Sprintf("store %s failed: %v; ", op, err)
		if err == nil {
			event, level = audit.EventStoreSlow, zerolog.WarnLevel
			detail = fmt.Sprintf("store %s took %v; ", op, now.Sub(start))
		}
		if p.persist.shared != nil {
			detail += fmt.Sprintf("departures have waited %v for the shared store and wait until it answers", stalled)
		} else {
			detail += "the state is kept in memory"
		}
		p.audit.emit(level, auditEvent{at: now, host: host, event: event, trigger: audit.TriggerStore, compliant: true, detail: detail})
		p.alert(Alert{At: now, Host: host, Event: event, Detail: detail})
	}
	return backoff
}

// storeFailed notes a failed store call made at now.
func (p *Pacer) storeFailed(host, op string, err error, now time.Time) {
	p.storeStalled(host, op, err, now, now)
}

// storeRecovered notes that the store answers again, and audits the end of an announced stall.
func (p *Pacer) storeRecovered(host string, now time.Time) {
	sh := &p.persist.health
	sh.mu.Lock()
	since, announced := sh.since, sh.announced
	sh.since, sh.failures, sh.announced = time.Time{}, 0, false
	sh.mu.Unlock()
	if !announced {
		return
	}
	p.audit.emit(zerolog.WarnLevel, auditEvent{at: now, host: host, event: audit.EventStoreRecovered, trigger: audit.TriggerStore, compliant: true,
		detail: fmt.Sprintf("store answers again after %v", now.Sub(since))})
}

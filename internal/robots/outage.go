package robots

import (
	"errors"
	"net"
	"syscall"
	"time"
)

// An unavailable robots.txt: when it is read again, and whether the host waits meanwhile or its
// breaker opens. What that does to the host (its hold, its breaker) is the pacer's.

// RetryFirst is the wait before reading an unreachable robots.txt again; it doubles after each
// failure, up to the retry delay.
const RetryFirst = time.Second

// Fail records in e, whose read ended at e.FetchedAt without saying what applies, that robots.txt is
// unavailable: the next try, and what applies until then. With an earlier copy (prev's rules), it
// still applies (RFC 9309 §2.4). Without, the host is held until the next try (RFC 9309 §2.3.1.4:
// unreachable means disallow), no later than limit after the first failure in a row, the last try;
// from then on the failure trips the host's breaker (e.Tripped) and the next try is its probe. The
// tries back off from RetryFirst, doubling, up to retry.
func (e *Entry) Fail(prev *Entry, retry, limit time.Duration) {
	now := e.FetchedAt
	e.Unavailable, e.Outage = true, &Outage{Attempt: 1, Since: now}
	e.Unreachable = Unreachable(e.Err)
	if prev != nil {
		e.Cached = prev.Rules()
		if prev.Unavailable {
			e.Attempt, e.Since = prev.Attempt+1, prev.Since
		}
	}
	backoff := retry
	if e.Attempt <= 30 {
		backoff = min(RetryFirst<<(e.Attempt-1), backoff)
	}
	e.RetryAt = now.Add(backoff)
	if e.Cached != nil {
		return
	}
	if end := e.Since.Add(limit); now.Before(end) {
		e.RetryAt = later(now, earlier(e.RetryAt, end)) // the last try at the limit
	} else {
		e.Tripped = true
		e.RetryAt = now // the breaker's probe, when it lets one through
	}
}

// Unreachable reports whether err says that a host cannot be reached at all: its name does not
// resolve, or its address refuses connections or has no route. Such a host fails its requests at once
// (a user who misspelt a name or a port hears of it in OnError, as with plain Colly), rather than
// holding them as RFC 9309 asks for a robots.txt that is unavailable (5xx, timeouts), which a passing
// fault explains. Nothing is sent to the host either way.
func Unreachable(err error) bool {
	var dns *net.DNSError
	return errors.As(err, &dns) && !dns.IsTimeout && !dns.IsTemporary ||
		errors.Is(err, syscall.ECONNREFUSED) || errors.Is(err, syscall.EHOSTUNREACH) || errors.Is(err, syscall.ENETUNREACH)
}

func earlier(a, b time.Time) time.Time {
	if a.Before(b) {
		return a
	}
	return b
}

func later(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

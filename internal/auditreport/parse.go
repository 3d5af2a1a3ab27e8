// Package auditreport reads collypace audit trails (JSON lines, see ext's audit schema) and checks, per
// host, that the crawl was polite: no departure inside a Retry-After or rate-limit window, no gap between
// two departures under the floor or a published constraint. Several trails (a fleet's processes) are
// merged into one schedule per host. It renders the result as Markdown and as one HTML page of charts.
//
// Malformed lines are skipped, never fatal: each is a Warning naming its file and line, listed in the
// report, because a process killed mid-write leaves a truncated last line and the rest of the trail
// still counts. A read error (not a bad line) is an error.
package auditreport

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"time"

	"github.com/collypace/ext/audit"
)

// maxLine is the longest audit line read; a longer one is skipped with a warning.
const maxLine = 1 << 20

// Event is one audit event as read, with the file and line it came from.
type Event struct {
	At        time.Time
	Pipeline  string
	Host      string      // target_domain: the host key
	Name      audit.Event // event
	Trigger   string
	Base      time.Duration
	Computed  time.Duration
	Jitter    time.Duration
	Compliant bool
	Status    int
	Detail    string
	Schema    int // 1 when absent

	URL string
	// Departure fields (schema 2); HasDeparture reports whether interval_ms was present.
	Wait, Interval, CrawlDelay, RateInterval time.Duration
	HasDeparture                             bool
	// Hold fields (schema 2); zero when absent.
	WindowStart, WindowEnd time.Time
	// Shared is, for a hold in a fleet, when it was in the shared store (zero: not said): the other
	// processes read it from there.
	Shared time.Time
	Until  time.Time // a rate-limit interval's end (zero: none said)

	File   string // the trail it was read from: one process of a fleet
	Source string // file:line
}

// Warning is a line that was skipped.
type Warning struct {
	Source string // file:line
	Reason string
}

// String returns the warning as "file:line: reason".
func (w Warning) String() string { return w.Source + ": " + w.Reason }

// Trail is one or several audit trails merged in time order.
type Trail struct {
	Files    []string
	Events   []Event // sorted by At; ties keep file and line order
	Warnings []Warning
}

// Load reads the audit trails at paths and merges them.
func Load(paths ...string) (*Trail, error) {
	t := &Trail{}
	for _, p := range paths {
		f, err := os.Open(p)
		if err != nil {
			return nil, fmt.Errorf("auditreport: %w", err)
		}
		err = t.Read(f, p)
		f.Close()
		if err != nil {
			return nil, err
		}
	}
	return t, nil
}

// Read adds the audit trail read from r, named name in sources, and keeps the events in time order.
func (t *Trail) Read(r io.Reader, name string) error {
	t.Files = append(t.Files, name)
	br := bufio.NewReaderSize(r, 64<<10)
	for line := 1; ; line++ {
		b, tooLong, err := readLine(br)
		if len(b) > 0 || tooLong {
			src := fmt.Sprintf("%s:%d", name, line)
			switch {
			case tooLong:
				t.Warnings = append(t.Warnings, Warning{src, fmt.Sprintf("line longer than %d bytes", maxLine)})
			default:
				if e, err := parseLine(b); err != nil {
					t.Warnings = append(t.Warnings, Warning{src, err.Error()})
				} else {
					e.File, e.Source = name, src
					t.Events = append(t.Events, *e)
				}
			}
		}
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return fmt.Errorf("auditreport: reading %s: %w", name, err)
		}
	}
	slices.SortStableFunc(t.Events, func(a, b Event) int { return a.At.Compare(b.At) })
	return nil
}

// readLine returns the next line without its newline; a line over maxLine is consumed and reported.
func readLine(br *bufio.Reader) (line []byte, tooLong bool, err error) {
	var buf []byte
	for {
		chunk, err := br.ReadSlice('\n')
		if len(buf)+len(chunk) > maxLine {
			tooLong = true
		} else {
			buf = append(buf, chunk...)
		}
		if errors.Is(err, bufio.ErrBufferFull) {
			continue
		}
		if tooLong {
			buf = nil
		}
		return bytes.TrimSpace(buf), tooLong, err
	}
}

// parseLine decodes one non-blank audit line.
func parseLine(b []byte) (*Event, error) {
	var m map[string]json.RawMessage
	if err := json.Unmarshal(b, &m); err != nil {
		return nil, fmt.Errorf("not a JSON object: %v", err)
	}
	p := fieldParser{m: m}
	e := &Event{Schema: 1}
	ts := p.str(audit.FieldTimestamp, true)
	e.Host = p.str(audit.FieldTargetDomain, true)
	e.Name = audit.Event(p.str(audit.FieldEvent, true))
	if p.err != nil {
		return nil, p.err
	}
	at, err := time.Parse(time.RFC3339Nano, ts)
	if err != nil {
		return nil, fmt.Errorf("%s %q: not RFC 3339", audit.FieldTimestamp, ts)
	}
	e.At = at
	e.Pipeline = p.str(audit.FieldPipelineID, false)
	e.Trigger = p.str(audit.FieldTrigger, false)
	e.Detail = p.str(audit.FieldDetail, false)
	e.URL = p.str(audit.FieldURL, false)
	e.Base = p.ms(audit.FieldBaseDelayMS)
	e.Computed = p.ms(audit.FieldComputedDelay)
	e.Jitter = p.ms(audit.FieldJitterMS)
	e.Status = int(p.int(audit.FieldStatusCode))
	if _, ok := m[audit.FieldSchema]; ok {
		e.Schema = int(p.int(audit.FieldSchema))
	}
	if raw, ok := m[audit.FieldComplianceFlag]; ok {
		if err := json.Unmarshal(raw, &e.Compliant); err != nil {
			return nil, fmt.Errorf("%s: not a boolean", audit.FieldComplianceFlag)
		}
	} else {
		e.Compliant = true
	}
	_, e.HasDeparture = m[audit.FieldIntervalMS]
	e.Wait = p.ms(audit.FieldWaitMS)
	e.Interval = p.ms(audit.FieldIntervalMS)
	e.CrawlDelay = p.ms(audit.FieldCrawlDelayMS)
	e.RateInterval = p.ms(audit.FieldRateIntervalMS)
	e.WindowStart = p.time(audit.FieldWindowStart)
	e.WindowEnd = p.time(audit.FieldWindowEnd)
	e.Shared = p.time(audit.FieldShared)
	e.Until = p.time(audit.FieldUntil)
	if p.err != nil {
		return nil, p.err
	}
	if !e.WindowEnd.IsZero() && e.WindowStart.IsZero() {
		e.WindowStart = e.At
	}
	return e, nil
}

// fieldParser reads typed fields of one line and keeps the first error.
type fieldParser struct {
	m   map[string]json.RawMessage
	err error
}

func (p *fieldParser) fail(key, want string) {
	if p.err == nil {
		p.err = fmt.Errorf("%s: not %s", key, want)
	}
}

func (p *fieldParser) str(key string, required bool) string {
	raw, ok := p.m[key]
	if !ok {
		if required && p.err == nil {
			p.err = fmt.Errorf("no %s field", key)
		}
		return ""
	}
	var s string
	if err := json.Unmarshal(raw, &s); err != nil {
		p.fail(key, "a string")
	}
	return s
}

func (p *fieldParser) int(key string) int64 {
	raw, ok := p.m[key]
	if !ok {
		return 0
	}
	var n int64
	if err := json.Unmarshal(raw, &n); err != nil {
		p.fail(key, "an integer")
	}
	return n
}

func (p *fieldParser) ms(key string) time.Duration {
	n := p.int(key)
	if n < 0 || n > int64(24*365*time.Hour/time.Millisecond) {
		p.fail(key, "a duration in milliseconds between 0 and a year")
		return 0
	}
	return time.Duration(n) * time.Millisecond
}

func (p *fieldParser) time(key string) time.Time {
	s := p.str(key, false)
	if s == "" {
		return time.Time{}
	}
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		p.fail(key, "an RFC 3339 time")
	}
	return t
}

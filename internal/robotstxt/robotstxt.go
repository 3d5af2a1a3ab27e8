// Package robotstxt interprets a robots.txt response for pacing, as pure functions of its bytes: the
// RFC 9309 class of its status (StatusClass), the body sanitized so that one bad line does not lose
// the file, the Crawl-delay of the group that applies to a product token, and one short line per
// thing not taken as published (Parse). The parsing and rule matching are temoto/robotstxt's; this
// package makes any body safe to hand to it. It has no clock, cache, network or logger: the pacer
// (package ext) reads robots.txt, caches it and audits what Parse reports.
package robotstxt

import (
	"bytes"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/collypace/ext/internal/httpfield"
	temoto "github.com/temoto/robotstxt"
)

// MaxBody is how much of robots.txt we read and parse (RFC 9309 §2.5: at least 500 KiB).
const MaxBody = 500 << 10

// maxLineProblems caps the per-line Problems of one robots.txt; the rest are
// summarized in a single line, so a hostile file cannot flood the audit log.
const maxLineProblems = 16

// maxWork bounds robotstxt's work on one body: it appends every Allow/Disallow
// rule (and sets every Crawl-delay) once per User-agent line of its group, so 16k
// User-agent lines followed by 20k rules, in 500 KiB, take minutes and 10 GB. The
// sanitized body is cut before the line that would exceed this many agent × directive
// pairs, as if the file were that long (RFC 9309 §2.5 allows a parser to stop).
const maxWork = 1 << 20

// maxValueQuote is how many bytes of an offending value a Problem quotes.
const maxValueQuote = 64

// delayCeiling is the largest Crawl-delay, in seconds, written into the sanitized
// body. robotstxt computes time.Duration(seconds * 1e9), which overflows into a negative
// duration above ~9.22e9 s; any larger published value is rewritten to this one.
const delayCeiling = 9223372036

// delaySaturated: a delay robotstxt reports at or above it (the ceiling, give or
// take float rounding) is read back as math.MaxInt64, "too large to represent".
const delaySaturated = (delayCeiling - 1) * time.Second

// Info is what one robots.txt response means for pacing.
type Info struct {
	CrawlDelay time.Duration // the delay we honour: the matched group's Crawl-delay, clamped to max; 0 = none
	Published  time.Duration // the delay the file asked for (saturated, never negative); > CrawlDelay when clamped
	Body       []byte        // the sanitized body: truncated to MaxBody at a line boundary, bad Crawl-delay lines removed, BOM stripped; safe to hand to robotstxt (and to Colly's own robots check)
	Problems   []string      // one short human-readable line per thing not taken as published: each bad line (with its line number, value quoted and truncated to 64 bytes), a truncation, a clamp, a parse failure
}

// Parse interprets a robots.txt response with the given HTTP status and (already size-limited or not) body
// for the robots product token agent, clamping Crawl-delay to max.
// 2xx: parse. 4xx: no rules, no delay (RFC 9309). Other statuses (5xx etc.): the caller handles them (retry later);
// Parse returns a zero Info with a Problem saying it was not parsed.
//
// The Crawl-delay honoured is the one of the group robotstxt's FindGroup picks for
// agent: the group whose User-agent is the longest prefix of agent (case-insensitive),
// else the "*" group, else none (0). A max ≤ 0 means Crawl-delay is never honoured.
//
// robotstxt rejects a whole file for one bad line, so the body is sanitized first, line
// by line, with the tokenization robotstxt itself uses (fields split on space, tab, \v and
// after the first ':'; '#' starts a comment only at the start of a field; \r, \n and \r\n
// end a line). Every change made to the body is reported in Problems, except the first
// and the last below:
//   - a UTF-8 BOM (or several) at the start is stripped;
//   - a body over MaxBody is cut after the last line ending before the limit, and
//     one that would cost robotstxt too much work before the line that exceeds
//     maxWork;
//   - a Crawl-delay line whose value (after an optional ':', up to an optional '#'
//     comment) is not an unsigned decimal number (digits, optional fraction, optional
//     exponent: no sign, NaN, Inf or hex) is removed;
//   - a Crawl-delay, Allow or Disallow line before any User-agent line is removed
//     (robotstxt fails the file on it; RFC 9309 parsers ignore such rules);
//   - a line on which a second User-agent, Allow, Disallow or Crawl-delay field follows
//     the first field and its value is cut to that first field and value (robotstxt
//     would read the stray field as a directive, or fail the file);
//   - a Crawl-delay value above delayCeiling seconds (e.g. 1e20) is rewritten to
//     delayCeiling, so robotstxt cannot overflow; Published saturates to
//     math.MaxInt64 for it;
//   - every kept Crawl-delay line is rewritten to the canonical "Crawl-delay: <value>"
//     (dropping its comment), and a value too small for a float64 (1e-400) to "0".
//
// If robotstxt still fails on the sanitized body, CrawlDelay and Published are 0 and a
// Problem says so; no rule is invented and Body is returned as sanitized.
func Parse(status int, body []byte, agent string, max time.Duration) Info {
	switch {
	case status >= 200 && status < 300:
	case status >= 400 && status < 500:
		return Info{}
	default:
		return Info{Problems: []string{fmt.Sprintf("robots.txt status %d: not parsed", status)}}
	}
	if max < 0 {
		max = 0
	}

	var info Info
	for bytes.HasPrefix(body, bom) {
		body = body[len(bom):]
	}
	if len(body) > MaxBody {
		cut := bytes.LastIndexAny(body[:MaxBody], "\r\n") + 1
		info.Problems = append(info.Problems, fmt.Sprintf("robots.txt over %d bytes, truncated to %d", MaxBody, cut))
		body = body[:cut]
	}
	var s sanitizer
	info.Body = s.sanitize(body)
	info.Problems = append(info.Problems, s.problems...)
	if s.dropped > 0 {
		info.Problems = append(info.Problems, fmt.Sprintf("%d more robots.txt lines changed, not listed", s.dropped))
	}
	if s.stop != "" {
		info.Problems = append(info.Problems, s.stop)
	}

	data, err := temoto.FromBytes(info.Body)
	if err != nil {
		msg := strings.Join(strings.Fields(err.Error()), " ")
		info.Problems = append(info.Problems, "robots.txt not parsed, Crawl-delay ignored: "+httpfield.Quote(msg, maxValueQuote))
		return info
	}
	// FindGroup may return a package-level group shared by all callers: read only.
	published := data.FindGroup(agent).CrawlDelay
	if published < 0 || published >= delaySaturated {
		published = math.MaxInt64
	}
	info.Published = published
	info.CrawlDelay = min(published, max) // a clamp is the pacer's cap, not a problem of the file: crawl_delay_clamped
	return info
}

var bom = []byte("\xef\xbb\xbf")

// FormatDelay formats a published delay, naming the saturated value.
func FormatDelay(d time.Duration) string {
	if d == math.MaxInt64 {
		return "overflowing"
	}
	return d.String()
}

// sanitizer rewrites a robots.txt body line by line so that temoto.FromBytes
// accepts it; see Parse.
type sanitizer struct {
	// agents and emptyGroup mirror robotstxt's parser: the number of User-agent lines
	// (duplicates included) of the group being read, which a new User-agent line after
	// a rule starts afresh. agents > 0: rules and Crawl-delay lines are in a group.
	agents     int
	emptyGroup bool
	work       int // agents × directive lines so far; see maxWork

	problems []string // at most maxLineProblems
	dropped  int      // problems not listed
	stop     string   // why the body was cut short, if it was; always reported
}

func (s *sanitizer) problem(format string, args ...any) {
	if len(s.problems) >= maxLineProblems {
		s.dropped++
		return
	}
	s.problems = append(s.problems, fmt.Sprintf(format, args...))
}

// sanitize returns the sanitized copy of body (which must not start with a BOM).
func (s *sanitizer) sanitize(body []byte) []byte {
	out := make([]byte, 0, len(body))
	var fields [][]byte
	for n := 1; len(body) > 0; n++ {
		i := bytes.IndexAny(body, "\r\n")
		var line, eol []byte
		switch {
		case i < 0:
			line, body = body, nil
		case body[i] == '\r' && i+1 < len(body) && body[i+1] == '\n':
			line, eol, body = body[:i], body[i:i+2], body[i+2:]
		default:
			line, eol, body = body[:i], body[i:i+1], body[i+1:]
		}
		if len(out) == 0 {
			// robotstxt skips a BOM at offset 0, which a removed first line can expose.
			for bytes.HasPrefix(line, bom) {
				line = line[len(bom):]
			}
		}
		fields = splitFields(fields[:0], line)
		if len(fields) == 0 {
			out = append(append(out, line...), eol...)
			continue
		}
		key := keyOf(fields[0])
		// robotstxt reads fields in (key, value) pairs; a directive in a later pair is
		// read as one too. Keep the first pair only. (A Crawl-delay line with extra
		// fields has no valid value and is removed below.)
		for j := 2; j < len(fields) && key != keyDelay; j += 2 {
			if keyOf(fields[j]) != keyOther {
				s.problem("line %d: stray %s field after the value, line cut to its first field and value", n, httpfield.Quote(string(fields[j]), maxValueQuote))
				line = append(append(append([]byte(nil), fields[0]...), ": "...), fields[1]...)
				break
			}
		}
		switch key {
		case keyAgent:
			if !s.emptyGroup {
				s.agents = 0
			}
			if s.agents == 0 {
				s.emptyGroup = true
			}
			s.agents++
		case keyRule:
			if s.agents == 0 {
				s.problem("line %d: %s before any User-agent, line removed", n, httpfield.Quote(string(fields[0]), maxValueQuote))
				continue
			}
		case keyDelay:
			value := crawlDelayValue(line, len(fields[0]))
			secs, ok := parseCrawlDelay(value)
			switch {
			case !ok:
				s.problem("line %d: Crawl-delay %s is not a non-negative decimal number, line removed", n, httpfield.Quote(value, maxValueQuote))
				continue
			case s.agents == 0:
				s.problem("line %d: Crawl-delay before any User-agent, line removed", n)
				continue
			case secs > delayCeiling:
				s.problem("line %d: Crawl-delay %s too large, rewritten to %d", n, httpfield.Quote(value, maxValueQuote), delayCeiling)
				value = strconv.Itoa(delayCeiling)
			case secs == 0:
				value = "0" // also a value that underflows a float64
			}
			line = append([]byte("Crawl-delay: "), value...)
		}
		if key == keyRule || key == keyDelay {
			s.emptyGroup = false
			if s.work += s.agents; s.work > maxWork {
				s.stop = fmt.Sprintf("robots.txt truncated at line %d: over %d rule × User-agent pairs", n, maxWork)
				break
			}
		}
		if len(out)+len(line)+len(eol) > MaxBody {
			// Only reachable when rewriting lengthened lines of a body near the limit.
			s.stop = fmt.Sprintf("robots.txt truncated at line %d, at %d bytes after rewriting", n, len(out))
			break
		}
		out = append(append(out, line...), eol...)
	}
	return out
}

// keyKind classifies a field as robotstxt's parser does.
type keyKind int

const (
	keyOther keyKind = iota
	keyAgent         // User-agent
	keyRule          // Allow, Disallow
	keyDelay         // Crawl-delay
)

func keyOf(field []byte) keyKind {
	if len(field) > len("crawl-delay") {
		return keyOther
	}
	switch strings.ToLower(string(field)) {
	case "user-agent", "useragent":
		return keyAgent
	case "allow", "disallow":
		return keyRule
	case "crawl-delay", "crawldelay":
		return keyDelay
	}
	return keyOther
}

// splitFields appends to dst the fields robotstxt's scanner produces for one line (no
// line ending in it): separated by space, tab or \v; the first ':' that is not the first
// byte of a field ends that field and is dropped, after which ':' is an ordinary byte; a
// '#' at the start of a field starts a comment. Bytes ≥ 0x80 never act as separators,
// as robotstxt decodes them as (possibly invalid) UTF-8, so bytes suffice.
func splitFields(dst [][]byte, line []byte) [][]byte {
	keyFound := false
	i := 0
	for {
		for i < len(line) && isSpace(line[i]) {
			i++
		}
		if i == len(line) || line[i] == '#' {
			return dst
		}
		start := i
		i++ // the first byte is always part of the field, even ':'
		end := -1
		for i < len(line) && !isSpace(line[i]) {
			if line[i] == ':' && !keyFound {
				keyFound = true
				end = i
				i++
				break
			}
			i++
		}
		if end < 0 {
			end = i
		}
		dst = append(dst, line[start:end])
	}
}

func isSpace(c byte) bool { return c == ' ' || c == '\t' || c == '\v' }

// crawlDelayValue returns the value of a Crawl-delay line whose key field is keyLen
// bytes long: after the key, spaces and one optional ':', up to a '#', trimmed.
func crawlDelayValue(line []byte, keyLen int) string {
	rest := bytes.TrimLeft(line, " \t\v")[keyLen:]
	rest = bytes.TrimLeft(rest, " \t\v")
	rest = bytes.TrimPrefix(rest, []byte(":"))
	if i := bytes.IndexByte(rest, '#'); i >= 0 {
		rest = rest[:i]
	}
	return string(bytes.Trim(rest, " \t\v"))
}

// parseCrawlDelay parses an unsigned decimal number of seconds: digits with an optional
// fraction and exponent ("5", "0.5", ".5", "5.", "1e20"). A value too large for a
// float64 is +Inf (it is still a finite decimal, and clamped like 1e20).
func parseCrawlDelay(s string) (float64, bool) {
	i, digits := 0, 0
	for ; i < len(s) && httpfield.IsDigit(s[i]); i++ {
		digits++
	}
	if i < len(s) && s[i] == '.' {
		for i++; i < len(s) && httpfield.IsDigit(s[i]); i++ {
			digits++
		}
	}
	if digits == 0 {
		return 0, false
	}
	if i < len(s) && (s[i] == 'e' || s[i] == 'E') {
		i++
		if i < len(s) && (s[i] == '+' || s[i] == '-') {
			i++
		}
		expStart := i
		for ; i < len(s) && httpfield.IsDigit(s[i]); i++ {
		}
		if i == expStart {
			return 0, false
		}
	}
	if i != len(s) {
		return 0, false
	}
	v, err := strconv.ParseFloat(s, 64)
	if err != nil && !math.IsInf(v, 1) {
		return 0, false // not reachable with the grammar above
	}
	return v, true
}

// ProductToken derives the robots.txt product token from a User-Agent string:
// "MyBot/1.2 (+http://x)" → "mybot"; "Mozilla/5.0 (compatible; Googlebot/2.1; +http://...)" → "googlebot";
// "colly - https://github.com/gocolly/colly" → "colly"; "" → "*". Lowercase; only [a-z0-9_-] characters (RFC 9309 product token).
//
// A browser-like User-Agent names the crawler after "compatible;"; otherwise the token is
// the leading run of token characters. With none, it is "*" (only the "*" group matches).
func ProductToken(userAgent string) string {
	ua := strings.ToLower(userAgent)
	if _, after, ok := strings.Cut(ua, "compatible;"); ok {
		if tok := productTokenPrefix(after); tok != "" {
			return tok
		}
	}
	if tok := productTokenPrefix(ua); tok != "" {
		return tok
	}
	return "*"
}

// productTokenPrefix returns the run of [a-z0-9_-] at the start of s after spaces and tabs.
func productTokenPrefix(s string) string {
	s = strings.TrimLeft(s, " \t")
	i := 0
	for i < len(s) && (s[i] >= 'a' && s[i] <= 'z' || httpfield.IsDigit(s[i]) || s[i] == '_' || s[i] == '-') {
		i++
	}
	return s[:i]
}

// Class is what the status of a robots.txt response means (RFC 9309 §2.3.1).
type Class int

const (
	// Rules: a 2xx; the body's rules and Crawl-delay apply (Parse).
	Rules Class = iota
	// Unavailable: a 4xx other than 429, or a 3xx left after the redirects a reader follows (§2.3.1.2:
	// at least five); no rules apply, the crawler may access anything (§2.3.1.3).
	Unavailable
	// Unreachable: a 5xx, a 429, or anything else; complete disallow until it is read (§2.3.1.4).
	Unreachable
)

// StatusClass returns the class of a robots.txt response's status.
func StatusClass(status int) Class {
	switch {
	case status >= 200 && status < 300:
		return Rules
	case status >= 300 && status < 500 && status != 429:
		return Unavailable
	}
	return Unreachable
}

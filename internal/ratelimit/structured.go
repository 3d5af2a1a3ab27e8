package ratelimit

import (
	"fmt"
	"net/http"
	"time"

	"github.com/dunglas/httpsfv"
)

// Header keys of the structured rate-limit fields (canonical) and their names.
const (
	sfKey       = "Ratelimit"
	sfFieldName = "RateLimit"
	policyKey   = "Ratelimit-Policy"
	policyName  = "RateLimit-Policy"
)

// parseSF reads the structured fields of
// draft-ietf-httpapi-ratelimit-headers (-08 and later):
//
//	RateLimit: "default";r=REMAINING;t=SECONDS, "other";r=...
//	RateLimit-Policy: "default";q=QUOTA;w=WINDOW
//
// Each item is a policy's state; the most restrictive valid item wins. An
// item's policy, matched by name, checks r against q and supplies w as the
// time to reset when t is absent; an item with neither is ignored silently.
// A syntax error (RFC 9651, as github.com/dunglas/httpsfv parses it)
// discards the whole field; a bad parameter value (not a non-negative
// integer, r above q, reset above maxReset) or an inner list discards its
// item. RateLimit-Policy is read only alongside RateLimit, whose remaining
// count it needs. Each field yields at most one error, however many items it
// loses.
func parseSF(h http.Header, now time.Time, maxReset time.Duration, errs *[]error) (Signal, bool) {
	items, ok := parseSFList(sfFieldName, h.Values(sfKey), errs)
	if !ok {
		return Signal{}, false
	}
	policies := parsePolicies(h.Values(policyKey), errs)

	var (
		best  Signal
		found bool
		bad   = itemErrors{name: sfFieldName}
	)
	for _, m := range items {
		it, isItem := m.(httpsfv.Item)
		if !isItem {
			bad.add(m, "an inner list, not an item")
			continue
		}
		r, ok := sfUintParam(it, "r")
		if !ok {
			bad.add(m, "r is not a non-negative integer")
			continue
		}
		t, tOK := sfUintParam(it, "t")
		if !tOK && sfHasParam(it, "t") {
			bad.add(m, "t is not a non-negative integer")
			continue
		}
		pol, ok := policies[sfName(it)]
		if ok && pol.q >= 0 && r > pol.q {
			bad.add(m, fmt.Sprintf("r above the policy quota q=%d", pol.q))
			continue
		}
		if !tOK {
			if !ok || pol.w < 0 {
				continue
			}
			t = pol.w
		}
		if t > int64(maxReset/time.Second) {
			bad.add(m, fmt.Sprintf("reset %ds above the maximum %v", t, maxReset))
			continue
		}
		reset := time.Duration(t) * time.Second
		next := policy{q: -1, w: -1}
		if ok && pol.w <= int64(maxReset/time.Second) {
			next = pol // the window after the reset, bounded as a reset is
		}
		if s, ok := signalFor(r, reset, now.Add(reset), next, SourceSF); ok && (!found || s.moreRestrictive(best)) {
			best, found = s, true
		}
	}
	bad.flush(errs)
	return best, found
}

// policy is one item of RateLimit-Policy: q is the quota, w the
// window in seconds; -1 when absent.
type policy struct {
	q, w int64
}

// parsePolicies returns the valid items of RateLimit-Policy by name;
// the first of a name wins.
func parsePolicies(lines []string, errs *[]error) map[string]policy {
	items, ok := parseSFList(policyName, lines, errs)
	if !ok {
		return nil
	}
	policies := make(map[string]policy, len(items))
	bad := itemErrors{name: policyName}
	for _, m := range items {
		it, isItem := m.(httpsfv.Item)
		if !isItem {
			bad.add(m, "an inner list, not an item")
			continue
		}
		p := policy{q: -1, w: -1}
		if q, ok := sfUintParam(it, "q"); ok && q >= 1 {
			p.q = q
		} else if sfHasParam(it, "q") {
			bad.add(m, "q is not a positive integer")
			continue
		}
		if w, ok := sfUintParam(it, "w"); ok {
			p.w = w
		} else if sfHasParam(it, "w") {
			bad.add(m, "w is not a non-negative integer")
			continue
		}
		if _, dup := policies[sfName(it)]; !dup {
			policies[sfName(it)] = p
		}
	}
	bad.flush(errs)
	return policies
}

// itemErrors folds the ignored items of one structured field into a
// single error, so a hostile list cannot flood the audit log.
type itemErrors struct {
	name   string         // field name
	first  httpsfv.Member // first ignored item
	reason string         // why it was ignored
	n      int            // items ignored
}

func (e *itemErrors) add(m httpsfv.Member, reason string) {
	if e.n == 0 {
		e.first, e.reason = m, reason
	}
	e.n++
}

// flush appends the error, if any item was ignored. The item is quoted in
// its canonical serialization.
func (e *itemErrors) flush(errs *[]error) {
	if e.n == 0 {
		return
	}
	raw, err := httpsfv.Marshal(httpsfv.List{e.first})
	if err != nil {
		raw = "(unserializable item)"
	}
	reason := e.reason
	if e.n > 1 {
		reason = fmt.Sprintf("%s (and %d more items ignored)", e.reason, e.n-1)
	}
	*errs = append(*errs, fieldError(e.name, raw, reason))
}

// parseSFList parses the lines of a structured list field (RFC 9651 §4.2.1),
// combined as RFC 9651 §4.2 says, empty lines skipped. ok is false when the
// field is absent, or malformed: then one error names it. lines of no list
// member at all (only empty lines) yield no items, no error.
func parseSFList(name string, lines []string, errs *[]error) (items httpsfv.List, ok bool) {
	if len(lines) == 0 {
		return nil, false
	}
	value := sfJoinLines(lines)
	items, err := httpsfv.UnmarshalList([]string{value})
	if err != nil {
		// Servers send what RFC 9651 rejects as a whole: spaces around ";" and "=", integers of more
		// than 15 digits. Read it the way it was meant before giving up on the field.
		var retryErr error
		if items, retryErr = httpsfv.UnmarshalList([]string{sfLenient(value)}); retryErr != nil {
			*errs = append(*errs, fieldError(name, value, err.Error()))
			return nil, false
		}
	}
	return items, true
}

// sfName is the name of a rate-limit item: the text of a string or token
// (so "default" and default are one policy), the serialization of any other
// bare item.
func sfName(it httpsfv.Item) string {
	switch v := it.Value.(type) {
	case string:
		return v
	case httpsfv.Token:
		return string(v)
	}
	s, _ := httpsfv.Marshal(httpsfv.NewItem(it.Value))
	return s
}

func sfHasParam(it httpsfv.Item, key string) bool {
	_, ok := it.Params.Get(key)
	return ok
}

// sfUintParam returns parameter key when it is a non-negative integer.
func sfUintParam(it httpsfv.Item, key string) (int64, bool) {
	v, ok := it.Params.Get(key)
	n, isInt := v.(int64)
	if !ok || !isInt || n < 0 {
		return 0, false
	}
	return n, true
}

// Package httpfield holds the helpers the header parsers share: optional whitespace, ASCII numbers
// that refuse signs and overflow, and quoting a value read from the network for an error message,
// bounded so a hostile server cannot flood the audit log.
package httpfield

import (
	"math"
	"strconv"
	"strings"
	"unicode/utf8"
)

// QuoteLimit bounds how many bytes of a header value an error quotes.
const QuoteLimit = 64

// TrimOWS trims optional whitespace (spaces and tabs, RFC 9110 §5.6.3).
func TrimOWS(s string) string { return strings.Trim(s, " \t") }

// IsDigit reports whether c is an ASCII digit.
func IsDigit(c byte) bool { return '0' <= c && c <= '9' }

// IsDigits reports whether s is one or more ASCII digits.
func IsDigits(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		if !IsDigit(s[i]) {
			return false
		}
	}
	return true
}

// ParseUint parses ASCII digits into a non-negative int64, refusing signs, spaces and overflow.
func ParseUint(s string) (int64, bool) {
	if !IsDigits(s) {
		return 0, false
	}
	var n int64
	for i := 0; i < len(s); i++ {
		d := int64(s[i] - '0')
		if n > (math.MaxInt64-d)/10 {
			return 0, false
		}
		n = n*10 + d
	}
	return n, true
}

// ParseDecimal parses "digits[.digits]" into its whole part and its fraction in thousandths,
// rounded up (so 0..1000).
func ParseDecimal(s string) (whole, milli int64, ok bool) {
	intPart, frac, hasFrac := strings.Cut(s, ".")
	if whole, ok = ParseUint(intPart); !ok {
		return 0, 0, false
	}
	if !hasFrac {
		return whole, 0, true
	}
	if !IsDigits(frac) {
		return 0, 0, false
	}
	for i := 0; i < 3; i++ {
		milli *= 10
		if i < len(frac) {
			milli += int64(frac[i] - '0')
		}
	}
	if len(frac) > 3 && strings.Trim(frac[3:], "0") != "" {
		milli++
	}
	return whole, milli, true
}

// Quote quotes a value read from the network for an error message, truncated to limit bytes (on a
// rune boundary when it can) with "..." appended.
func Quote(s string, limit int) string {
	if len(s) <= limit {
		return strconv.Quote(s)
	}
	cut := limit
	for i := 0; i < utf8.UTFMax-1 && !utf8.RuneStart(s[cut]); i++ {
		cut--
	}
	return strconv.Quote(s[:cut]) + "..."
}

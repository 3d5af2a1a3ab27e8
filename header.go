package ext

import (
	"math"
	"strconv"
	"strings"
	"unicode/utf8"
)

// hdrQuoteLimit bounds how many bytes of a header value an error quotes, so a
// hostile server cannot flood the audit log.
const hdrQuoteLimit = 64

// hdrTrimOWS trims optional whitespace (spaces and tabs, RFC 9110 §5.6.3).
func hdrTrimOWS(s string) string { return strings.Trim(s, " \t") }

// hdrIsDigits reports whether s is one or more ASCII digits.
func hdrIsDigits(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		if !isDigit(s[i]) {
			return false
		}
	}
	return true
}

// hdrParseUint parses ASCII digits into a non-negative int64, refusing
// signs, spaces and overflow.
func hdrParseUint(s string) (int64, bool) {
	if !hdrIsDigits(s) {
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

// hdrParseDecimal parses "digits[.digits]" into its whole part and its
// fraction in thousandths, rounded up (so 0..1000).
func hdrParseDecimal(s string) (whole, milli int64, ok bool) {
	intPart, frac, hasFrac := strings.Cut(s, ".")
	if whole, ok = hdrParseUint(intPart); !ok {
		return 0, 0, false
	}
	if !hasFrac {
		return whole, 0, true
	}
	if !hdrIsDigits(frac) {
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

// quoteValue quotes a value read from the network for an error message,
// truncated to limit bytes (on a rune boundary when it can) with "..."
// appended.
func quoteValue(s string, limit int) string {
	if len(s) <= limit {
		return strconv.Quote(s)
	}
	cut := limit
	for i := 0; i < utf8.UTFMax-1 && !utf8.RuneStart(s[cut]); i++ {
		cut--
	}
	return strconv.Quote(s[:cut]) + "..."
}

// isDigit reports whether c is an ASCII digit.
func isDigit(c byte) bool { return '0' <= c && c <= '9' }

package ratelimit

import (
	"strings"

	"github.com/collypace/ext/internal/httpfield"
)

// sfMaxInteger is RFC 9651's largest integer (15 digits): longer ones are saturated to it.
const sfMaxInteger = "999999999999999"

// sfLenient rewrites a structured field value that strict parsing refused: it drops spaces and tabs
// around ";" and "=", and saturates an integer of more than 15 digits (a number not part of a token,
// outside strings) at sfMaxInteger. Strings are copied as they are.
func sfLenient(v string) string {
	var b strings.Builder
	inString := false
	for i := 0; i < len(v); i++ {
		c := v[i]
		switch {
		case inString:
			b.WriteByte(c)
			if c == '\\' && i+1 < len(v) {
				i++
				b.WriteByte(v[i])
			} else if c == '"' {
				inString = false
			}
		case c == '"':
			inString = true
			b.WriteByte(c)
		case c == ' ' || c == '\t':
			j := i
			for j < len(v) && (v[j] == ' ' || v[j] == '\t') {
				j++
			}
			prev := strings.TrimRight(b.String(), " \t")
			if j < len(v) && (v[j] == ';' || v[j] == '=') || strings.HasSuffix(prev, ";") || strings.HasSuffix(prev, "=") {
				i = j - 1 // drop the run
				continue
			}
			b.WriteString(v[i:j])
			i = j - 1
		case c >= '0' && c <= '9' && sfNumberStart(v, i):
			j := i
			for j < len(v) && v[j] >= '0' && v[j] <= '9' {
				j++
			}
			if j-i > len(sfMaxInteger) && (j == len(v) || v[j] != '.') {
				b.WriteString(sfMaxInteger)
			} else {
				b.WriteString(v[i:j])
			}
			i = j - 1
		default:
			b.WriteByte(c)
		}
	}
	return b.String()
}

// sfNumberStart reports whether the digit at v[i] begins a number: it follows the start, a separator
// or a minus sign, not a token's letters.
func sfNumberStart(v string, i int) bool {
	if i > 0 && v[i-1] == '-' {
		i--
	}
	return i == 0 || strings.IndexByte("=,;( \t", v[i-1]) >= 0
}

// sfJoinLines combines the lines of a structured list field, skipping empty
// ones.
func sfJoinLines(lines []string) string {
	var b strings.Builder
	for _, l := range lines {
		if l = httpfield.TrimOWS(l); l == "" {
			continue
		}
		if b.Len() > 0 {
			b.WriteString(", ")
		}
		b.WriteString(l)
	}
	return b.String()
}

package httpfield

import (
	"net/http"
	"time"
)

// dateLayouts are the three HTTP-date formats of RFC 9110 §5.6.7: IMF-fixdate, obsolete RFC 850 and
// ANSI C asctime.
var dateLayouts = [...]string{
	http.TimeFormat,
	"Monday, 02-Jan-06 15:04:05 GMT",
	time.ANSIC,
}

// ParseDate is http.ParseTime in UTC: RFC 850 dates must say GMT, as the RFC requires, rather than
// any zone name, which time.Parse would resolve against the process's local zone. The day name is
// not checked against the date (time.Parse ignores it). Two-digit RFC 850 years follow time.Parse:
// 69-99 are 19xx, 00-68 are 20xx.
func ParseDate(s string) (time.Time, bool) {
	for _, layout := range dateLayouts {
		if t, err := time.ParseInLocation(layout, s, time.UTC); err == nil {
			return t, true
		}
	}
	return time.Time{}, false
}

// ServerClock is the server's time when it sent a response received at now: the response's Date
// field when that parses, else now. Instants the server names (an HTTP-date in Retry-After, an epoch
// rate-limit reset) are measured from it, so a server whose clock is skewed still gets the wait it
// meant.
func ServerClock(date string, now time.Time) time.Time {
	if t, ok := ParseDate(TrimOWS(date)); ok {
		return t
	}
	return now
}

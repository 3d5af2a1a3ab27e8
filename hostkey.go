package ext

import (
	"net"
	"net/url"
	"strings"

	"golang.org/x/net/idna"
)

// DefaultHostKey is the default WithHostKey: the URL's host with its port, as Colly's LimitRule matches,
// normalized so that every spelling of one host shares one schedule: lowercase, no trailing dot,
// Unicode names in their ASCII (punycode) form, no port when it is the scheme's default.
func DefaultHostKey(u *url.URL) string {
	host, port := u.Hostname(), u.Port()
	host = strings.TrimSuffix(strings.ToLower(host), ".")
	if ascii, err := idna.Lookup.ToASCII(host); err == nil {
		host = ascii
	}
	if port == defaultPort(u.Scheme) {
		port = ""
	}
	if strings.Contains(host, ":") { // an IPv6 literal
		if port == "" {
			return "[" + host + "]"
		}
		return net.JoinHostPort(host, port)
	}
	if port == "" {
		return host
	}
	return host + ":" + port
}

func defaultPort(scheme string) string {
	switch strings.ToLower(scheme) {
	case "http":
		return "80"
	case "https":
		return "443"
	}
	return ""
}

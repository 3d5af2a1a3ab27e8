// Package hostkey says what counts as one host: the key a URL is paced under (its normalized host and
// port, its registrable domain, or the address it resolves to). Pure functions of the URL, but for
// ByIP's cached lookups; the root package's WithHostKey options wrap them.
package hostkey

import (
	"net"
	"net/netip"
	"net/url"
	"strings"

	"golang.org/x/net/idna"
	"golang.org/x/net/publicsuffix"
)

// Default is ext.DefaultHostKey, the default WithHostKey: the URL's host with its port, as Colly's LimitRule matches,
// normalized so that every spelling of one host shares one schedule: lowercase, no trailing dot,
// Unicode names in their ASCII (punycode) form, no port when it is the scheme's default.
func Default(u *url.URL) string {
	if hostIsKey(u) {
		return u.Host // already normalized: every request computes its key, most of them this way
	}
	return normalizedHostKey(u)
}

// normalizedHostKey is Default's normalization, for a host that needs it.
func normalizedHostKey(u *url.URL) string {
	host, port := HostAndPort(u)
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

// hostIsKey reports whether u.Host is already in the form Default gives it: lowercase ASCII
// letters, digits, '-' and inner dots, no punycode label, then a port of digits only when it is not the
// scheme's default. Normalizing such a host changes nothing (idna's ToASCII returns an ASCII name without
// punycode as it is, or rejects it, which keeps it too), so it is its own key, without an allocation.
func hostIsKey(u *url.URL) bool {
	h := u.Host
	colon := strings.IndexByte(h, ':')
	name, port := h, ""
	if colon >= 0 {
		name, port = h[:colon], h[colon+1:]
		if port == "" || port == defaultPort(u.Scheme) {
			return false
		}
	}
	if name == "" || name[len(name)-1] == '.' || strings.Contains(name, "xn--") { // punycode is decoded to check it
		return false
	}
	for i := 0; i < len(name); i++ {
		if c := name[i]; !('a' <= c && c <= 'z' || '0' <= c && c <= '9' || c == '-' || c == '.') {
			return false
		}
	}
	for i := 0; i < len(port); i++ {
		if c := port[i]; c < '0' || c > '9' {
			return false
		}
	}
	return true
}

// HostAndPort returns u's host normalized as Default does, and its port unless it is the
// scheme's default.
func HostAndPort(u *url.URL) (host, port string) {
	host, port = u.Hostname(), u.Port()
	host = strings.TrimSuffix(strings.ToLower(host), ".")
	if ascii, err := idna.Lookup.ToASCII(host); err == nil {
		host = ascii
	}
	if port == defaultPort(u.Scheme) {
		port = ""
	}
	return host, port
}

// Normalize normalizes a host key given to Wait, AdmitAt, ReserveAt or HostAt as Default
// normalizes a URL's host: lowercase, no trailing dot, Unicode names in punycode, so "A.Example.COM."
// and "a.example.com" are one host. A port is kept as given: without a scheme, a default port cannot be
// told (pass "example.com", not "example.com:443", for https://example.com/). A key that is already
// normalized is returned as it is, without allocating.
func Normalize(key string) string {
	clean := true
	for i := 0; i < len(key); i++ {
		if c := key[i]; c >= 'A' && c <= 'Z' || c >= 0x80 || c == '.' && (i == len(key)-1 || key[i+1] == ':') {
			clean = false
			break
		}
	}
	if clean {
		return key
	}
	host, port, err := net.SplitHostPort(key)
	if err != nil {
		host, port = key, ""
	}
	host = strings.TrimSuffix(strings.ToLower(host), ".")
	if ascii, err := idna.Lookup.ToASCII(host); err == nil {
		host = ascii
	}
	if port == "" {
		return host
	}
	return net.JoinHostPort(host, port)
}

// ByRegistrableDomain is a WithHostKey function pacing every host of one registrable domain (the
// public suffix plus one label, from the Public Suffix List) as one schedule, whatever the subdomain,
// scheme or port: a.example.com and b.example.com:8080 share "example.com". IP literals, and names
// without a registrable domain (localhost, a bare public suffix), keep Default. The list's
// private section counts: alice.github.io and bob.github.io stay apart (ByIP joins what shares an
// address). robots.txt stays per origin; the shared schedule keeps the largest Crawl-delay among them.
func ByRegistrableDomain(u *url.URL) string {
	host, _ := HostAndPort(u)
	if _, err := netip.ParseAddr(host); err == nil || host == "" {
		return Default(u)
	}
	domain, err := publicsuffix.EffectiveTLDPlusOne(host)
	if err != nil {
		return Default(u)
	}
	return domain
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

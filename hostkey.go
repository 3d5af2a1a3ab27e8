package ext

import (
	"net"
	"net/url"

	"github.com/collypace/ext/internal/hostkey"
)

// This file is what counts as one host: the WithHostKey functions (internal/hostkey holds them).

// DefaultHostKey is the default WithHostKey: the URL's host with its port, as Colly's LimitRule matches,
// normalized so that every spelling of one host shares one schedule: lowercase, no trailing dot,
// Unicode names in their ASCII (punycode) form, no port when it is the scheme's default.
func DefaultHostKey(u *url.URL) string { return hostkey.Default(u) }

// ByRegistrableDomain is a WithHostKey function pacing every host of one registrable domain (the
// public suffix plus one label, from the Public Suffix List) as one schedule, whatever the subdomain,
// scheme or port: a.example.com and b.example.com:8080 share "example.com". IP literals, and names
// without a registrable domain (localhost, a bare public suffix), keep DefaultHostKey. The list's
// private section counts: alice.github.io and bob.github.io stay apart (ByIP joins what shares an
// address). robots.txt stays per origin; the shared schedule keeps the largest Crawl-delay among them.
func ByRegistrableDomain(u *url.URL) string { return hostkey.ByRegistrableDomain(u) }

// ByIP returns a WithHostKey function pacing every name that resolves to one address as one schedule,
// whatever the scheme or port: names served by one machine share it. resolver nil means
// net.DefaultResolver. Each name is looked up once per 10 minutes (8 lookups at a time, 2 s each), the
// key is the lowest address and stays the same across refreshes while the name still resolves to it,
// a failed refresh keeps the last key, and a name never resolved (or an IP literal) keys by
// DefaultHostKey; at most 10000 names are cached. robots.txt stays per origin; the shared schedule
// keeps the largest Crawl-delay among them.
func ByIP(resolver *net.Resolver) func(*url.URL) string { return hostkey.ByIP(resolver) }

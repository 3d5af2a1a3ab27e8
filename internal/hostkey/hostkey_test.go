package hostkey

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/netip"
	"net/url"
	"sync"
	"testing"
	"time"
)

// t0 is the tests' instant zero.
var t0 = time.Date(2026, 12, 2, 12, 0, 0, 0, time.UTC)

// Every spelling of one host maps to one schedule.
func TestDefault(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"http://example.org/a", "example.org"},
		{"http://EXAMPLE.org:80/a", "example.org"},
		{"https://example.org:443/", "example.org"},
		{"http://example.org.:8080/", "example.org:8080"},
		{"https://example.org:80/", "example.org:80"},
		{"http://bücher.test/", "xn--bcher-kva.test"},
		{"http://XN--BCHER-KVA.test/", "xn--bcher-kva.test"},
		{"http://user:secret@example.org/", "example.org"},
		{"http://[::1]:8080/", "[::1]:8080"},
		{"http://[::1]/", "[::1]"},
		{"http://127.0.0.1:9000/", "127.0.0.1:9000"},
	} {
		checkKey(t, "Default", Default, tc.in, tc.want)
	}
}

func checkKey(t *testing.T, name string, key func(*url.URL) string, in, want string) {
	t.Helper()
	u, err := url.Parse(in)
	if err != nil {
		t.Fatal(err)
	}
	if got := key(u); got != want {
		t.Errorf("%s(%s) = %q, want %q", name, in, got, want)
	}
}

func TestByRegistrableDomain(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"http://a.example.com/x", "example.com"},
		{"https://B.Example.COM:8443/", "example.com"},
		{"http://example.com./", "example.com"},
		{"http://a.b.example.co.uk/", "example.co.uk"},
		{"http://alice.github.io/", "alice.github.io"}, // the list's private section counts
		{"http://a.example.test/", "example.test"},
		{"http://bücher.example.de/", "example.de"},
		{"http://localhost:8080/", "localhost:8080"},
		{"http://co.uk/", "co.uk"},
		{"http://127.0.0.1:9000/", "127.0.0.1:9000"},
		{"http://[::1]:8080/", "[::1]:8080"},
	} {
		checkKey(t, "ByRegistrableDomain", ByRegistrableDomain, tc.in, tc.want)
	}
}

// fakeDNS answers lookups from a table and counts them.
type fakeDNS struct {
	mu    sync.Mutex
	addrs map[string][]string
	calls int
}

func (d *fakeDNS) lookup(_ context.Context, host string) ([]netip.Addr, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.calls++
	a, ok := d.addrs[host]
	if !ok {
		return nil, errors.New("no such host")
	}
	out := make([]netip.Addr, len(a))
	for i, s := range a {
		out[i] = netip.MustParseAddr(s)
	}
	return out, nil
}

func (d *fakeDNS) set(host string, addrs ...string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if addrs == nil {
		delete(d.addrs, host)
		return
	}
	d.addrs[host] = addrs
}

func TestByIP(t *testing.T) {
	dns := &fakeDNS{addrs: map[string][]string{
		"a.test": {"192.0.2.7", "192.0.2.3"}, "b.test": {"192.0.2.3"}, "v6.test": {"2001:db8::1"}, "mapped.test": {"::ffff:192.0.2.9"},
	}}
	now := t0
	k := newIPKeyer(dns.lookup, func() time.Time { return now })
	key := func(raw string) string {
		u, err := url.Parse(raw)
		if err != nil {
			t.Fatal(err)
		}
		return k.key(u)
	}
	for in, want := range map[string]string{
		"http://a.test/": "192.0.2.3", "https://B.test:8443/": "192.0.2.3", "http://v6.test/": "[2001:db8::1]",
		"http://mapped.test/": "192.0.2.9", "http://gone.test:81/": "gone.test:81", "http://127.0.0.1:9000/": "127.0.0.1:9000",
	} {
		checkKey(t, "ByIP", k.key, in, want)
	}
	calls := dns.calls
	key("http://a.test/x")
	key("http://gone.test:81/") // a failure is cached too
	if dns.calls != calls {
		t.Errorf("%d lookups within the TTL, want none", dns.calls-calls)
	}

	// A refresh keeps the key while the name still resolves to it, and when the lookup fails.
	dns.set("a.test", "192.0.2.1", "192.0.2.3")
	now = now.Add(ipKeyTTL)
	if got := key("http://a.test/"); got != "192.0.2.3" {
		t.Errorf("after a refresh still listing it: %q, want the same key", got)
	}
	dns.set("a.test")
	now = now.Add(ipKeyTTL)
	if got := key("http://a.test/"); got != "192.0.2.3" {
		t.Errorf("after a failed refresh: %q, want the last key", got)
	}
	dns.set("a.test", "192.0.2.8", "192.0.2.5")
	now = now.Add(ipKeyFailTTL)
	if got := key("http://a.test/"); got != "192.0.2.5" {
		t.Errorf("after the name moved: %q, want its lowest new address", got)
	}
	// A name that fails is asked again after ipKeyFailTTL.
	dns.set("gone.test", "192.0.2.3")
	now = now.Add(ipKeyFailTTL)
	if got := key("http://gone.test:81/"); got != "192.0.2.3" {
		t.Errorf("gone.test after it resolves: %q", got)
	}
}

// Many callers asking for one name at once make one lookup, and the cache stays bounded.
func TestByIPBounded(t *testing.T) {
	dns := &fakeDNS{addrs: map[string][]string{}}
	k := newIPKeyer(dns.lookup, time.Now)
	u, _ := url.Parse("http://many.test/")
	dns.set("many.test", "192.0.2.1")
	var wg sync.WaitGroup
	for range 50 {
		wg.Go(func() {
			if got := k.key(u); got != "192.0.2.1" {
				t.Errorf("key = %q", got)
			}
		})
	}
	wg.Wait()
	if dns.calls != 1 {
		t.Errorf("%d lookups for one name asked at once, want 1", dns.calls)
	}
	for i := range ipKeyCacheLimit + 10 {
		u, _ := url.Parse(fmt.Sprintf("http://h%d.test/", i))
		k.key(u)
	}
	if n := len(k.m); n > ipKeyCacheLimit {
		t.Errorf("%d names cached, want at most %d", n, ipKeyCacheLimit)
	}
}

// The allocation-free path of Default (a host already in normal form is its own key) gives
// what the normalization gives, for every host it takes: names, IPs, ports, punycode, and random
// strings over the characters it accepts.
func TestDefaultShortcutMatchesNormalization(t *testing.T) {
	hosts := []string{"example.com", "example.com:8080", "example.com:80", "example.com:443", "127.0.0.1:9",
		"xn--bcher-kva.example", "xn--zz.example", "xn--", "a..b", ".a", "a.", "a.:80", "-a-.b", "a_b.c", "1.2.3.4",
		"example.com:", ":80", "example.com:08", "a:b", "Example.com", "[::1]:80", "ex\u00e4mple.com"}
	rng := rand.New(rand.NewPCG(18, 1))
	const alphabet = "abcxn-.0189:"
	for range 20000 {
		b := make([]byte, 1+rng.IntN(12))
		for i := range b {
			b[i] = alphabet[rng.IntN(len(alphabet))]
		}
		hosts = append(hosts, string(b))
	}
	shortcuts := 0
	for _, h := range hosts {
		for _, scheme := range []string{"http", "https"} {
			u := &url.URL{Scheme: scheme, Host: h, Path: "/"}
			if got, want := Default(u), normalizedHostKey(u); got != want {
				t.Fatalf("Default(%s://%s) = %q, normalization gives %q", scheme, h, got, want)
			}
			if hostIsKey(u) {
				shortcuts++
			}
		}
	}
	if shortcuts < 1000 {
		t.Errorf("only %d hosts took the shortcut: the test checks little", shortcuts)
	}
	local := &url.URL{Scheme: "http", Host: "127.0.0.1:8080"}
	if n := testing.AllocsPerRun(100, func() { Default(local) }); n != 0 {
		t.Errorf("Default of a normalized host allocates %v times, want 0", n)
	}
}

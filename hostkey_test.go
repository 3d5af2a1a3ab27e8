package ext

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/netip"
	"net/url"
	"sort"
	"sync"
	"testing"
	"testing/synctest"
	"time"
)

// Every spelling of one host maps to one schedule.
func TestDefaultHostKey(t *testing.T) {
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
		checkKey(t, "DefaultHostKey", DefaultHostKey, tc.in, tc.want)
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

// Two hosts under one registrable domain share one schedule with ByRegistrableDomain, measured at the
// servers; each keeps its own robots.txt, and the schedule keeps the larger Crawl-delay of the two.
func TestRegistrableDomainSharesOneSchedule(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		n := newFakeNet(t)
		a, baseA := n.host("a.example.test", robotsSite(200, "User-agent: *\nCrawl-delay: 2\n", nil))
		b, baseB := n.host("b.example.test", robotsSite(200, "User-agent: *\nAllow: /\n", nil))
		c, p := pacedCollector(n, WithBaseDelay(time.Second), WithHostKey(ByRegistrableDomain))
		for i := range 4 {
			for _, base := range []string{baseA, baseB} {
				if err := c.Visit(fmt.Sprintf("%s/p/%d", base, i)); err != nil {
					t.Fatal(err)
				}
				if i == 0 && base == baseA {
					// a.example.test's robots.txt is read first, whatever order the Async visits'
					// goroutines would run in: from then on its Crawl-delay paces both names.
					synctest.Wait()
				}
			}
		}
		c.Wait()
		var all []arrival
		for _, h := range []*fakeHost{a, b} {
			log := h.log()
			robots := 0
			for _, x := range log {
				if x.path == "/robots.txt" {
					robots++
				}
			}
			if robots != 1 || len(log) != 5 {
				t.Errorf("%s: %d robots.txt fetches, %d requests; want its own robots.txt once and 4 pages", h.name, robots, len(log))
			}
			all = append(all, log...)
		}
		sort.SliceStable(all, func(i, j int) bool { return all[i].at.Before(all[j].at) })
		for i := 1; i < len(all); i++ {
			// The first two departures are the robots.txt of each host: the Crawl-delay is known once
			// a.example.test's is read, and applies from the next departure on.
			want := 2 * time.Second
			if i == 1 {
				want = time.Second
			}
			if gap := all[i].at.Sub(all[i-1].at); gap < want {
				t.Errorf("gap %d between %s and %s at the servers = %v, want ≥ %v (one schedule, the larger Crawl-delay)", i, all[i-1].path, all[i].path, gap, want)
			}
		}
		if st, ok := p.Host("example.test"); !ok || st.CrawlDelay != 2*time.Second {
			t.Errorf("host example.test: %+v %v, want one host with the Crawl-delay of 2s", st, ok)
		}
	})
}

// The allocation-free path of DefaultHostKey (a host already in normal form is its own key) gives
// what the normalization gives, for every host it takes: names, IPs, ports, punycode, and random
// strings over the characters it accepts.
func TestDefaultHostKeyShortcutMatchesNormalization(t *testing.T) {
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
			if got, want := DefaultHostKey(u), normalizedHostKey(u); got != want {
				t.Fatalf("DefaultHostKey(%s://%s) = %q, normalization gives %q", scheme, h, got, want)
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
	if n := testing.AllocsPerRun(100, func() { DefaultHostKey(local) }); n != 0 {
		t.Errorf("DefaultHostKey of a normalized host allocates %v times, want 0", n)
	}
}

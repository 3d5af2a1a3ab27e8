package ext

import (
	"fmt"
	"net/http"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/collypace/ext/audit"
	"github.com/gocolly/colly/v2"
	"github.com/rs/zerolog"
)

// credentialed sets on every request of c the credentials a store must not keep, and one header it must.
func credentialed(c *colly.Collector) {
	c.OnRequest(func(r *colly.Request) {
		r.Headers.Set("Authorization", "Bearer secret")
		r.Headers.Set("Proxy-Authorization", "Basic secret")
		r.Headers.Set("Cookie", "session=secret")
		r.Headers.Set("X-Trace", "kept")
	})
}

// storedSecrets lists what of the credentials the stored requests all hold, and whether X-Trace is kept.
func storedSecrets(all []DeferredRequest) (secrets []string, rows int, kept bool) {
	kept = len(all) > 0
	for _, d := range all {
		for _, k := range []string{"Authorization", "Proxy-Authorization", "Cookie"} {
			if v := d.Header.Get(k); v != "" {
				secrets = append(secrets, k+": "+v)
			}
		}
		if strings.Contains(d.URL, "secret") {
			secrets = append(secrets, "url "+d.URL)
		}
		kept = kept && d.Header.Get("X-Trace") == "kept"
	}
	return secrets, len(all), kept
}

// issue 10 item 22: requests deferred by a breaker or spilled by a Queue reach the store without their
// credentials (Authorization, Proxy-Authorization, Cookie, URL userinfo) unless WithStoredCredentials(true).
func TestStoredRequestsLeaveCredentialsOut(t *testing.T) {
	for _, keep := range []bool{false, true} {
		t.Run(fmt.Sprintf("deferred keep=%v", keep), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				n := newFakeNet(t)
				_, base := n.host("down.test", func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusServiceUnavailable) })
				store := newMemoryStore()
				c, p := pacedCollector(n, WithoutRobots(), WithMaxRetries(0), WithStore(store), WithStoredCredentials(keep),
					WithBreaker(BreakerPolicy{Failures: 1, Cooldown: time.Minute}))
				defer p.Close()
				credentialed(c)
				visitAll(t, c, strings.Replace(base, "//", "//user:secret@", 1), 3)
				all, err := store.ListDeferred(t.Context(), "", 0)
				if err != nil {
					t.Fatal(err)
				}
				secrets, rows, kept := storedSecrets(all)
				if rows != 2 || !kept {
					t.Fatalf("%d rows stored (other headers kept: %v), want the 2 deferred with X-Trace", rows, kept)
				}
				if keep != (len(secrets) == 4*rows) || !keep && len(secrets) > 0 {
					t.Errorf("WithStoredCredentials(%v): the store holds %v", keep, secrets)
				}
			})
		})
		t.Run(fmt.Sprintf("spilled keep=%v", keep), func(t *testing.T) {
			n := newFakeNet(t)
			store := newMemoryStore()
			c := colly.NewCollector()
			p := AdaptivePacing(c, WithTransport(n.tr), WithStore(store), WithStoredCredentials(keep))
			defer p.Close()
			q := NewQueue(p, 1, WithQueueMemory(1))
			for _, u := range []string{"http://user:secret@spill.test/a", "http://user:secret@spill.test/b"} {
				r, err := c.UnmarshalRequest([]byte(`{"URL":"` + u + `","Method":"GET","Depth":1}`))
				if err != nil {
					t.Fatal(err)
				}
				r.Headers = &http.Header{"Authorization": {"Bearer secret"}, "Proxy-Authorization": {"Basic secret"},
					"Cookie": {"session=secret"}, "X-Trace": {"kept"}}
				if err := q.AddRequest(r); err != nil {
					t.Fatal(err)
				}
			}
			secrets, rows, kept := storedSecrets(spilledRows(store))
			if rows != 1 || !kept {
				t.Fatalf("%d rows spilled (other headers kept: %v), want 1 with X-Trace", rows, kept)
			}
			if keep != (len(secrets) == 4) || !keep && len(secrets) > 0 {
				t.Errorf("WithStoredCredentials(%v): the store holds %v", keep, secrets)
			}
		})
	}
}

// A deferred request's audit detail names its URL as the url field does: no userinfo, and no query
// (which often carries tokens) unless WithAuditQuery.
func TestDeferredDetailDropsQuery(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		n := newFakeNet(t)
		_, base := n.host("down.test", func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusServiceUnavailable) })
		var buf auditBuf
		c, p := pacedCollector(n, WithoutRobots(), WithMaxRetries(0), WithLogger(zerolog.New(&buf)),
			WithBreaker(BreakerPolicy{Failures: 1, Cooldown: time.Minute}))
		defer p.Close()
		for i := range 2 {
			_ = c.Visit(fmt.Sprintf("%s/p/%d?token=secret", base, i))
		}
		c.Wait()
		ev := findEvent(t, &buf, audit.EventRequestDeferred)
		if ev == nil {
			t.Fatal("no request_deferred event")
		}
		if d := ev[audit.FieldDetail].(string); strings.Contains(d, "secret") || !strings.Contains(d, "http://down.test/p/") {
			t.Errorf("detail %q: want the URL without its query", d)
		}
	})
}

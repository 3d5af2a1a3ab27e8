package robotstxt

import (
	"bytes"
	"strings"
	"testing"
	"time"

	temoto "github.com/temoto/robotstxt"
)

// FuzzParse checks Parse on arbitrary bodies and agents:
//   - it does not panic;
//   - 0 ≤ CrawlDelay ≤ max, CrawlDelay ≤ Published, and a clamp is reported iff they differ;
//   - the Body is at most MaxBody and robotstxt always accepts it;
//   - sanitizing is idempotent: the Body, reparsed, gives the same Body and delays;
//   - when robotstxt accepts the original body and Parse reports nothing, the
//     delay and rules are robotstxt's own.
func FuzzParse(f *testing.F) {
	for _, seed := range []struct{ body, agent string }{
		{"User-agent: *\nCrawl-delay: 1\n\nUser-agent: mybot\nCrawl-delay: 3\nDisallow: /x\n", "mybot"},
		{"User-agent: mybot\nCrawl-delay: abc\nCrawl-delay: 0.5 # half\n", "mybot"},
		{"User-agent: *\r\nCrawl-delay: 1e20\r\n", "googlebot"},
		{"\xef\xbb\xbfDisallow: /\nUser-agent: *\nCrawl-delay: -1\n", "*"},
	} {
		f.Add([]byte(seed.body), seed.agent)
	}
	const max = 30 * time.Second
	f.Fuzz(func(t *testing.T, body []byte, agent string) {
		info := Parse(200, body, agent, max)
		if info.CrawlDelay < 0 || info.CrawlDelay > max {
			t.Fatalf("CrawlDelay = %v; want in [0, %v]", info.CrawlDelay, max)
		}
		if info.Published < info.CrawlDelay {
			t.Fatalf("Published = %v < CrawlDelay = %v", info.Published, info.CrawlDelay)
		}
		if hasProblem(info.Problems, "clamped") {
			t.Fatalf("Problems = %q: a clamp is the pacer's cap, not a problem of the file", info.Problems)
		}
		if len(info.Body) > MaxBody {
			t.Fatalf("len(Body) = %d > %d", len(info.Body), MaxBody)
		}
		for _, p := range info.Problems {
			if len(p) > 400 || strings.Contains(p, "\n") {
				t.Fatalf("Problem too long or multi-line: %q", p)
			}
		}
		data, err := temoto.FromBytes(info.Body)
		if err != nil {
			t.Fatalf("robotstxt rejects the sanitized body: %v", err)
		}
		if d := data.FindGroup(agent).CrawlDelay; d < 0 {
			t.Fatalf("robotstxt reads a negative Crawl-delay %v from the sanitized body", d)
		}

		again := Parse(200, info.Body, agent, max)
		if !bytes.Equal(again.Body, info.Body) || again.CrawlDelay != info.CrawlDelay || again.Published != info.Published {
			t.Fatalf("not idempotent:\nBody  %q\nagain %q\ndelays %v/%v, again %v/%v",
				info.Body, again.Body, info.CrawlDelay, info.Published, again.CrawlDelay, again.Published)
		}

		orig, err := temoto.FromBytes(body)
		if err != nil || len(info.Problems) != 0 {
			return
		}
		if d := orig.FindGroup(agent).CrawlDelay; d >= 0 && d < delaySaturated && d != info.Published {
			t.Fatalf("Published = %v; robotstxt reads %v from the original", info.Published, d)
		}
		for _, path := range []string{"/", "/a", "/private", "/x/y"} {
			if got, want := data.TestAgent(path, agent), orig.TestAgent(path, agent); got != want {
				t.Fatalf("TestAgent(%q, %q) = %v; %v on the original", path, agent, got, want)
			}
		}
	})
}

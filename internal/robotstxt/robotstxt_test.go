package robotstxt

import (
	"bytes"
	"fmt"
	"math"
	"strings"
	"testing"
	"time"

	temoto "github.com/temoto/robotstxt"
)

const testMax = time.Minute

// reparse parses a sanitized body as Colly would, failing the test if robotstxt rejects it.
func reparse(t *testing.T, body []byte) *temoto.RobotsData {
	t.Helper()
	data, err := temoto.FromBytes(body)
	if err != nil {
		t.Fatalf("robotstxt rejects the sanitized body: %v\nbody:\n%s", err, body)
	}
	return data
}

// hasProblem reports whether one of problems contains all of the substrings.
func hasProblem(problems []string, substrings ...string) bool {
	for _, p := range problems {
		all := true
		for _, s := range substrings {
			all = all && strings.Contains(p, s)
		}
		if all {
			return true
		}
	}
	return false
}

func TestParseRobotsGroupMatch(t *testing.T) {
	const body = "User-agent: *\nCrawl-delay: 1\n\nUser-agent: mybot\nCrawl-delay: 3\n"
	tests := []struct {
		name  string
		body  string
		agent string
		want  time.Duration
	}{
		{"own group", body, "mybot", 3 * time.Second},
		{"own group, case-insensitive", strings.ToUpper(body), "mybot", 3 * time.Second},
		{"other agent falls back to *", body, "otherbot", time.Second},
		{"robotstxt prefix-matches the group token", body, "mybot-news", 3 * time.Second},
		{"no * group, no own group", "User-agent: googlebot\nCrawl-delay: 9\n", "mybot", 0},
		{"group without Crawl-delay", "User-agent: *\nCrawl-delay: 4\n\nUser-agent: mybot\nDisallow: /x\n", "mybot", 0},
		{"group of several agents", "User-agent: a\nUser-agent: mybot\nCrawl-delay: 2\n", "mybot", 2 * time.Second},
		{"empty body", "", "mybot", 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			info := Parse(200, []byte(tt.body), tt.agent, testMax)
			if info.CrawlDelay != tt.want || info.Published != tt.want {
				t.Errorf("CrawlDelay, Published = %v, %v; want %v", info.CrawlDelay, info.Published, tt.want)
			}
			if len(info.Problems) != 0 {
				t.Errorf("Problems = %q; want none", info.Problems)
			}
		})
	}
}

func TestProductToken(t *testing.T) {
	tests := []struct{ ua, want string }{
		{"MyBot/1.2 (+http://x)", "mybot"},
		{"Mozilla/5.0 (compatible; Googlebot/2.1; +http://www.google.com/bot.html)", "googlebot"},
		{"Mozilla/5.0 AppleWebKit/537.36 (KHTML, like Gecko; compatible; bingbot/2.0; +http://www.bing.com/bingbot.htm) Chrome/116.0 Safari/537.36", "bingbot"},
		{"Mozilla/5.0 (compatible;MyBot/1.0)", "mybot"},
		{"Mozilla/5.0 (compatible; )", "mozilla"},
		{"Mozilla/5.0 (X11; Linux x86_64; rv:120.0) Gecko/20100101 Firefox/120.0", "mozilla"},
		{"colly - https://github.com/gocolly/colly", "colly"},
		{"my_bot-2", "my_bot-2"},
		{"  Spaced/1", "spaced"},
		{"", "*"},
		{"/1.0", "*"},
		{"Ünïcode/1", "*"},
	}
	for _, tt := range tests {
		if got := ProductToken(tt.ua); got != tt.want {
			t.Errorf("ProductToken(%q) = %q; want %q", tt.ua, got, tt.want)
		}
	}
}

// A bad Crawl-delay line is removed without losing the rest of the file.
func TestParseRobotsBadCrawlDelay(t *testing.T) {
	tests := []struct{ line, quoted string }{
		{"Crawl-delay: abc", `"abc"`},
		{"Crawl-delay: -1", `"-1"`},
		{"Crawl-delay: NaN", `"NaN"`},
		{"Crawl-delay: Inf", `"Inf"`},
		{"Crawl-delay: +Inf", `"+Inf"`},
		{"Crawl-delay:", `""`},
		{"Crawl-delay:   # nothing", `""`},
		{"Crawl-delay: 5s", `"5s"`},
		{"Crawl-delay: 0x10", `"0x10"`},
		{"Crawl-delay: 1e", `"1e"`},
		{"Crawl-delay: .", `"."`},
		{"Crawl-delay: 5 6", `"5 6"`},
		{"crawldelay: 1,5", `"1,5"`},
		{"Crawl-delay: " + strings.Repeat("x", 100), `"` + strings.Repeat("x", 64) + `"...`},
	}
	for _, tt := range tests {
		t.Run(tt.line, func(t *testing.T) {
			body := "User-agent: other\nCrawl-delay: 7\nDisallow: /other\n\n" +
				"User-agent: mybot\nDisallow: /private\n" + tt.line + "\nAllow: /private/ok\n"
			info := Parse(200, []byte(body), "mybot", testMax)
			t.Run("reported with line number and value", func(t *testing.T) {
				if !hasProblem(info.Problems, "line 7:", tt.quoted, "removed") {
					t.Errorf("Problems = %q; want line 7 and %s", info.Problems, tt.quoted)
				}
			})
			t.Run("no delay for the group", func(t *testing.T) {
				if info.CrawlDelay != 0 || info.Published != 0 {
					t.Errorf("CrawlDelay, Published = %v, %v; want 0", info.CrawlDelay, info.Published)
				}
			})
			t.Run("line removed", func(t *testing.T) {
				if bytes.Contains(info.Body, []byte("\n"+tt.line+"\n")) {
					t.Errorf("Body still has %q:\n%s", tt.line, info.Body)
				}
			})
			t.Run("rest of the file survives", func(t *testing.T) {
				data := reparse(t, info.Body)
				if d := data.FindGroup("other").CrawlDelay; d != 7*time.Second {
					t.Errorf("other group's Crawl-delay = %v; want 7s", d)
				}
				for _, c := range []struct {
					agent, path string
					want        bool
				}{
					{"other", "/other", false},
					{"mybot", "/private", false},
					{"mybot", "/private/ok", true},
					{"mybot", "/other", true},
				} {
					if got := data.TestAgent(c.path, c.agent); got != c.want {
						t.Errorf("TestAgent(%q, %q) = %v; want %v", c.path, c.agent, got, c.want)
					}
				}
			})
		})
	}
}

func TestParseRobotsCrawlDelayValues(t *testing.T) {
	tests := []struct {
		name, line string
		want       time.Duration
	}{
		{"integer", "Crawl-delay: 5", 5 * time.Second},
		{"fractional", "Crawl-delay: 0.5", 500 * time.Millisecond},
		{"leading dot", "Crawl-delay: .25", 250 * time.Millisecond},
		{"trailing dot", "Crawl-delay: 2.", 2 * time.Second},
		{"exponent", "Crawl-delay: 1.5e1", 15 * time.Second},
		{"zero", "Crawl-delay: 0", 0},
		{"underflow", "Crawl-delay: 1e-400", 0},
		{"comment after a space", "Crawl-delay: 5 # be nice", 5 * time.Second},
		{"comment without a space", "Crawl-delay: 5#be nice", 5 * time.Second},
		{"no colon", "Crawl-delay 5", 5 * time.Second},
		{"no space", "Crawl-delay:5", 5 * time.Second},
		{"space before colon", "Crawl-delay : 5", 5 * time.Second},
		{"tabs and indent", "\t crawl-DELAY:\t5\t", 5 * time.Second},
		{"crawldelay spelling", "crawldelay: 3", 3 * time.Second},
		{"last one in the group wins", "Crawl-delay: 1\nCrawl-delay: 2", 2 * time.Second},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			info := Parse(200, []byte("User-agent: mybot\n"+tt.line+"\n"), "mybot", testMax)
			if info.CrawlDelay != tt.want || info.Published != tt.want {
				t.Errorf("CrawlDelay, Published = %v, %v; want %v", info.CrawlDelay, info.Published, tt.want)
			}
			if len(info.Problems) != 0 {
				t.Errorf("Problems = %q; want none", info.Problems)
			}
			if d := reparse(t, info.Body).FindGroup("mybot").CrawlDelay; d != tt.want {
				t.Errorf("reparsed Body's Crawl-delay = %v; want %v", d, tt.want)
			}
		})
	}
}

func TestParseRobotsClamp(t *testing.T) {
	tests := []struct {
		name, value   string
		max           time.Duration
		wantPublished time.Duration
		wantDelay     time.Duration
	}{
		{"over max", "120", time.Minute, 2 * time.Minute, time.Minute},
		{"at max", "60", time.Minute, time.Minute, time.Minute},
		{"1e20 saturates", "1e20", time.Minute, math.MaxInt64, time.Minute},
		{"1e400 saturates", "1e400", time.Minute, math.MaxInt64, time.Minute},
		{"just over the int64 range", "9223372037", time.Minute, math.MaxInt64, time.Minute},
		{"max 0 never honours", "5", 0, 5 * time.Second, 0},
		{"negative max is 0", "5", -time.Second, 5 * time.Second, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			body := "User-agent: *\nCrawl-delay: " + tt.value + "\nDisallow: /x\n"
			info := Parse(200, []byte(body), "mybot", tt.max)
			if info.Published != tt.wantPublished {
				t.Errorf("Published = %v; want %v", info.Published, tt.wantPublished)
			}
			if info.CrawlDelay != tt.wantDelay {
				t.Errorf("CrawlDelay = %v; want %v", info.CrawlDelay, tt.wantDelay)
			}
			if hasProblem(info.Problems, "clamped") { // the clamp is crawl_delay_clamped, not robots_invalid
				t.Errorf("Problems = %q; want no clamp among them", info.Problems)
			}
			data := reparse(t, info.Body)
			if d := data.FindGroup("mybot").CrawlDelay; d < 0 {
				t.Errorf("reparsed Body's Crawl-delay = %v; want not negative", d)
			}
			if data.TestAgent("/x", "mybot") {
				t.Error("Disallow: /x lost")
			}
		})
	}
}

func TestParseRobotsHugeDelayRewritten(t *testing.T) {
	info := Parse(200, []byte("User-agent: *\nCrawl-delay: 1e20\n"), "mybot", time.Minute)
	if !bytes.Contains(info.Body, []byte("Crawl-delay: 9223372036\n")) {
		t.Errorf("Body = %q; want the value rewritten to 9223372036", info.Body)
	}
	if !hasProblem(info.Problems, "line 2:", `"1e20"`, "too large") {
		t.Errorf("Problems = %q; want the rewrite of line 2", info.Problems)
	}
}

func TestParseRobotsStatus(t *testing.T) {
	const body = "User-agent: *\nCrawl-delay: 5\nDisallow: /\n"
	tests := []struct {
		status      int
		wantDelay   time.Duration
		wantProblem bool
	}{
		{200, 5 * time.Second, false},
		{204, 5 * time.Second, false},
		{301, 0, true},
		{400, 0, false},
		{403, 0, false},
		{404, 0, false},
		{429, 0, false},
		{500, 0, true},
		{503, 0, true},
		{0, 0, true},
	}
	for _, tt := range tests {
		info := Parse(tt.status, []byte(body), "mybot", testMax)
		if info.CrawlDelay != tt.wantDelay {
			t.Errorf("status %d: CrawlDelay = %v; want %v", tt.status, info.CrawlDelay, tt.wantDelay)
		}
		if got := hasProblem(info.Problems, "not parsed"); got != tt.wantProblem {
			t.Errorf("status %d: Problems = %q; want a not-parsed Problem: %v", tt.status, info.Problems, tt.wantProblem)
		}
		if tt.status >= 300 && info.Body != nil {
			t.Errorf("status %d: Body = %q; want nil", tt.status, info.Body)
		}
	}
}

func TestParseRobotsEncoding(t *testing.T) {
	tests := []struct{ name, body string }{
		{"BOM", "\xef\xbb\xbfUser-agent: mybot\nCrawl-delay: 2\nDisallow: /x\n"},
		{"two BOMs", "\xef\xbb\xbf\xef\xbb\xbfUser-agent: mybot\nCrawl-delay: 2\nDisallow: /x\n"},
		{"BOM exposed by a removed first line", "\xef\xbb\xbfDisallow: /\n\xef\xbb\xbfUser-agent: mybot\nCrawl-delay: 2\nDisallow: /x\n"},
		{"CRLF", "User-agent: mybot\r\nCrawl-delay: 2\r\nDisallow: /x\r\n"},
		{"CR", "User-agent: mybot\rCrawl-delay: 2\rDisallow: /x\r"},
		{"no final newline", "User-agent: mybot\nDisallow: /x\nCrawl-delay: 2"},
		{"bad line, CRLF", "User-agent: mybot\r\nCrawl-delay: abc\r\nCrawl-delay: 2\r\nDisallow: /x\r\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			info := Parse(200, []byte(tt.body), "mybot", testMax)
			if info.CrawlDelay != 2*time.Second {
				t.Errorf("CrawlDelay = %v; want 2s (Problems %q)", info.CrawlDelay, info.Problems)
			}
			if bytes.HasPrefix(info.Body, bom) {
				t.Errorf("Body starts with a BOM")
			}
			if reparse(t, info.Body).TestAgent("/x", "mybot") {
				t.Error("Disallow: /x lost")
			}
		})
	}
}

func TestParseRobotsBadLineNumbersCountCRLFOnce(t *testing.T) {
	info := Parse(200, []byte("User-agent: *\r\n\r\nCrawl-delay: x\r\n"), "mybot", testMax)
	if !hasProblem(info.Problems, "line 3:") {
		t.Errorf("Problems = %q; want line 3", info.Problems)
	}
}

// Lines robotstxt would fail the whole file on, other than Crawl-delay values.
func TestParseRobotsStructuralLines(t *testing.T) {
	tests := []struct {
		name, body, problem string
		disallowed          string // a path that must stay disallowed for mybot, if any
	}{
		{"Disallow before any User-agent", "Disallow: /\nUser-agent: mybot\nDisallow: /x\nCrawl-delay: 2\n", "line 1: \"Disallow\" before any User-agent", "/x"},
		{"Crawl-delay before any User-agent", "Crawl-delay: 9\nUser-agent: mybot\nDisallow: /x\nCrawl-delay: 2\n", "line 1: Crawl-delay before any User-agent", "/x"},
		{"stray Crawl-delay field", "User-agent: mybot\nDisallow: /x crawl-delay abc\nCrawl-delay: 2\n", "line 2: stray \"crawl-delay\"", "/x"},
		{"stray User-agent field", "User-agent: mybot\nCrawl-delay: 2\nDisallow: /x User-agent evil\nDisallow: /y\n", "line 3: stray \"User-agent\"", "/y"},
		{"colon after the key field is not a stray field", "User-agent: mybot\nCrawl-delay: 2\nDisallow: /x User-agent: evil\nDisallow: /y\n", "", "/y"},
		{"empty Disallow before any User-agent", "Disallow:\nUser-agent: mybot\nCrawl-delay: 2\nDisallow: /x\n", "line 1:", "/x"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			info := Parse(200, []byte(tt.body), "mybot", testMax)
			if tt.problem == "" && len(info.Problems) != 0 {
				t.Errorf("Problems = %q; want none", info.Problems)
			}
			if tt.problem != "" && !hasProblem(info.Problems, tt.problem) {
				t.Errorf("Problems = %q; want %q", info.Problems, tt.problem)
			}
			if info.CrawlDelay != 2*time.Second {
				t.Errorf("CrawlDelay = %v; want 2s", info.CrawlDelay)
			}
			if reparse(t, info.Body).TestAgent(tt.disallowed, "mybot") {
				t.Errorf("%s no longer disallowed", tt.disallowed)
			}
		})
	}
}

func TestParseRobotsGarbage(t *testing.T) {
	binary := make([]byte, 4096)
	for i := range binary {
		binary[i] = byte(i*131 + i/7)
	}
	tests := []struct {
		name string
		body []byte
	}{
		{"HTML", []byte("<!DOCTYPE html>\n<html><head><title>Not found</title></head>\n<body>\n<p>User-agent: *</p>\nDisallow: /\n<p>Crawl-delay: soon</p>\nCrawl-delay: 10\n</body></html>\n")},
		{"binary", binary},
		{"NUL bytes", []byte("User-agent: *\x00\nCrawl-delay: \x00\n")},
		{"invalid UTF-8", []byte("User-agent: \xff\xfe\nCrawl-delay: \xc3\n")},
		{"one long line", bytes.Repeat([]byte("Disallow: /a "), 20000)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			info := Parse(200, tt.body, "mybot", testMax)
			reparse(t, info.Body)
			if info.CrawlDelay != 0 {
				t.Errorf("CrawlDelay = %v; want 0", info.CrawlDelay)
			}
			if hasProblem(info.Problems, "not parsed") {
				t.Errorf("Problems = %q; want the sanitized body parsed", info.Problems)
			}
		})
	}
}

func TestParseRobotsLargeBody(t *testing.T) {
	var b bytes.Buffer
	b.WriteString("User-agent: mybot\nCrawl-delay: 3\nDisallow: /private\n")
	for b.Len() < 10<<20 {
		b.WriteString("Disallow: /generated/path/that/is/long/enough/to/fill/the/file\n")
	}
	start := time.Now()
	info := Parse(200, b.Bytes(), "mybot", testMax)
	elapsed := time.Since(start)
	t.Run("truncated", func(t *testing.T) {
		if len(info.Body) > MaxBody || len(info.Body) < MaxBody-100 {
			t.Errorf("len(Body) = %d; want just under %d", len(info.Body), MaxBody)
		}
		if !bytes.HasSuffix(info.Body, []byte("\n")) {
			t.Error("Body not cut at a line boundary")
		}
		if !hasProblem(info.Problems, "truncated to") {
			t.Errorf("Problems = %q; want a truncation", info.Problems)
		}
	})
	t.Run("still parsed", func(t *testing.T) {
		if info.CrawlDelay != 3*time.Second {
			t.Errorf("CrawlDelay = %v; want 3s", info.CrawlDelay)
		}
		if reparse(t, info.Body).TestAgent("/private", "mybot") {
			t.Error("Disallow: /private lost")
		}
	})
	t.Run("fast", func(t *testing.T) {
		if elapsed > 5*time.Second {
			t.Errorf("Parse took %v", elapsed)
		}
	})
}

func TestParseRobotsNoNewlineBeforeLimit(t *testing.T) {
	body := append([]byte("User-agent: *"), bytes.Repeat([]byte("x"), MaxBody)...)
	info := Parse(200, body, "mybot", testMax)
	if len(info.Body) != 0 || !hasProblem(info.Problems, "truncated") {
		t.Errorf("len(Body) = %d, Problems = %q; want empty and a truncation", len(info.Body), info.Problems)
	}
}

func TestParseRobotsWorkLimit(t *testing.T) {
	// robotstxt appends each rule once per User-agent line of its group.
	var b strings.Builder
	for i := range 2048 {
		fmt.Fprintf(&b, "User-agent: a%d\n", i)
	}
	b.WriteString("User-agent: mybot\nCrawl-delay: 2\nDisallow: /first\n")
	for range maxWork / 2048 {
		b.WriteString("Disallow: /more\n")
	}
	b.WriteString("Disallow: /last\n")
	start := time.Now()
	info := Parse(200, []byte(b.String()), "mybot", testMax)
	elapsed := time.Since(start)
	t.Run("truncated", func(t *testing.T) {
		if !hasProblem(info.Problems, "truncated at line", "User-agent pairs") {
			t.Errorf("Problems = %q; want a work-limit truncation", info.Problems)
		}
		if bytes.Contains(info.Body, []byte("/last")) {
			t.Error("Body not truncated")
		}
	})
	t.Run("rules before the limit kept", func(t *testing.T) {
		data := reparse(t, info.Body)
		if data.TestAgent("/first", "mybot") || data.TestAgent("/more", "a7") {
			t.Error("rules before the limit lost")
		}
		if info.CrawlDelay != 2*time.Second {
			t.Errorf("CrawlDelay = %v; want 2s", info.CrawlDelay)
		}
	})
	t.Run("fast", func(t *testing.T) {
		if elapsed > 5*time.Second {
			t.Errorf("Parse took %v", elapsed)
		}
	})
}

func TestParseRobotsProblemsCapped(t *testing.T) {
	body := "User-agent: *\n" + strings.Repeat("Crawl-delay: x\n", 1000) + "Crawl-delay: 1\n"
	info := Parse(200, []byte(body), "mybot", testMax)
	if len(info.Problems) != maxLineProblems+1 {
		t.Errorf("len(Problems) = %d; want %d", len(info.Problems), maxLineProblems+1)
	}
	if !hasProblem(info.Problems, "984 more") {
		t.Errorf("Problems = %q; want a summary of 984 more", info.Problems)
	}
	if info.CrawlDelay != time.Second {
		t.Errorf("CrawlDelay = %v; want 1s", info.CrawlDelay)
	}
}

func TestParseRobotsDoesNotMutateSharedGroup(t *testing.T) {
	// FindGroup returns a package-level empty group when nothing matches.
	for range 2 {
		info := Parse(200, []byte("User-agent: other\nCrawl-delay: 1e20\n"), "mybot", testMax)
		if info.CrawlDelay != 0 || info.Published != 0 {
			t.Fatalf("CrawlDelay, Published = %v, %v; want 0", info.CrawlDelay, info.Published)
		}
	}
	data, _ := temoto.FromBytes(nil)
	if d := data.FindGroup("mybot").CrawlDelay; d != 0 {
		t.Fatalf("shared empty group's CrawlDelay = %v", d)
	}
}

// The RFC 9309 class of each status: rules for a 2xx; unavailable (allow all) for a 4xx and a 3xx
// left after the redirects; unreachable (disallow all, retry) for a 5xx, a 429 and anything else.
func TestStatusClass(t *testing.T) {
	for status, want := range map[int]Class{
		0: Unreachable, 100: Unreachable, 199: Unreachable,
		200: Rules, 204: Rules, 299: Rules,
		300: Unavailable, 301: Unavailable, 308: Unavailable, 400: Unavailable, 401: Unavailable, 403: Unavailable,
		404: Unavailable, 410: Unavailable, 428: Unavailable, 430: Unavailable, 499: Unavailable,
		429: Unreachable, 500: Unreachable, 503: Unreachable, 599: Unreachable, 999: Unreachable,
	} {
		if got := StatusClass(status); got != want {
			t.Errorf("StatusClass(%d) = %d, want %d", status, got, want)
		}
	}
}

package reporthtml

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/collypace/ext/audit"
	"github.com/collypace/ext/internal/auditreport"
	"golang.org/x/net/html"
)

var t0 = time.Date(2026, 12, 2, 12, 0, 0, 0, time.UTC)

// line is one audit event of host at t with the schema's fields and the given ones.
func line(host string, event audit.Event, t time.Time, fields map[string]any) string {
	m := map[string]any{
		audit.FieldTimestamp: t.Format(time.RFC3339Nano), audit.FieldPipelineID: "test", audit.FieldTargetDomain: host,
		audit.FieldEvent: event, audit.FieldTrigger: "base", audit.FieldBaseDelayMS: 1000, audit.FieldComputedDelay: 1000,
		audit.FieldJitterMS: 0, audit.FieldComplianceFlag: true, audit.FieldStatusCode: 0, audit.FieldSchema: audit.Schema,
	}
	for k, v := range fields {
		m[k] = v
	}
	b, _ := json.Marshal(m)
	return string(b) + "\n"
}

// dep is a departure at t0+ms with the floor of 1 s and the given Crawl-delay.
func dep(host string, ms int, path string, crawlMS int) string {
	return line(host, audit.EventDelayApplied, t0.Add(time.Duration(ms)*time.Millisecond), map[string]any{
		audit.FieldURL: "https://" + host + path, audit.FieldWaitMS: 0, audit.FieldIntervalMS: max(1000, crawlMS),
		audit.FieldCrawlDelayMS: crawlMS, audit.FieldRateIntervalMS: 0,
	})
}

// hold is a Retry-After window from t0+fromMS to t0+toMS.
func hold(host string, fromMS, toMS int) string {
	from, to := t0.Add(time.Duration(fromMS)*time.Millisecond), t0.Add(time.Duration(toMS)*time.Millisecond)
	return line(host, audit.EventRetryAfterHonoured, from, map[string]any{audit.FieldStatusCode: 429,
		audit.FieldComputedDelay: toMS - fromMS, audit.FieldWindowStart: from.Format(time.RFC3339Nano), audit.FieldWindowEnd: to.Format(time.RFC3339Nano)})
}

// The HTML page parses and holds one chart (an inline SVG) per host; text from the trail is escaped.
func TestHTMLOneChartPerHost(t *testing.T) {
	trail := dep("a.example", 0, "/x", 0) + dep("b.example", 100, "/y", 2000) + hold("b.example", 200, 3000) +
		dep("a.example", 1000, "/z", 0) + dep("b.example", 2100, "/w", 2000) + dep("<script>alert(1)</script>", 0, "/", 0)
	tr := &auditreport.Trail{}
	if err := tr.Read(strings.NewReader(trail), "trail.jsonl"); err != nil {
		t.Fatal(err)
	}
	r := auditreport.Check(tr, auditreport.DefaultTolerance)
	if r.OK() {
		t.Fatal("want the departure to b.example inside its window reported")
	}
	var buf bytes.Buffer
	if err := Write(&buf, r); err != nil {
		t.Fatal(err)
	}
	doc, err := html.Parse(bytes.NewReader(buf.Bytes()))
	if err != nil {
		t.Fatal(err)
	}
	var charts, scripts int
	var headings []string
	for n := range doc.Descendants() {
		if n.Type != html.ElementNode {
			continue
		}
		switch n.Data {
		case "figure":
			var svgs int
			for c := range n.Descendants() {
				if c.Type == html.ElementNode && c.Data == "svg" {
					svgs++
				}
			}
			if svgs == 1 {
				charts++
			}
		case "h2":
			if n.FirstChild != nil {
				headings = append(headings, n.FirstChild.Data)
			}
		case "script":
			scripts++
		}
	}
	if charts != len(r.Hosts) || len(r.Hosts) != 3 || scripts != 0 {
		t.Errorf("%d charts, %d scripts for %d hosts (%v)", charts, scripts, len(r.Hosts), headings)
	}
	if !strings.Contains(buf.String(), "1 violation(s)") || !strings.Contains(buf.String(), "https://b.example/w") {
		t.Errorf("the page does not name the violation")
	}
}

package auditreport

import (
	"bytes"
	"strings"
	"testing"

	"golang.org/x/net/html"
)

// The HTML page parses and holds one chart (an inline SVG) per host; text from the trail is escaped.
func TestHTMLOneChartPerHost(t *testing.T) {
	trail := dep("a.example", 0, "/x", 0) + dep("b.example", 100, "/y", 2000) + hold("b.example", 200, 3000) +
		dep("a.example", 1000, "/z", 0) + dep("b.example", 2100, "/w", 2000) + dep("<script>alert(1)</script>", 0, "/", 0)
	r := checkBytes(t, DefaultTolerance, []byte(trail))
	if r.OK() {
		t.Fatal("want the departure to b.example inside its window reported")
	}
	var buf bytes.Buffer
	if err := r.WriteHTML(&buf); err != nil {
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

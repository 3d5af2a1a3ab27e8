package reporthtml

import (
	"bytes"
	"encoding/xml"
	"math"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/collypace/ext/audit"
	"github.com/collypace/ext/internal/auditreport"
	"gonum.org/v1/plot/vg"
)

// svgText is one text element of a chart, in canvas coordinates (points, y up from the bottom).
type svgText struct {
	x, y    float64
	family  string
	text    string
	rotated bool // in a rotated group: x and y are not canvas coordinates
}

var fontFamily = regexp.MustCompile(`font-family:([^;]+)`)

// chartTexts parses a chart's SVG and returns its height and its text elements that are not rotated
// (the y axis's label is). vgsvg writes each text with transform="scale(1, -1)", so its y attribute is
// minus the canvas's y.
func chartTexts(t *testing.T, svg []byte) (height float64, texts []svgText) {
	t.Helper()
	dec := xml.NewDecoder(bytes.NewReader(svg))
	var cur *svgText
	var rotated []bool // per open <g>
	for {
		tok, err := dec.Token()
		if err != nil {
			break
		}
		switch e := tok.(type) {
		case xml.StartElement:
			attr := map[string]string{}
			for _, a := range e.Attr {
				attr[a.Name.Local] = a.Value
			}
			switch e.Name.Local {
			case "g":
				rotated = append(rotated, strings.Contains(attr["transform"], "rotate") || len(rotated) > 0 && rotated[len(rotated)-1])
			case "svg":
				height, _ = strconv.ParseFloat(strings.TrimSuffix(attr["height"], "pt"), 64)
			case "text":
				if attr["transform"] != "scale(1, -1)" {
					t.Fatalf("a text element with transform %q: the test reads only vgsvg's scale(1, -1)", attr["transform"])
				}
				x, _ := strconv.ParseFloat(attr["x"], 64)
				y, _ := strconv.ParseFloat(attr["y"], 64)
				cur = &svgText{x: x, y: -y, rotated: len(rotated) > 0 && rotated[len(rotated)-1]}
				if m := fontFamily.FindStringSubmatch(attr["style"]); m != nil {
					cur.family = m[1]
				}
			}
		case xml.CharData:
			if cur != nil {
				cur.text += string(e)
			}
		case xml.EndElement:
			switch {
			case e.Name.Local == "g" && len(rotated) > 0:
				rotated = rotated[:len(rotated)-1]
			case e.Name.Local == "text" && cur != nil:
				if !cur.rotated {
					texts = append(texts, *cur)
				}
				cur = nil
			}
		}
	}
	return height, texts
}

// TestChartLegendFitsWithPlainMachineFonts: the chart legend was once cut off
// at the right edge ("window: no departure allowed (Retry-After, rat…") and drawn over the points,
// because gonum laid the text out with Liberation Serif, which a plain machine lacks, and drew the
// legend inside the plot. Every text of a chart with every legend entry is now in DejaVu Sans (what a
// plain machine has, so the metrics used are the metrics rendered); each legend label is in the band
// under the plot, never over it; and it fits in the canvas even drawn 15 % wider than measured, with
// no two labels of a row overlapping. (Checked by eye too: rsvg-convert at 864×441 px, the chart's
// size, with Debian's fonts.)
func TestChartLegendFitsWithPlainMachineFonts(t *testing.T) {
	h := "shop.example"
	trail := dep(h, 0, "/a", 0) + dep(h, 1000, "/b", 0) + hold(h, 1500, 3000) + dep(h, 2000, "/inside", 0) +
		dep(h, 3000, "/c", 2000) + dep(h, 5000, "/d", 2000) +
		line(h, audit.EventDelayApplied, t0.Add(7*time.Second), map[string]any{audit.FieldURL: "https://shop.example/e", audit.FieldWaitMS: 0,
			audit.FieldIntervalMS: 1500, audit.FieldCrawlDelayMS: 0, audit.FieldRateIntervalMS: 1500})
	tr := &auditreport.Trail{}
	if err := tr.Read(strings.NewReader(trail), "trail.jsonl"); err != nil {
		t.Fatal(err)
	}
	r := auditreport.Check(tr, auditreport.DefaultTolerance)
	host := r.Hosts[0]
	_, entries, err := chartPlot(host, t0, r.Violations)
	if err != nil {
		t.Fatal(err)
	}
	labels := map[string]bool{}
	for _, e := range entries {
		labels[e.label] = true
	}
	if len(entries) != 8 {
		t.Fatalf("%d legend entries, want all 8 (window, floor, Crawl-delay, rate limit, interval, gaps, departures, violation): %v", len(entries), labels)
	}
	boxes, band := layoutLegend(entries, chartWidth)
	svg, err := chart(host, t0, r.Violations)
	if err != nil {
		t.Fatal(err)
	}
	height, texts := chartTexts(t, svg)
	if want := (chartHeight + band).Points(); math.Abs(height-want) > 0.01 {
		t.Errorf("chart height %vpt, want %vpt", height, want)
	}
	width := chartWidth.Points()
	seen := 0
	for _, tx := range texts {
		if tx.family != "DejaVu Sans" {
			t.Errorf("%q is in %q, which a plain machine may lack", tx.text, tx.family)
		}
		inBand := tx.y < band.Points()
		if !labels[tx.text] {
			if inBand {
				t.Errorf("%q (not a legend label) is in the legend's band", tx.text)
			}
			continue
		}
		seen++
		if !inBand {
			t.Errorf("legend label %q at y=%.1fpt is over the plot (the band is [0, %.1f))", tx.text, tx.y, band.Points())
		}
		w := textStyle(legendFontSize).Width(tx.text).Points()
		if tx.x < 0 || tx.x+w*legendSlack > width {
			t.Errorf("legend label %q spans [%.1f, %.1f]pt drawn %.0f %% wider: outside the %vpt canvas", tx.text, tx.x, tx.x+w*legendSlack, (legendSlack-1)*100, width)
		}
	}
	if seen != len(entries) {
		t.Errorf("%d legend labels drawn, want %d", seen, len(entries))
	}
	for i := 1; i < len(boxes); i++ {
		if a, b := boxes[i-1], boxes[i]; a.row == b.row && a.end+vg.Length(legendGap)/2 > b.x {
			t.Errorf("legend entries %q and %q overlap: %v > %v", a.entry.label, b.entry.label, a.end, b.x)
		}
	}
}

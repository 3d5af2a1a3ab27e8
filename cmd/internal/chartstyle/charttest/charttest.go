// Package charttest checks a chart's SVG the way a plain machine draws it: every text in DejaVu Sans,
// each legend label inside its band and the canvas even drawn wider than measured.
package charttest

import (
	"bytes"
	"encoding/xml"
	"math"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/collypace/ext/cmd/internal/chartstyle"
	"gonum.org/v1/plot/vg"
)

// Text is one text element of a chart, in canvas coordinates (points, y up from the bottom).
type Text struct {
	X, Y    float64
	Family  string
	Text    string
	Rotated bool // in a rotated group: X and Y are not canvas coordinates
}

var fontFamily = regexp.MustCompile(`font-family:([^;]+)`)

// Texts parses a chart's SVG and returns its size and its text elements. vgsvg writes each text with
// transform="scale(1, -1)", so its y attribute is minus the canvas's y.
func Texts(t testing.TB, svg []byte) (width, height float64, texts []Text) {
	t.Helper()
	dec := xml.NewDecoder(bytes.NewReader(svg))
	var cur *Text
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
				width, _ = strconv.ParseFloat(strings.TrimSuffix(attr["width"], "pt"), 64)
				height, _ = strconv.ParseFloat(strings.TrimSuffix(attr["height"], "pt"), 64)
			case "text":
				if attr["transform"] != "scale(1, -1)" {
					t.Fatalf("a text element with transform %q: the test reads only vgsvg's scale(1, -1)", attr["transform"])
				}
				x, _ := strconv.ParseFloat(attr["x"], 64)
				y, _ := strconv.ParseFloat(attr["y"], 64)
				cur = &Text{X: x, Y: -y, Rotated: len(rotated) > 0 && rotated[len(rotated)-1]}
				if m := fontFamily.FindStringSubmatch(attr["style"]); m != nil {
					cur.Family = m[1]
				}
			}
		case xml.CharData:
			if cur != nil {
				cur.Text += string(e)
			}
		case xml.EndElement:
			switch {
			case e.Name.Local == "g" && len(rotated) > 0:
				rotated = rotated[:len(rotated)-1]
			case e.Name.Local == "text" && cur != nil:
				texts = append(texts, *cur)
				cur = nil
			}
		}
	}
	return width, height, texts
}

// CheckLegends checks the SVG of a chart drawn with layout l: it is the layout's size; every text is
// in DejaVu Sans (so the metrics gonum laid it out with are the ones a plain machine draws with);
// each panel's legend labels are drawn once each, inside that panel's band (never over a plot), and
// inside the canvas even drawn chartstyle.Slack wider than measured; no other text is in a band; and
// no two entries of a legend row overlap.
func CheckLegends(t *testing.T, svg []byte, l chartstyle.Layout) {
	t.Helper()
	width, height, texts := Texts(t, svg)
	if math.Abs(width-l.Width.Points()) > 0.01 || math.Abs(height-l.Height.Points()) > 0.01 {
		t.Errorf("chart is %vpt × %vpt, want %vpt × %vpt", width, height, l.Width.Points(), l.Height.Points())
	}
	band := map[string]int{} // label → its panel
	want := 0
	for i, p := range l.Panels {
		for _, b := range p.Boxes {
			if j, dup := band[b.Entry.Label]; dup {
				t.Fatalf("legend label %q is in panels %d and %d: the test cannot tell which band it belongs in", b.Entry.Label, j, i)
			}
			band[b.Entry.Label] = i
			want++
		}
		for k := 1; k < len(p.Boxes); k++ {
			if a, b := p.Boxes[k-1], p.Boxes[k]; a.Row == b.Row && a.End+vg.Length(chartstyle.LegendGap)/2 > b.X {
				t.Errorf("legend entries %q and %q overlap: %v > %v", a.Entry.Label, b.Entry.Label, a.End, b.X)
			}
		}
	}
	inBand := func(y float64) int {
		for i, p := range l.Panels {
			if y >= p.Band.Min.Y.Points() && y < p.Band.Max.Y.Points() {
				return i
			}
		}
		return -1
	}
	seen := 0
	for _, tx := range texts {
		if tx.Family != "DejaVu Sans" {
			t.Errorf("%q is in %q, which a plain machine may lack", tx.Text, tx.Family)
		}
		if tx.Rotated {
			continue // the y axis's label, drawn in its plot
		}
		i, isLabel := band[tx.Text]
		at := inBand(tx.Y)
		if !isLabel {
			if at >= 0 {
				t.Errorf("%q (not a legend label) is in panel %d's legend band", tx.Text, at)
			}
			continue
		}
		seen++
		if at != i {
			b := l.Panels[i].Band
			t.Errorf("legend label %q at y=%.1fpt is outside its band [%.1f, %.1f)pt", tx.Text, tx.Y, b.Min.Y.Points(), b.Max.Y.Points())
		}
		w := chartstyle.TextStyle(chartstyle.LegendSize).Width(tx.Text).Points()
		if tx.X < 0 || tx.X+w*chartstyle.Slack > width {
			t.Errorf("legend label %q spans [%.1f, %.1f]pt drawn %.0f %% wider: outside the %vpt canvas", tx.Text, tx.X, tx.X+w*chartstyle.Slack, (chartstyle.Slack-1)*100, width)
		}
	}
	if seen != want {
		t.Errorf("%d legend labels drawn, want %d", seen, want)
	}
}

package reporthtml

import (
	"bytes"
	"image/color"
	"strings"
	"time"

	"github.com/collypace/ext/cmd/internal/chartstyle"
	"github.com/collypace/ext/internal/auditreport"
	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgsvg"
)

// Chart geometry and colours (Okabe-Ito, as cmd/pacebench).
const (
	chartWidth  = 9 * vg.Inch
	chartHeight = 4 * vg.Inch
)

var (
	gapColor        = color.RGBA{G: 114, B: 178, A: 255}                      // blue
	intervalColor   = color.RGBA{A: 255}                                      // black
	floorColor      = color.RGBA{R: 150, G: 150, B: 150, A: 255}              // grey
	crawlDelayColor = color.RGBA{R: 0, G: 158, B: 115, A: 255}                // bluish green
	rateColor       = color.RGBA{R: 204, G: 121, B: 167, A: 255}              // reddish purple
	windowColor     = color.NRGBA{R: 240, G: 200, B: 120, A: 160}             // light orange
	violationColor  = color.RGBA{R: 213, G: 94, A: 255}                       // vermillion
	departureColor  = color.RGBA{R: 86, G: 86, B: 86, A: 255}                 // dark grey
	dashes          = []vg.Length{vg.Points(4), vg.Points(3)}                 // constraints
	windowOutline   = draw.LineStyle{Color: windowColor, Width: vg.Points(0)} // windows have no outline
)

// chart draws the host's timeline as an SVG document: departures along the bottom, each gap at the
// departure that ends it, the interval in force and each constraint, windows shaded, violations marked;
// the legend in a band under the plot, never over a point. The x axis is seconds since t0. No text
// from the trail is drawn: the caller titles the chart.
func chart(h *auditreport.Host, t0 time.Time, vs []auditreport.Violation) ([]byte, error) {
	panel, err := chartPanel(h, t0, vs)
	if err != nil {
		return nil, err
	}
	panels := []chartstyle.Panel{panel}
	l := chartstyle.Arrange(panels, chartWidth, chartHeight)
	c := vgsvg.New(l.Width, l.Height)
	l.Draw(draw.New(c), panels)
	var buf bytes.Buffer
	if _, err := c.WriteTo(&buf); err != nil {
		return nil, err
	}
	// Inline in HTML: drop the XML declaration and generator comment before <svg.
	s := buf.String()
	if i := strings.Index(s, "<svg"); i > 0 {
		s = s[i:]
	}
	return []byte(s), nil
}

// chartPanel returns the host's plot and its legend, which goes under the plot.
func chartPanel(h *auditreport.Host, t0 time.Time, vs []auditreport.Violation) (chartstyle.Panel, error) {
	p := plot.New()
	chartstyle.Apply(p)
	p.X.Label.Text = "seconds since the report's origin (first departure or window)"
	p.Y.Label.Text = "seconds"
	p.Add(plotter.NewGrid())
	var entries []chartstyle.Entry
	sec := func(t time.Time) float64 { return t.Sub(t0).Seconds() }

	top := 0.0
	var gaps, interval, floor, crawl, rate, deps plotter.XYs
	for i, d := range h.Departures {
		x := sec(d.At)
		deps = append(deps, plotter.XY{X: x})
		interval = append(interval, plotter.XY{X: x, Y: d.Interval.Seconds()})
		floor = append(floor, plotter.XY{X: x, Y: d.Floor.Seconds()})
		crawl = append(crawl, plotter.XY{X: x, Y: d.CrawlDelay.Seconds()})
		rate = append(rate, plotter.XY{X: x, Y: d.RateInterval.Seconds()})
		top = max(top, d.Interval.Seconds(), d.Required.Seconds())
		if i > 0 {
			gaps = append(gaps, plotter.XY{X: x, Y: d.Gap.Seconds()})
			top = max(top, d.Gap.Seconds())
		}
	}
	if top == 0 {
		top = 1
	}
	top *= 1.1 // the legend is under the plot
	for _, w := range h.Windows {
		poly, err := plotter.NewPolygon(plotter.XYs{{X: sec(w.Start), Y: 0}, {X: sec(w.End), Y: 0}, {X: sec(w.End), Y: top}, {X: sec(w.Start), Y: top}})
		if err != nil {
			return chartstyle.Panel{}, err
		}
		poly.Color, poly.LineStyle = windowColor, windowOutline
		p.Add(poly)
	}
	if len(h.Windows) > 0 {
		legend, _ := plotter.NewPolygon(plotter.XYs{{}, {X: 1}, {X: 1, Y: 1}})
		legend.Color, legend.LineStyle = windowColor, windowOutline
		entries = append(entries, chartstyle.Entry{Label: "window: no departure allowed", Thumbs: []plot.Thumbnailer{legend}})
	}
	if err := addSteps(p, &entries, floor, floorColor, dashes, "floor (base delay)"); err != nil {
		return chartstyle.Panel{}, err
	}
	for _, s := range []struct {
		pts   plotter.XYs
		c     color.Color
		label string
	}{{crawl, crawlDelayColor, "robots.txt Crawl-delay"}, {rate, rateColor, "rate-limit interval"}} {
		if nonZero(s.pts) {
			if err := addSteps(p, &entries, s.pts, s.c, dashes, s.label); err != nil {
				return chartstyle.Panel{}, err
			}
		}
	}
	if len(interval) > 0 {
		if err := addSteps(p, &entries, interval, intervalColor, nil, "pacer's interval"); err != nil {
			return chartstyle.Panel{}, err
		}
	}
	if err := addGlyphs(p, &entries, gaps, draw.GlyphStyle{Color: gapColor, Radius: vg.Points(2), Shape: draw.CircleGlyph{}}, "gap before a departure"); err != nil {
		return chartstyle.Panel{}, err
	}
	if err := addGlyphs(p, &entries, deps, draw.GlyphStyle{Color: departureColor, Radius: vg.Points(3), Shape: draw.PlusGlyph{}}, "departure"); err != nil {
		return chartstyle.Panel{}, err
	}
	var bad plotter.XYs
	for _, v := range vs {
		if v.Host == h.Key {
			bad = append(bad, plotter.XY{X: sec(v.At), Y: 0})
		}
	}
	if err := addGlyphs(p, &entries, bad, draw.GlyphStyle{Color: violationColor, Radius: vg.Points(6), Shape: draw.CrossGlyph{}}, "violation"); err != nil {
		return chartstyle.Panel{}, err
	}
	p.Y.Min, p.Y.Max = 0, top
	return chartstyle.Panel{Plot: p, Legend: entries}, nil
}

func addSteps(p *plot.Plot, entries *[]chartstyle.Entry, pts plotter.XYs, c color.Color, d []vg.Length, label string) error {
	if len(pts) == 0 {
		return nil
	}
	l, err := plotter.NewLine(pts)
	if err != nil {
		return err
	}
	l.StepStyle = plotter.PreStep // the value carried by a departure held over the gap before it
	l.Color, l.Width, l.Dashes = c, vg.Points(1.2), d
	p.Add(l)
	*entries = append(*entries, chartstyle.Entry{Label: label, Thumbs: []plot.Thumbnailer{l}})
	return nil
}

func addGlyphs(p *plot.Plot, entries *[]chartstyle.Entry, pts plotter.XYs, g draw.GlyphStyle, label string) error {
	if len(pts) == 0 {
		return nil
	}
	s, err := plotter.NewScatter(pts)
	if err != nil {
		return err
	}
	s.GlyphStyle = g
	p.Add(s)
	*entries = append(*entries, chartstyle.Entry{Label: label, Thumbs: []plot.Thumbnailer{s}})
	return nil
}

func nonZero(pts plotter.XYs) bool {
	for _, p := range pts {
		if p.Y != 0 {
			return true
		}
	}
	return false
}

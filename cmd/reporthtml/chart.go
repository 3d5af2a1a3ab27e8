package reporthtml

import (
	"bytes"
	"image/color"
	"strings"
	"time"

	"github.com/collypace/ext/internal/auditreport"
	"gonum.org/v1/plot"
	"gonum.org/v1/plot/font"
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
	p, entries, err := chartPlot(h, t0, vs)
	if err != nil {
		return nil, err
	}
	boxes, band := layoutLegend(entries, chartWidth)
	c := vgsvg.New(chartWidth, chartHeight+band)
	dc := draw.New(c)
	dc.FillPolygon(color.White, []vg.Point{dc.Min, {X: dc.Max.X, Y: dc.Min.Y}, dc.Max, {X: dc.Min.X, Y: dc.Max.Y}}) // the band too
	p.Draw(draw.Crop(dc, 0, 0, band, 0))
	drawLegend(dc, boxes, band)
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

// chartPlot returns the host's plot and its legend, which the caller draws under the plot.
func chartPlot(h *auditreport.Host, t0 time.Time, vs []auditreport.Violation) (*plot.Plot, []legendEntry, error) {
	p := plot.New()
	p.X.Label.Text = "seconds since the report's origin (first departure or window)"
	p.Y.Label.Text = "seconds"
	p.X.Label.TextStyle.Font, p.Y.Label.TextStyle.Font = font.From(chartFont(), 10), font.From(chartFont(), 10)
	p.X.Tick.Label.Font, p.Y.Tick.Label.Font = font.From(chartFont(), 9), font.From(chartFont(), 9)
	p.Add(plotter.NewGrid())
	var entries []legendEntry
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
			return nil, nil, err
		}
		poly.Color, poly.LineStyle = windowColor, windowOutline
		p.Add(poly)
	}
	if len(h.Windows) > 0 {
		legend, _ := plotter.NewPolygon(plotter.XYs{{}, {X: 1}, {X: 1, Y: 1}})
		legend.Color, legend.LineStyle = windowColor, windowOutline
		entries = append(entries, legendEntry{"window: no departure allowed", []plot.Thumbnailer{legend}})
	}
	if err := addSteps(p, &entries, floor, floorColor, dashes, "floor (base delay)"); err != nil {
		return nil, nil, err
	}
	for _, s := range []struct {
		pts   plotter.XYs
		c     color.Color
		label string
	}{{crawl, crawlDelayColor, "robots.txt Crawl-delay"}, {rate, rateColor, "rate-limit interval"}} {
		if nonZero(s.pts) {
			if err := addSteps(p, &entries, s.pts, s.c, dashes, s.label); err != nil {
				return nil, nil, err
			}
		}
	}
	if len(interval) > 0 {
		if err := addSteps(p, &entries, interval, intervalColor, nil, "pacer's interval"); err != nil {
			return nil, nil, err
		}
	}
	if err := addGlyphs(p, &entries, gaps, draw.GlyphStyle{Color: gapColor, Radius: vg.Points(2), Shape: draw.CircleGlyph{}}, "gap before a departure"); err != nil {
		return nil, nil, err
	}
	if err := addGlyphs(p, &entries, deps, draw.GlyphStyle{Color: departureColor, Radius: vg.Points(3), Shape: draw.PlusGlyph{}}, "departure"); err != nil {
		return nil, nil, err
	}
	var bad plotter.XYs
	for _, v := range vs {
		if v.Host == h.Key {
			bad = append(bad, plotter.XY{X: sec(v.At), Y: 0})
		}
	}
	if err := addGlyphs(p, &entries, bad, draw.GlyphStyle{Color: violationColor, Radius: vg.Points(6), Shape: draw.CrossGlyph{}}, "violation"); err != nil {
		return nil, nil, err
	}
	p.Y.Min, p.Y.Max = 0, top
	return p, entries, nil
}

func addSteps(p *plot.Plot, entries *[]legendEntry, pts plotter.XYs, c color.Color, d []vg.Length, label string) error {
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
	*entries = append(*entries, legendEntry{label, []plot.Thumbnailer{l}})
	return nil
}

func addGlyphs(p *plot.Plot, entries *[]legendEntry, pts plotter.XYs, g draw.GlyphStyle, label string) error {
	if len(pts) == 0 {
		return nil
	}
	s, err := plotter.NewScatter(pts)
	if err != nil {
		return err
	}
	s.GlyphStyle = g
	p.Add(s)
	*entries = append(*entries, legendEntry{label, []plot.Thumbnailer{s}})
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

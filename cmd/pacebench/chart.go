package main

import (
	"fmt"
	"image/color"
	"os"
	"path/filepath"
	"slices"
	"strconv"

	"github.com/collypace/ext/cmd/internal/chartstyle"
	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	_ "gonum.org/v1/plot/vg/vgimg" // registers png
	_ "gonum.org/v1/plot/vg/vgsvg" // registers svg

	"github.com/collypace/ext/internal/scenario"
)

// Chart geometry and colours (Okabe-Ito: readable by colour-blind readers).
const (
	chartWidth  = 10 * vg.Inch
	chartHeight = 7.5 * vg.Inch
)

var (
	modeColor = [...]color.Color{
		Static:   color.RGBA{R: 213, G: 94, A: 255},  // vermillion
		Adaptive: color.RGBA{G: 114, B: 178, A: 255}, // blue
	}
	intervalColor = color.RGBA{A: 255}                         // black
	floorColor    = color.RGBA{R: 150, G: 150, B: 150, A: 255} // grey
	refusedColor  = color.RGBA{A: 255}                         // black
	outageColor   = color.RGBA{R: 240, G: 200, B: 200, A: 255} // light red
	groupDashes   = [][]vg.Length{nil, {vg.Points(6), vg.Points(3)}, {vg.Points(2), vg.Points(2)}}
)

// renderChart draws the scenario's chart into path, in the format its extension names (svg or png):
// on top, requests arriving at each server over time, cumulative, static and adaptive, refusals
// marked; below, each start-to-start gap at the server and the adaptive pacer's interval. Each plot's
// legend is in a band under it.
func renderChart(r *ScenarioResult, path string) error {
	panels, err := chartPanels(r)
	if err != nil {
		return err
	}
	l := chartstyle.Arrange(panels, chartWidth, chartHeight)
	format := filepath.Ext(path)
	if format != "" {
		format = format[1:]
	}
	c, err := draw.NewFormattedCanvas(l.Width, l.Height, format)
	if err != nil {
		return fmt.Errorf("chart %s: %w", path, err)
	}
	l.Draw(draw.New(c), panels)
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if _, err := c.WriteTo(f); err != nil {
		f.Close()
		return fmt.Errorf("chart %s: %w", path, err)
	}
	return f.Close()
}

// chartPanels returns the chart's two plots, over the same seconds, with their legends.
func chartPanels(r *ScenarioResult) ([]chartstyle.Panel, error) {
	top, err := arrivalsPanel(r)
	if err != nil {
		return nil, err
	}
	bottom, err := gapsPanel(r)
	if err != nil {
		return nil, err
	}
	end := max(r.Runs[Static].Wall, r.Runs[Adaptive].Wall).Seconds()
	for _, p := range []*plot.Plot{top.Plot, bottom.Plot} {
		p.X.Min, p.X.Max = 0, end
	}
	return []chartstyle.Panel{top, bottom}, nil
}

// arrivalsPanel is the cumulative count of page requests at the servers of each group, per mode.
func arrivalsPanel(r *ScenarioResult) (chartstyle.Panel, error) {
	p := plot.New()
	chartstyle.Apply(p)
	p.Title.Text = r.Scenario.Title
	p.X.Label.Text = "seconds since the crawl started"
	p.Y.Label.Text = "requests received (cumulative)"
	p.Add(plotter.NewGrid())
	most := 0
	p.Y.Tick.Marker = integerTicks{}
	var legend []chartstyle.Entry
	if err := shadeOutage(p, &legend, r); err != nil {
		return chartstyle.Panel{}, err
	}
	refusedGlyph := draw.GlyphStyle{Color: refusedColor, Radius: vg.Points(3.5), Shape: draw.CrossGlyph{}}
	for _, mode := range []Mode{Static, Adaptive} {
		run := r.Runs[mode]
		for g, grp := range r.Scenario.Groups {
			arr := groupArrivals(run, g)
			most = max(most, len(arr))
			pts := make(plotter.XYs, 0, len(arr)+1)
			var refused plotter.XYs
			pts = append(pts, plotter.XY{X: 0, Y: 0})
			for i, a := range arr {
				x := a.At.Sub(run.Start).Seconds()
				pts = append(pts, plotter.XY{X: x, Y: float64(i + 1)})
				if a.Status == 429 || a.Status == 503 {
					refused = append(refused, plotter.XY{X: x, Y: float64(i + 1)})
				}
			}
			line, err := plotter.NewLine(pts)
			if err != nil {
				return chartstyle.Panel{}, err
			}
			line.StepStyle = plotter.PostStep
			line.Color = groupColor(mode, g)
			line.Width = vg.Points(1.5)
			line.Dashes = groupDashes[g%len(groupDashes)]
			p.Add(line)
			legend = append(legend, chartstyle.Entry{Label: seriesName(mode, r.Scenario, grp), Thumbs: []plot.Thumbnailer{line}})
			if len(refused) > 0 {
				s, err := plotter.NewScatter(refused)
				if err != nil {
					return chartstyle.Panel{}, err
				}
				s.GlyphStyle = refusedGlyph
				p.Add(s)
			}
		}
	}
	legendGlyph, _ := plotter.NewScatter(plotter.XYs{{}})
	legendGlyph.GlyphStyle = refusedGlyph
	legend = append(legend, chartstyle.Entry{Label: "refused (429/503)", Thumbs: []plot.Thumbnailer{legendGlyph}})
	p.Y.Min = 0
	p.Y.Max = float64(max(most, 1)) * 1.05
	return chartstyle.Panel{Plot: p, Legend: legend}, nil
}

// gapsPanel shows each start-to-start gap at the servers (at the time of the later request) and the
// adaptive pacer's interval over time for the first host of each group.
func gapsPanel(r *ScenarioResult) (chartstyle.Panel, error) {
	p := plot.New()
	chartstyle.Apply(p)
	p.X.Label.Text = "seconds since the crawl started"
	p.Y.Label.Text = "seconds"
	p.Add(plotter.NewGrid())
	var legend []chartstyle.Entry
	maxY := 0.0
	for _, mode := range []Mode{Static, Adaptive} {
		run := r.Runs[mode]
		var pts plotter.XYs
		for _, h := range run.Hosts {
			arr := scenario.PageRequests(h.Arrivals)
			for i := 1; i < len(arr); i++ {
				gap := arr[i].At.Sub(arr[i-1].At).Seconds()
				pts = append(pts, plotter.XY{X: arr[i].At.Sub(run.Start).Seconds(), Y: gap})
				maxY = max(maxY, gap)
			}
		}
		if len(pts) == 0 {
			continue
		}
		s, err := plotter.NewScatter(pts)
		if err != nil {
			return chartstyle.Panel{}, err
		}
		s.GlyphStyle = draw.GlyphStyle{Color: modeColor[mode], Radius: vg.Points(1.8), Shape: draw.CircleGlyph{}}
		p.Add(s)
		legend = append(legend, chartstyle.Entry{Label: mode.String() + ": gap between two requests at the server", Thumbs: []plot.Thumbnailer{s}})
	}
	ad := r.Runs[Adaptive]
	for g, grp := range r.Scenario.Groups {
		var first *HostRun
		for _, h := range ad.Hosts {
			if h.Group == g {
				first = h
				break
			}
		}
		if first == nil || len(ad.Samples[first.Key]) == 0 {
			continue
		}
		var pts plotter.XYs
		for _, s := range ad.Samples[first.Key] {
			iv := s.Status.Interval.Seconds()
			pts = append(pts, plotter.XY{X: s.At.Sub(ad.Start).Seconds(), Y: iv})
			maxY = max(maxY, iv)
		}
		line, err := plotter.NewLine(pts)
		if err != nil {
			return chartstyle.Panel{}, err
		}
		line.StepStyle = plotter.PostStep
		line.Color = intervalColor
		line.Width = vg.Points(1.2)
		line.Dashes = groupDashes[g%len(groupDashes)]
		p.Add(line)
		name := "adaptive pacer's interval"
		if len(r.Scenario.Groups) > 1 {
			name += " · " + grp.Label
			if len(grp.Hosts) > 1 {
				name += " (first host)"
			}
		}
		legend = append(legend, chartstyle.Entry{Label: name, Thumbs: []plot.Thumbnailer{line}})
	}
	end := max(r.Runs[Static].Wall, r.Runs[Adaptive].Wall).Seconds()
	floor, err := plotter.NewLine(plotter.XYs{{X: 0, Y: r.Scenario.Interval.Seconds()}, {X: end, Y: r.Scenario.Interval.Seconds()}})
	if err != nil {
		return chartstyle.Panel{}, err
	}
	floor.Color = floorColor
	floor.Dashes = []vg.Length{vg.Points(4), vg.Points(4)}
	p.Add(floor)
	legend = append(legend, chartstyle.Entry{Label: "configured interval (" + fmtDur(r.Scenario.Interval) + ")", Thumbs: []plot.Thumbnailer{floor}})
	p.Y.Min = 0
	p.Y.Max = max(maxY, r.Scenario.Interval.Seconds()) * 1.05
	return chartstyle.Panel{Plot: p, Legend: legend}, nil
}

// groupColor is the colour of a mode's line for group g: the mode's colour, lighter for later groups
// (their lines often run on top of the first group's).
func groupColor(mode Mode, g int) color.Color {
	c := color.RGBAModel.Convert(modeColor[mode]).(color.RGBA)
	for range g {
		c.R, c.G, c.B = c.R+(255-c.R)/2, c.G+(255-c.G)/2, c.B+(255-c.B)/2
	}
	return c
}

// groupArrivals returns the page requests of a group's hosts, merged in time order.
func groupArrivals(run *Run, g int) []scenario.Arrival {
	var out []scenario.Arrival
	for _, h := range run.Hosts {
		if h.Group == g {
			out = append(out, scenario.PageRequests(h.Arrivals)...)
		}
	}
	slices.SortStableFunc(out, func(a, b scenario.Arrival) int { return a.At.Compare(b.At) })
	return out
}

// seriesName labels one crawl of one group: "static · 200 ms".
func seriesName(mode Mode, sc Scenario, g Group) string {
	if len(sc.Groups) == 1 {
		return mode.String()
	}
	return mode.String() + " · " + g.Label
}

// shadeOutage shades the scripted outage of the adaptive crawl's host (it starts a fixed time after
// the host's first page request, so each crawl's outage is at nearly the same time).
func shadeOutage(p *plot.Plot, legend *[]chartstyle.Entry, r *ScenarioResult) error {
	run := r.Runs[Adaptive]
	for _, h := range run.Hosts {
		o := outageOf(h.Config)
		pages := scenario.PageRequests(h.Arrivals)
		if o == nil || len(pages) == 0 {
			continue
		}
		from := pages[0].At.Add(o.After).Sub(run.Start).Seconds()
		to := from + o.For.Seconds()
		top := float64(len(pages))
		for _, other := range r.Runs[Static].Hosts {
			top = max(top, float64(len(scenario.PageRequests(other.Arrivals))))
		}
		poly, err := plotter.NewPolygon(plotter.XYs{{X: from, Y: 0}, {X: to, Y: 0}, {X: to, Y: top}, {X: from, Y: top}})
		if err != nil {
			return err
		}
		poly.Color = outageColor
		poly.LineStyle.Width = 0
		p.Add(poly)
		*legend = append(*legend, chartstyle.Entry{Label: "outage (503s)", Thumbs: []plot.Thumbnailer{poly}})
		return nil
	}
	return nil
}

// integerTicks labels an axis of counts with whole numbers.
type integerTicks struct{}

// Ticks returns the default ticks between min and max, labelled without decimals.
func (integerTicks) Ticks(min, max float64) []plot.Tick {
	ticks := plot.DefaultTicks{}.Ticks(min, max)
	for i := range ticks {
		if ticks[i].Label != "" {
			ticks[i].Label = strconv.FormatFloat(ticks[i].Value, 'f', 0, 64)
		}
	}
	return ticks
}

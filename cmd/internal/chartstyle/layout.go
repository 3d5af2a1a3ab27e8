package chartstyle

import (
	"image/color"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
)

// Panel is one plot and its legend, which goes in a band under the plot rather than over its data.
type Panel struct {
	Plot   *plot.Plot
	Legend []Entry
}

// Layout places panels one above the other, each plot followed by its legend's band. The plots' data
// areas share their left and right edges (so that their x axes line up) and their height.
type Layout struct {
	Width, Height vg.Length
	Panels        []Placed
}

// Placed is where one panel goes, in canvas coordinates (points, y up from the bottom left).
type Placed struct {
	Plot  vg.Rectangle // what the plot is drawn in, axes and title included
	Band  vg.Rectangle // the legend's band, the canvas's full width
	Boxes []Box        // the legend's entries, from the band's top left
}

// plotInset is the margin left, right and above each plot.
const plotInset = 6

// Arrange lays panels out on a canvas width wide whose plots take plotsHeight together; the canvas is
// that plus the legends' bands.
func Arrange(panels []Panel, width, plotsHeight vg.Length) Layout {
	type overhead struct{ left, right, vertical vg.Length }
	trial := draw.Canvas{Rectangle: vg.Rectangle{Max: vg.Point{X: width - 2*plotInset, Y: plotsHeight / vg.Length(max(len(panels), 1))}}}
	over := make([]overhead, len(panels))
	var left, right, vertical vg.Length
	for i, p := range panels {
		d := p.Plot.DataCanvas(trial)
		over[i] = overhead{
			left:     d.Min.X - trial.Min.X,
			right:    trial.Max.X - d.Max.X,
			vertical: trial.Size().Y - d.Size().Y + plotInset,
		}
		left, right, vertical = max(left, over[i].left), max(right, over[i].right), vertical+over[i].vertical
	}
	dataHeight := max(0, (plotsHeight-vertical)/vg.Length(max(len(panels), 1)))

	l := Layout{Width: width, Height: plotsHeight}
	bands := make([][]Box, len(panels))
	heights := make([]vg.Length, len(panels))
	for i, p := range panels {
		bands[i], heights[i] = LayoutLegend(p.Legend, width)
		l.Height += heights[i]
	}
	y := l.Height
	for i := range panels {
		top := y - plotInset
		y -= dataHeight + over[i].vertical
		plotArea := vg.Rectangle{
			Min: vg.Point{X: plotInset + left - over[i].left, Y: y},
			Max: vg.Point{X: width - plotInset - (right - over[i].right), Y: top},
		}
		band := vg.Rectangle{Min: vg.Point{Y: y - heights[i]}, Max: vg.Point{X: width, Y: y}}
		y -= heights[i]
		l.Panels = append(l.Panels, Placed{Plot: plotArea, Band: band, Boxes: bands[i]})
	}
	return l
}

// Draw draws the panels, as Arrange placed them, on a white canvas dc of the layout's size.
func (l Layout) Draw(dc draw.Canvas, panels []Panel) {
	dc.FillPolygon(color.White, []vg.Point{dc.Min, {X: dc.Max.X, Y: dc.Min.Y}, dc.Max, {X: dc.Min.X, Y: dc.Max.Y}})
	at := func(r vg.Rectangle) draw.Canvas {
		return draw.Canvas{Canvas: dc.Canvas, Rectangle: vg.Rectangle{Min: dc.Min.Add(r.Min), Max: dc.Min.Add(r.Max)}}
	}
	for i, p := range panels {
		p.Plot.Draw(at(l.Panels[i].Plot))
		drawLegend(at(l.Panels[i].Band), l.Panels[i].Boxes)
	}
}

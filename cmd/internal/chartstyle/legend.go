package chartstyle

import (
	"gonum.org/v1/plot"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
)

// Slack is how much wider than measured a label may render and still fit: a fallback face wider
// than DejaVu Sans (Verdana is about 5 % wider).
const Slack = 1.15

// Legend geometry.
const (
	LegendSize  = 9                      // points
	legendThumb = 18 * vg.Millimeter / 4 // thumbnail width, about 13 pt
	LegendGap   = 14                     // points between two entries of a row
	LegendInset = 8                      // points from the canvas's left and right edges
)

// Entry is one legend label and its thumbnails (what the plot draws for it).
type Entry struct {
	Label  string
	Thumbs []plot.Thumbnailer
}

// Box is where one entry goes in the band under a plot: its thumbnail, then its label, left-aligned,
// so that a label drawn wider than measured runs into the space before the next entry, never over
// the plot or off the canvas. Coordinates are from the band's top left, y downward.
type Box struct {
	Entry    Entry
	Row      int
	X        vg.Length // the thumbnail's left
	TextX    vg.Length
	End      vg.Length // the label's right end, allowing Slack
	Measured vg.Length // the label's measured width
}

// LayoutLegend flows the entries into rows across width, left to right. It returns the boxes and the
// band's height (0 for no entries).
func LayoutLegend(entries []Entry, width vg.Length) ([]Box, vg.Length) {
	sty := TextStyle(LegendSize)
	space := sty.Width(" ")
	var boxes []Box
	x, row := vg.Length(LegendInset), 0
	for _, e := range entries {
		w := sty.Width(e.Label)
		need := legendThumb + space + w*Slack
		if x > LegendInset && x+need > width-LegendInset {
			x, row = LegendInset, row+1
		}
		boxes = append(boxes, Box{Entry: e, Row: row, X: x, TextX: x + legendThumb + space, End: x + need, Measured: w})
		x += need + LegendGap
	}
	if len(boxes) == 0 {
		return nil, 0
	}
	return boxes, vg.Length(row+1)*rowHeight() + rowHeight()/2
}

func rowHeight() vg.Length {
	return TextStyle(LegendSize).FontExtents().Height * 1.4
}

// drawLegend draws the boxes in c, the band, from its top left.
func drawLegend(c draw.Canvas, boxes []Box) {
	sty := TextStyle(LegendSize)
	rowH := rowHeight()
	ext := sty.FontExtents()
	for _, b := range boxes {
		top := c.Max.Y - rowH/2 - vg.Length(b.Row)*rowH // the row's top, canvas coordinates (y up)
		icon := draw.Canvas{Canvas: c.Canvas, Rectangle: vg.Rectangle{
			Min: vg.Point{X: c.Min.X + b.X, Y: top - ext.Height},
			Max: vg.Point{X: c.Min.X + b.X + legendThumb, Y: top},
		}}
		for _, t := range b.Entry.Thumbs {
			t.Thumbnail(&icon)
		}
		c.FillText(sty, vg.Point{X: c.Min.X + b.TextX, Y: top - ext.Ascent}, b.Entry.Label)
	}
}

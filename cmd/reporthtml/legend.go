package reporthtml

import (
	"sync"

	"codeberg.org/go-fonts/dejavu/dejavusans"
	"golang.org/x/image/font/opentype"
	"gonum.org/v1/plot"
	"gonum.org/v1/plot/font"
	"gonum.org/v1/plot/text"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
)

// The charts' text is DejaVu Sans: gonum lays text out with the metrics of the font it is given, and
// the page is read with whatever fonts the reader's machine has. DejaVu is what a plain Linux machine
// has (and one of the widest common sans-serif faces), so a machine without it falls back to a
// narrower face: text laid out for DejaVu still fits. Gonum's default, Liberation Serif, is absent
// from a plain machine, whose DejaVu Serif replacement is about 15 % wider: the legend overflowed.
var chartFont = sync.OnceValue(func() font.Font {
	ttf, err := opentype.Parse(dejavusans.TTF)
	if err != nil {
		panic("reporthtml: the embedded DejaVu Sans does not parse: " + err.Error()) // a build defect, not input
	}
	f := font.Font{Typeface: "DejaVu", Variant: "Sans"}
	font.DefaultCache.Add(font.Collection{{Font: f, Face: ttf}})
	return f
})

// textStyle is the charts' text style at size.
func textStyle(size vg.Length) text.Style {
	return text.Style{Font: font.From(chartFont(), size), Handler: plot.DefaultTextHandler}
}

// legendSlack is how much wider than measured a label may render and still fit: a fallback face
// wider than DejaVu Sans (Verdana is about 5 % wider).
const legendSlack = 1.15

// Legend geometry.
const (
	legendFontSize = 9
	legendThumb    = 18 * vg.Millimeter / 4 // thumbnail width, about 13 pt
	legendGap      = 14                     // points between two entries of a row
	legendMargin   = 8                      // points from the canvas's left and right edges
)

// legendEntry is one label and its thumbnails (what the plot draws for it).
type legendEntry struct {
	label  string
	thumbs []plot.Thumbnailer
}

// legendBox is where one entry goes in the band under the plot: its thumbnail, then its label,
// left-aligned, so that a label drawn wider than measured runs into the space before the next entry,
// never over the plot or off the canvas. Coordinates are from the band's top left, y downward.
type legendBox struct {
	entry    legendEntry
	row      int
	x        vg.Length // the thumbnail's left
	textX    vg.Length
	end      vg.Length // the label's right end, allowing legendSlack
	measured vg.Length // the label's measured width
}

// layoutLegend flows the entries into rows across width, left to right. It returns the boxes and the
// band's height.
func layoutLegend(entries []legendEntry, width vg.Length) ([]legendBox, vg.Length) {
	sty := textStyle(legendFontSize)
	space := sty.Width(" ")
	var boxes []legendBox
	x, row := vg.Length(legendMargin), 0
	for _, e := range entries {
		w := sty.Width(e.label)
		need := legendThumb + space + w*legendSlack
		if x > legendMargin && x+need > width-legendMargin {
			x, row = legendMargin, row+1
		}
		boxes = append(boxes, legendBox{entry: e, row: row, x: x, textX: x + legendThumb + space, end: x + need, measured: w})
		x += need + legendGap
	}
	if len(boxes) == 0 {
		return nil, 0
	}
	return boxes, vg.Length(row+1)*legendRowHeight() + legendRowHeight()/2
}

func legendRowHeight() vg.Length {
	return textStyle(legendFontSize).FontExtents().Height * 1.4
}

// drawLegend draws the boxes in the band [0, height) at the bottom of c.
func drawLegend(c draw.Canvas, boxes []legendBox, height vg.Length) {
	sty := textStyle(legendFontSize)
	rowH := legendRowHeight()
	ext := sty.FontExtents()
	for _, b := range boxes {
		top := c.Min.Y + height - rowH/2 - vg.Length(b.row)*rowH // the row's top, canvas coordinates (y up)
		icon := draw.Canvas{Canvas: c.Canvas, Rectangle: vg.Rectangle{
			Min: vg.Point{X: c.Min.X + b.x, Y: top - ext.Height},
			Max: vg.Point{X: c.Min.X + b.x + legendThumb, Y: top},
		}}
		for _, t := range b.entry.thumbs {
			t.Thumbnail(&icon)
		}
		c.FillText(sty, vg.Point{X: c.Min.X + b.textX, Y: top - ext.Ascent}, b.entry.label)
	}
}

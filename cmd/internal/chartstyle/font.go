// Package chartstyle is what the commands' charts share: their font and their legend, drawn in a
// band under each plot.
package chartstyle

import (
	"sync"

	"codeberg.org/go-fonts/dejavu/dejavusans"
	"golang.org/x/image/font/opentype"
	"gonum.org/v1/plot"
	"gonum.org/v1/plot/font"
	"gonum.org/v1/plot/text"
	"gonum.org/v1/plot/vg"
)

// The charts' text is DejaVu Sans: gonum lays text out with the metrics of the font it is given, and
// a chart is read with whatever fonts the reader's machine has. DejaVu is what a plain Linux machine
// has (and one of the widest common sans-serif faces), so a machine without it falls back to a
// narrower face: text laid out for DejaVu still fits. Gonum's default, Liberation Serif, is absent
// from a plain machine, whose DejaVu Serif replacement is about 15 % wider: legends overflowed.
var chartFont = sync.OnceValue(func() font.Font {
	ttf, err := opentype.Parse(dejavusans.TTF)
	if err != nil {
		panic("chartstyle: the embedded DejaVu Sans does not parse: " + err.Error()) // a build defect, not input
	}
	f := font.Font{Typeface: "DejaVu", Variant: "Sans"}
	font.DefaultCache.Add(font.Collection{{Font: f, Face: ttf}})
	return f
})

// Font returns the charts' font at size.
func Font(size vg.Length) font.Font {
	return font.From(chartFont(), size)
}

// TextStyle is the charts' text style at size.
func TextStyle(size vg.Length) text.Style {
	return text.Style{Font: Font(size), Handler: plot.DefaultTextHandler}
}

// Text sizes, in points.
const (
	TitleSize = 12
	LabelSize = 10 // axis labels
	TickSize  = 9  // tick labels
)

// Apply sets every text of p (title, axis labels, tick labels, gonum's legend) in the charts' font.
func Apply(p *plot.Plot) {
	p.Title.TextStyle.Font = Font(TitleSize)
	p.X.Label.TextStyle.Font, p.Y.Label.TextStyle.Font = Font(LabelSize), Font(LabelSize)
	p.X.Tick.Label.Font, p.Y.Tick.Label.Font = Font(TickSize), Font(TickSize)
	p.Legend.TextStyle.Font = Font(LegendSize)
}

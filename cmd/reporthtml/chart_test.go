package reporthtml

import (
	"strings"
	"testing"
	"time"

	"github.com/collypace/ext/audit"
	"github.com/collypace/ext/cmd/internal/chartstyle"
	"github.com/collypace/ext/cmd/internal/chartstyle/charttest"
	"github.com/collypace/ext/internal/auditreport"
)

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
	panel, err := chartPanel(host, t0, r.Violations)
	if err != nil {
		t.Fatal(err)
	}
	labels := map[string]bool{}
	for _, e := range panel.Legend {
		labels[e.Label] = true
	}
	if len(panel.Legend) != 8 {
		t.Fatalf("%d legend entries, want all 8 (window, floor, Crawl-delay, rate limit, interval, gaps, departures, violation): %v", len(panel.Legend), labels)
	}
	svg, err := chart(host, t0, r.Violations)
	if err != nil {
		t.Fatal(err)
	}
	charttest.CheckLegends(t, svg, chartstyle.Arrange([]chartstyle.Panel{panel}, chartWidth, chartHeight))
}

package main

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/collypace/ext"
	"github.com/collypace/ext/cmd/internal/chartstyle"
	"github.com/collypace/ext/cmd/internal/chartstyle/charttest"
	"github.com/collypace/ext/internal/scenario"
)

// syntheticResult is a result of sc as a crawl could have produced it, without crawling: each host
// got five pages a second apart, the third refused, and the adaptive pacer's interval was sampled
// three times.
func syntheticResult(sc Scenario) *ScenarioResult {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	r := &ScenarioResult{Scenario: sc}
	for _, mode := range []Mode{Static, Adaptive} {
		run := &Run{Mode: mode, Start: t0, Wall: 6 * time.Second, Samples: map[string][]Sample{}}
		for g, grp := range sc.Groups {
			for i, cfg := range grp.Hosts {
				h := &HostRun{Group: g, Key: fmt.Sprintf("127.0.0.1:%d", 9000+10*g+i), Config: cfg}
				for k := range 5 {
					status := 200
					if k == 2 {
						status = 429
					}
					h.Arrivals = append(h.Arrivals, scenario.Arrival{At: t0.Add(time.Duration(k+1) * time.Second), Path: fmt.Sprintf("/p/%d", k), Status: status})
				}
				run.Hosts = append(run.Hosts, h)
				if mode == Adaptive {
					for k := range 3 {
						run.Samples[h.Key] = append(run.Samples[h.Key], Sample{At: t0.Add(time.Duration(2*k) * time.Second), Status: ext.HostSnapshot{Interval: time.Duration(k+1) * sc.Interval}})
					}
				}
			}
		}
		r.Runs[mode] = run
	}
	return r
}

// TestChartLegendsFitWithPlainMachineFonts: the benchmark charts' legends were once cut off at the
// right edge, because gonum laid their text out with Liberation Serif, which a plain machine lacks
// (its DejaVu Serif is about 15 % wider), and the top plot's legend was drawn over its points. For
// the chart of every scenario (one group or several, with an outage or not, so every legend there
// is), rendered at its real size: every text is in DejaVu Sans, each plot's legend labels are in the
// band under that plot, never over it, and inside the canvas even drawn 15 % wider than measured.
func TestChartLegendsFitWithPlainMachineFonts(t *testing.T) {
	dir := t.TempDir()
	var outages, multiGroup int
	for _, sc := range allScenarios(false) {
		if sc.NoChart {
			continue
		}
		t.Run(sc.Name, func(t *testing.T) {
			r := syntheticResult(sc)
			panels, err := chartPanels(r)
			if err != nil {
				t.Fatal(err)
			}
			for _, e := range panels[0].Legend {
				if e.Label == "outage (503s)" {
					outages++
				}
			}
			if len(sc.Groups) > 1 {
				multiGroup++
			}
			path := filepath.Join(dir, sc.Name+".svg")
			if err := renderChart(r, path); err != nil {
				t.Fatal(err)
			}
			svg, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			charttest.CheckLegends(t, svg, chartstyle.Arrange(panels, chartWidth, chartHeight))
		})
	}
	if outages == 0 || multiGroup == 0 {
		t.Errorf("%d charts with an outage, %d with several groups: the scenarios no longer cover every legend", outages, multiGroup)
	}
}

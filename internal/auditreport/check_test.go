package auditreport

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/collypace/ext/audit"
)

var t0 = time.Date(2026, 12, 2, 12, 0, 0, 0, time.UTC)

// line is one schema 2 audit event; fields override or add to the common ones.
func line(host string, event audit.Event, at time.Time, fields map[string]any) string {
	m := map[string]any{
		audit.FieldTimestamp: at.Format(time.RFC3339Nano), audit.FieldPipelineID: "p1", audit.FieldTargetDomain: host,
		audit.FieldEvent: event, audit.FieldTrigger: "base", audit.FieldBaseDelayMS: 1000, audit.FieldComputedDelay: 1000,
		audit.FieldJitterMS: 0, audit.FieldComplianceFlag: true, audit.FieldStatusCode: 0, audit.FieldSchema: audit.Schema,
	}
	for k, v := range fields {
		m[k] = v
	}
	b, _ := json.Marshal(m)
	return string(b) + "\n"
}

// dep is a departure at t0+ms with the floor of 1 s and the given Crawl-delay.
func dep(host string, ms int, path string, crawlMS int) string {
	return line(host, audit.EventDelayApplied, t0.Add(time.Duration(ms)*time.Millisecond), map[string]any{
		audit.FieldURL: "https://" + host + path, audit.FieldWaitMS: 0, audit.FieldIntervalMS: max(1000, crawlMS),
		audit.FieldCrawlDelayMS: crawlMS, audit.FieldRateIntervalMS: 0,
	})
}

// hold is a Retry-After window from t0+fromMS to t0+toMS.
func hold(host string, fromMS, toMS int) string {
	from, to := t0.Add(time.Duration(fromMS)*time.Millisecond), t0.Add(time.Duration(toMS)*time.Millisecond)
	return line(host, audit.EventRetryAfterHonoured, from, map[string]any{audit.FieldStatusCode: 429,
		audit.FieldComputedDelay: toMS - fromMS, audit.FieldWindowStart: from.Format(time.RFC3339Nano), audit.FieldWindowEnd: to.Format(time.RFC3339Nano)})
}

// sharedHold is a fleet's hold (see hold) that was in the shared store at sharedMS.
func sharedHold(host string, fromMS, sharedMS, toMS int) string {
	from, to := t0.Add(time.Duration(fromMS)*time.Millisecond), t0.Add(time.Duration(toMS)*time.Millisecond)
	return line(host, audit.EventRetryAfterHonoured, from, map[string]any{audit.FieldStatusCode: 429,
		audit.FieldComputedDelay: toMS - fromMS, audit.FieldWindowStart: from.Format(time.RFC3339Nano), audit.FieldWindowEnd: to.Format(time.RFC3339Nano),
		audit.FieldShared: t0.Add(time.Duration(sharedMS) * time.Millisecond).Format(time.RFC3339Nano)})
}

// Windows and gaps: each trail either is clean or has exactly one violation, by the departure to /x.
func TestViolations(t *testing.T) {
	h := "shop.example"
	for _, tc := range []struct {
		name  string
		trail string
		bad   string // a phrase of the violation of /x; "" = none
	}{
		{"departure after the window", dep(h, 0, "/a", 0) + hold(h, 100, 5000) + dep(h, 5000, "/b", 0), ""},
		{"departure inside the window", dep(h, 0, "/a", 0) + hold(h, 100, 5000) + dep(h, 4999, "/x", 0), "inside the retry_after_honoured window"},
		{"departure at the window's start", dep(h, 0, "/a", 0) + hold(h, 1000, 5000) + dep(h, 1000, "/x", 0), "inside the retry_after_honoured window"},
		// A departure logged before the window started was already on its way.
		{"in flight when the window began", dep(h, 0, "/a", 0) + dep(h, 1000, "/b", 0) + hold(h, 1001, 5000) + dep(h, 5000, "/c", 0), ""},
		// In a fleet, the other processes read the hold from the shared store: from shared on.
		{"a fleet's hold, before the store had it", dep(h, 0, "/a", 0) + sharedHold(h, 1000, 1010, 5000) + dep(h, 1005, "/b", 0) + dep(h, 5000, "/c", 0), ""},
		{"a fleet's hold, once the store had it", dep(h, 0, "/a", 0) + sharedHold(h, 1000, 1010, 5000) + dep(h, 1010, "/x", 0), "inside the retry_after_honoured window"},
		{"on the floor", dep(h, 0, "/a", 0) + dep(h, 1000, "/b", 0) + dep(h, 2000, "/c", 0), ""},
		{"within the tolerance (0.5 % of 1 s)", dep(h, 0, "/a", 0) + dep(h, 995, "/b", 0), ""},
		{"under the floor", dep(h, 0, "/a", 0) + dep(h, 994, "/x", 0), "994ms after the previous departure, under the " + ConstraintFloor + " of 1s"},
		{"on the Crawl-delay", dep(h, 0, "/a", 0) + dep(h, 2000, "/b", 2000), ""},
		{"under the Crawl-delay", dep(h, 0, "/a", 0) + dep(h, 2000, "/b", 2000) + dep(h, 3500, "/x", 2000), "1.5s after the previous departure, under the " + ConstraintCrawlDelay + " of 2s"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := checkBytes(t, DefaultTolerance, []byte(tc.trail))
			switch {
			case tc.bad == "" && !r.OK():
				t.Errorf("violations: %v", r.Violations)
			case tc.bad != "" && (len(r.Violations) != 1 || !strings.Contains(r.Violations[0].String(), "https://shop.example/x: "+tc.bad)):
				t.Errorf("violations %v, want one by /x: %s", r.Violations, tc.bad)
			}
		})
	}
}

// The gap statistics of each constraint cover the gaps it was in force for.
func TestConstraintStats(t *testing.T) {
	h := "shop.example"
	r := checkBytes(t, DefaultTolerance, []byte(dep(h, 0, "/a", 0)+dep(h, 1000, "/b", 0)+dep(h, 3000, "/c", 2000)+dep(h, 6000, "/d", 2000)))
	got := r.Hosts[0].Constraints
	want := []ConstraintStat{
		{Name: ConstraintFloor, Least: time.Second, Most: time.Second, Gaps: 3, MinGap: time.Second, MedianGap: 2 * time.Second},
		{Name: ConstraintCrawlDelay, Least: 2 * time.Second, Most: 2 * time.Second, Gaps: 2, MinGap: 2 * time.Second, MedianGap: 2 * time.Second},
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("constraints\n got %+v\nwant %+v", got, want)
	}
}

// Two processes each keep the floor on their own; merged, two of their departures to one host are 300 ms apart.
func TestMergedTrailsAreOneSchedule(t *testing.T) {
	h := "shop.example"
	a := dep(h, 0, "/a1", 0) + dep(h, 1000, "/a2", 0) + dep(h, 2600, "/a3", 0)
	b := dep(h, 1300, "/b1", 0) + dep(h, 3600, "/b2", 0)
	for _, tr := range [][]byte{[]byte(a), []byte(b)} {
		if r := checkBytes(t, DefaultTolerance, tr); !r.OK() {
			t.Fatalf("one process alone: %v", r.Violations)
		}
	}
	r := checkBytes(t, DefaultTolerance, []byte(a), []byte(b))
	if len(r.Hosts) != 1 || len(r.Hosts[0].Departures) != 5 || len(r.Violations) != 1 {
		t.Fatalf("merged: %d hosts, violations %v; want one host, 5 departures, one gap of 300 ms", len(r.Hosts), r.Violations)
	}
	if v := r.Violations[0]; !strings.HasSuffix(v.URL, "/b1") || !strings.Contains(v.What, "300ms") || v.Source != "trail2.jsonl:1" {
		t.Errorf("violation %v, want process b's first departure, 300ms after a's second", v)
	}
}

// Malformed lines are skipped with their line number; the rest is read.
func TestMalformedLines(t *testing.T) {
	h := "shop.example"
	trail := dep(h, 0, "/a", 0) + "not json\n" + `{"event":"delay_applied"}` + "\n\n" +
		line(h, audit.EventDelayApplied, t0, map[string]any{audit.FieldIntervalMS: "soon"}) +
		strings.Repeat("x", maxLine+10) + "\n" + dep(h, 1000, "/b", 0) + `{"timestamp":"yesterday","target_domain":"h","event":"x"`
	r := checkBytes(t, DefaultTolerance, []byte(trail))
	var lines []string
	for _, w := range r.Warnings {
		lines = append(lines, w.Source)
	}
	if fmt.Sprint(lines) != "[trail1.jsonl:2 trail1.jsonl:3 trail1.jsonl:5 trail1.jsonl:6 trail1.jsonl:8]" {
		t.Errorf("skipped %v", r.Warnings)
	}
	if r.Departures() != 2 || !r.OK() {
		t.Errorf("%d departures, violations %v; want the 2 good ones, clean", r.Departures(), r.Violations)
	}
}

// A schema 1 trail (no url, interval or window fields) is still checked: the Crawl-delay comes from
// crawl_delay_applied, a Retry-After window from its computed_delay_ms.
func TestSchema1Trail(t *testing.T) {
	h := "old.example"
	old := func(event audit.Event, ms int, computed int) string {
		b, _ := json.Marshal(map[string]any{audit.FieldTimestamp: t0.Add(time.Duration(ms) * time.Millisecond).Format(time.RFC3339Nano),
			audit.FieldTargetDomain: h, audit.FieldEvent: event, audit.FieldBaseDelayMS: 100, audit.FieldComputedDelay: computed, audit.FieldComplianceFlag: true})
		return string(b) + "\n"
	}
	trail := old(audit.EventDelayApplied, 0, 100) + old(audit.EventCrawlDelayApplied, 10, 500) + old(audit.EventDelayApplied, 500, 500) +
		old(audit.EventRetryAfterHonoured, 600, 2000) + old(audit.EventDelayApplied, 1200, 500) + old(audit.EventDelayApplied, 2600, 500)
	r := checkBytes(t, DefaultTolerance, []byte(trail))
	if len(r.Violations) != 1 || !r.Violations[0].At.Equal(t0.Add(1200*time.Millisecond)) || !strings.Contains(r.Violations[0].What, "window") {
		t.Fatalf("violations %v, want the departure at +1.2s inside the window", r.Violations)
	}
	if hh := r.Hosts[0]; hh.WithoutURL != 4 || !hh.hasConstraint(ConstraintCrawlDelay) || !hh.Windows[0].Derived {
		t.Errorf("host %+v", hh)
	}
	var md bytes.Buffer
	_ = r.WriteMarkdown(&md)
	if !strings.Contains(md.String(), "(URL not recorded)") || !strings.Contains(md.String(), "lack the schema 2 fields") {
		t.Errorf("markdown:\n%s", md.String())
	}
}

package scenario

import (
	"slices"
	"testing"
	"time"
)

func at(ms ...int) []Arrival {
	a := make([]Arrival, len(ms))
	for i, m := range ms {
		a[i] = Arrival{At: t0.Add(time.Duration(m) * time.Millisecond), Path: PagePath(i), Status: 200}
	}
	return a
}

func TestGapsAndQuantiles(t *testing.T) {
	gaps := Gaps(at(1000, 0, 500, 1600)) // unsorted on purpose
	want := []time.Duration{500 * time.Millisecond, 500 * time.Millisecond, 600 * time.Millisecond}
	if !slices.Equal(gaps, want) {
		t.Fatalf("gaps %v, want %v", gaps, want)
	}
	if Median(gaps) != 500*time.Millisecond || P95(gaps) != 600*time.Millisecond ||
		Mean(gaps) != 533333333*time.Nanosecond || Quantile(gaps, 0) != 500*time.Millisecond {
		t.Errorf("median %v p95 %v mean %v", Median(gaps), P95(gaps), Mean(gaps))
	}
	if Gaps(at(1)) != nil || Median(nil) != 0 || Mean(nil) != 0 || Span(nil) != 0 {
		t.Error("empty inputs")
	}
	if Span(at(1000, 0, 500)) != time.Second {
		t.Errorf("span %v", Span(at(1000, 0, 500)))
	}
}

func TestCounts(t *testing.T) {
	a := at(0, 100, 200, 300, 400, 500)
	a[1].Status, a[2].Status = 429, 503
	a[3].Path = a[0].Path                    // a page served twice counts once
	a[5].Path, a[5].Status = RobotsPath, 200 // robots.txt is no page
	if Refused(a) != 2 || PagesOK(a) != 2 || len(PageRequests(a)) != 5 {
		t.Errorf("refused %d, pages OK %d, page requests %d", Refused(a), PagesOK(a), len(PageRequests(a)))
	}
}

func TestInsideWindows(t *testing.T) {
	w := []Window{{Issued: t0.Add(100 * time.Millisecond), Until: t0.Add(1100 * time.Millisecond)}}
	a := at(100, 101, 1099, 1100, 1200) // the refused request itself and the one at Until are outside
	if n := InsideWindows(a, w); n != 2 {
		t.Errorf("inside %d, want 2", n)
	}
	if f, ok := FirstAfter(a, w[0].Until); !ok || !f.At.Equal(t0.Add(1100*time.Millisecond)) {
		t.Errorf("first after %v %v", f, ok)
	}
	if _, ok := FirstAfter(a, t0.Add(time.Hour)); ok {
		t.Error("first after the end")
	}
}

package scenario

import (
	"net/http"
	"testing"
	"time"
)

// A Model decides as a Host does, and logs arrivals, abandoned requests and answered refusals.
func TestModelLogs(t *testing.T) {
	m, err := NewModel(HostConfig{Pages: 3, Workers: 1, Latency: 100 * time.Millisecond,
		Capacity: &Capacity{Rate: 4, Burst: 1, RetryAfter: time.Second}})
	if err != nil {
		t.Fatal(err)
	}
	sent := t0.Add(-time.Millisecond)
	d := m.DecideAt(t0, "/", sent)
	if d.Status != http.StatusOK || d.Latency != 100*time.Millisecond || d.QueueWait != 0 || d.Window != -1 || d.Arrival != 0 || len(d.Body) == 0 {
		t.Fatalf("first page: %+v", d)
	}
	r := m.DecideAt(t0.Add(100*time.Millisecond), "/p/1", time.Time{})
	if r.Status != http.StatusTooManyRequests || r.Window != 0 || r.Header.Get("Retry-After") != "1" {
		t.Fatalf("over capacity: %+v", r)
	}
	m.AnsweredAt(r.Window, t0.Add(101*time.Millisecond))
	q := m.DecideAt(t0.Add(250*time.Millisecond), "/p/2", time.Time{})
	if q.Status != http.StatusOK || q.QueueWait != 0 {
		t.Fatalf("third: %+v", q)
	}
	m.Abandon(q.Arrival)
	m.Abandon(99) // out of range: ignored
	a := m.Arrivals()
	if len(a) != 3 || a[0].Sent != sent || a[1].Status != 429 || a[2].Status != 0 {
		t.Fatalf("arrivals %+v", a)
	}
	w := m.Windows()
	if len(w) != 1 || !w[0].Answered.Equal(t0.Add(101*time.Millisecond)) || !w[0].Until.Equal(t0.Add(1100*time.Millisecond)) {
		t.Fatalf("windows %+v", w)
	}
	if m.Config().Capacity.Status != 429 {
		t.Errorf("config not normalized: %+v", m.Config().Capacity)
	}
	if _, err := NewModel(HostConfig{Latency: -1}); err == nil {
		t.Error("a negative latency: want an error")
	}
}

package scenario

import (
	"net/http"
	"testing"
	"time"
)

// TestBurstOneIsLimitReqWithoutBurst checks that a bucket of burst 1 behaves as nginx's limit_req
// without burst: a request closer than 1/rate to the previous accepted one is refused, a refused one
// does not move that mark, and an idle host still accepts only one request at once.
func TestBurstOneIsLimitReqWithoutBurst(t *testing.T) {
	s := mustState(t, HostConfig{Pages: 10, Capacity: &Capacity{Rate: 4, Burst: 1, RetryAfter: time.Second}})
	steps := []struct {
		at   time.Duration
		want int
	}{
		{0, 200},
		{249 * time.Millisecond, 429}, // closer than 250 ms to the accepted one
		{250 * time.Millisecond, 200}, // 250 ms after it, although a refusal came in between
		{400 * time.Millisecond, 429},
		{499 * time.Millisecond, 429},
		{500 * time.Millisecond, 200},
		{10 * time.Second, 200},                  // after a long idle time…
		{10*time.Second + time.Millisecond, 429}, // …still no burst
		{10*time.Second + 250*time.Millisecond, 200},
	}
	for i, st := range steps {
		if r := s.decideAt(t0.Add(st.at), "/"); r.status != st.want {
			t.Errorf("step %d at +%v: %d, want %d", i, st.at, r.status, st.want)
		}
	}
}

// TestCapacityStatus503 checks nginx's defaults: over the rate, 503 and no Retry-After, so no window.
func TestCapacityStatus503(t *testing.T) {
	s := mustState(t, HostConfig{Pages: 3, Capacity: &Capacity{Rate: 4, Burst: 1, Status: http.StatusServiceUnavailable}})
	if r := s.decideAt(t0, "/"); r.status != http.StatusOK {
		t.Fatalf("first request: %d, want 200", r.status)
	}
	r := s.decideAt(t0.Add(100*time.Millisecond), "/p/1")
	if r.status != http.StatusServiceUnavailable || r.header.Get("Retry-After") != "" || len(s.windows) != 0 {
		t.Fatalf("over the rate: %d, Retry-After %q, %d windows; want 503 without Retry-After or window",
			r.status, r.header.Get("Retry-After"), len(s.windows))
	}
	if r := mustState(t, HostConfig{Capacity: &Capacity{Rate: 1, Burst: 1}}); r.cfg.Capacity.Status != http.StatusTooManyRequests {
		t.Errorf("default status %d, want 429", r.cfg.Capacity.Status)
	}
}

// TestQueueWaitFIFO checks the overload host: pages wait for a free worker in their order of arrival,
// then are served for the service time; robots.txt and refusals skip the queue.
func TestQueueWaitFIFO(t *testing.T) {
	ms := time.Millisecond
	s := mustState(t, HostConfig{Pages: 10, Workers: 1, Latency: 100 * ms, Robots: "User-agent: *\n"})
	steps := []struct {
		at, wait time.Duration
	}{
		{0, 0},              // served 0–100
		{10 * ms, 90 * ms},  // served 100–200
		{20 * ms, 180 * ms}, // served 200–300
		{250 * ms, 50 * ms}, // served 300–400
		{500 * ms, 0},       // idle worker
	}
	for i, st := range steps {
		r := s.decideAt(t0.Add(st.at), "/")
		if r.status != http.StatusOK || r.queueWait != st.wait || r.latency != 100*ms {
			t.Errorf("page %d at +%v: %d, wait %v, service %v; want 200, wait %v, service 100ms", i, st.at, r.status, r.queueWait, r.latency, st.wait)
		}
	}
	if r := s.decideAt(t0.Add(510*ms), RobotsPath); r.queueWait != 0 || r.latency != 0 {
		t.Errorf("robots.txt waited %v and %v, want an immediate answer", r.queueWait, r.latency)
	}
}

func TestQueueWaitSeveralWorkers(t *testing.T) {
	ms := time.Millisecond
	s := mustState(t, HostConfig{Pages: 10, Workers: 2, Latency: 200 * ms,
		Refusals: []Refusal{{Status: 503, After: 40 * ms, For: 10 * ms}}})
	steps := []struct {
		at, wait time.Duration
		status   int
	}{
		{0, 0, 200},              // worker A: 0–200
		{10 * ms, 0, 200},        // worker B: 10–210
		{20 * ms, 180 * ms, 200}, // A again: 200–400
		{30 * ms, 180 * ms, 200}, // B again: 210–410
		{45 * ms, 0, 503},        // refused at once, no worker taken
		{50 * ms, 350 * ms, 200}, // A: 400–600
	}
	for i, st := range steps {
		r := s.decideAt(t0.Add(st.at), "/")
		if r.status != st.status || r.queueWait != st.wait {
			t.Errorf("page %d at +%v: %d, wait %v; want %d, wait %v", i, st.at, r.status, r.queueWait, st.status, st.wait)
		}
	}
}

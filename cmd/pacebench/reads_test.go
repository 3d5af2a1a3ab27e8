package main

import (
	"testing"
	"time"

	"github.com/collypace/ext/internal/scenario"
)

// A window's answer moves to the instant the trail says the client read that refusal: the first read
// of its path at or after the server decided it; a window the trail does not show keeps the server's.
func TestWindowsJudgedFromTheClientsRead(t *testing.T) {
	t0 := time.Date(2026, 12, 4, 3, 0, 0, 0, time.UTC)
	trail := []byte(`{"event":"delay_applied","target_domain":"h:1","url":"http://h:1/p/1"}
{"event":"retry_after_honoured","target_domain":"h:1","url":"http://h:1/p/1","window_start":"2026-12-04T03:00:00.150Z"}
{"event":"retry_after_honoured","target_domain":"h:1","url":"http://h:1/p/1","window_start":"2026-12-04T03:00:05.020Z"}
{"event":"delay_applied","target_domain":"h:1","url":"http://h:1/p/3","admitted":"2026-12-04T03:00:00.140Z"}
{"event":"delay_applied","target_domain":"h:1","url":"http://h:1/p/3","admitted":"2026-12-04T03:00:09Z"}
not json
`)
	ws := []scenario.Window{
		{Issued: t0, Until: t0.Add(time.Second), Answered: t0.Add(time.Millisecond), Path: "/p/1"},
		{Issued: t0.Add(5 * time.Second), Answered: t0.Add(5001 * time.Millisecond), Path: "/p/1"},
		{Issued: t0, Answered: t0.Add(time.Millisecond), Path: "/p/2"},
	}
	got := readsOf(trail).windows("h:1", ws)
	for i, want := range []time.Time{t0.Add(150 * time.Millisecond), t0.Add(5020 * time.Millisecond), t0.Add(time.Millisecond)} {
		if !got[i].Answered.Equal(want) {
			t.Errorf("window %d answered +%v, want +%v", i, got[i].Answered.Sub(t0), want.Sub(t0))
		}
	}
	// A request sent after the server answered but before the client read it was on its way.
	arrivals := []scenario.Arrival{{At: t0.Add(200 * time.Millisecond), Path: "/p/3", Sent: t0.Add(100 * time.Millisecond)}}
	if in, flight := insideWindows(arrivals, got[:1], 0); in != 0 || flight != 1 {
		t.Errorf("inside %d, in flight %d; want 0, 1", in, flight)
	}
	if in, _ := insideWindows(arrivals, ws[:1], 0); in != 1 {
		t.Errorf("judged from the server's answer: inside %d, want 1", in)
	}
	// Stamped after the client read the refusal, but admitted before it (the latest admission of its
	// path before its stamp): on its way too. Without an admission in the trail, the stamp judges.
	late := []scenario.Arrival{{At: t0.Add(300 * time.Millisecond), Path: "/p/3", Sent: t0.Add(160 * time.Millisecond)}}
	if in, flight := insideWindows(readsOf(trail).arrivals("h:1", late), got[:1], 0); in != 0 || flight != 1 {
		t.Errorf("admitted before the read: inside %d, in flight %d; want 0, 1", in, flight)
	}
	if in, _ := insideWindows(readsOf(trail).arrivals("h:2", late), got[:1], 0); in != 1 {
		t.Errorf("no admission in the trail: inside %d, want 1 (judged by its stamp)", in)
	}
}

// TestNoiseSeen: the trail's first refusals_uncorrelated of each host is when its model had seen that
// slowing down does not help; a later one (after the mode ended) and other hosts' do not move it.
func TestNoiseSeen(t *testing.T) {
	trail := []byte(`{"event":"refusals_uncorrelated","target_domain":"a:80","timestamp":"2026-01-01T00:00:09Z"}
{"event":"refusals_uncorrelated","target_domain":"a:80","timestamp":"2026-01-01T00:00:05Z"}
{"event":"delay_applied","target_domain":"b:80","timestamp":"2026-01-01T00:00:01Z"}
not json refusals_uncorrelated
{"event":"refusals_correlated","target_domain":"b:80","timestamp":"2026-01-01T00:00:02Z"}`)
	ti := readsOf(trail)
	if got, want := ti.noise["a:80"], time.Date(2026, 1, 1, 0, 0, 5, 0, time.UTC); !got.Equal(want) || len(ti.noise) != 1 {
		t.Errorf("noise seen %v (%d hosts), want a:80 at %v only", ti.noise, len(ti.noise), want)
	}
}

// TestFleetReadsTheHoldFromTheStore: in a fleet, a hold's read is when it was in the shared store
// (shared), from which the other processes read it; a shared instant before window_start is ignored.
func TestFleetReadsTheHoldFromTheStore(t *testing.T) {
	t0 := time.Date(2026, 12, 4, 3, 0, 0, 0, time.UTC)
	trail := []byte(`{"event":"retry_after_honoured","target_domain":"h:1","url":"http://h:1/p/1","window_start":"2026-12-04T03:00:00.150Z","shared":"2026-12-04T03:00:00.162Z"}
{"event":"retry_after_honoured","target_domain":"h:1","url":"http://h:1/p/1","window_start":"2026-12-04T03:00:05.020Z","shared":"2026-12-04T03:00:05Z"}`)
	ws := []scenario.Window{
		{Issued: t0, Until: t0.Add(time.Second), Answered: t0.Add(time.Millisecond), Path: "/p/1"},
		{Issued: t0.Add(5 * time.Second), Answered: t0.Add(5001 * time.Millisecond), Path: "/p/1"},
	}
	got := readsOf(trail).windows("h:1", ws)
	for i, want := range []time.Time{t0.Add(162 * time.Millisecond), t0.Add(5020 * time.Millisecond)} {
		if !got[i].Answered.Equal(want) {
			t.Errorf("window %d read at +%v, want +%v", i, got[i].Answered.Sub(t0), want.Sub(t0))
		}
	}
}

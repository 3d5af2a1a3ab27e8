package pacemetrics_test

import (
	"context"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/http/httptest"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/collypace/ext"
	"github.com/collypace/ext/audit"
	"github.com/collypace/ext/pacemetrics"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	dto "github.com/prometheus/client_model/go"
)

// fakePacer and fakeQueue stand for the pacer and the host-aware queue at scrape time.
type fakePacer []ext.HostSnapshot

func (f fakePacer) Hosts() []ext.HostSnapshot { return f }

type fakeQueue map[string]int

func (f fakeQueue) Depths() map[string]int { return f }

func TestMetricsNamesHelpAndLabels(t *testing.T) {
	m := pacemetrics.New(pacemetrics.WithTopHosts(1))
	m.Watch(fakePacer{
		{Host: "a.test", Interval: time.Second, InFlight: 1, Breaker: audit.BreakerOpen},
		{Host: "b.test", Interval: 3 * time.Second, InFlight: 2, Breaker: audit.BreakerHalfOpen},
		{Host: "c.test", Interval: 2 * time.Second},
	})
	m.WatchQueue(fakeQueue{"a.test": 4, "b.test": 2, "z.test": 1})

	// a.test takes the one place at its first event; b.test counts under "other".
	m.Departed("a.test", 10*time.Millisecond)
	m.Departed("a.test", 30*time.Millisecond)
	m.Departed("b.test", 5*time.Millisecond)
	testutil.CollectAndCount(m)

	m.Refused("a.test", audit.TriggerRefusal)
	m.RetryAfter("a.test", 2200*time.Millisecond)
	m.BreakerChanged("a.test", audit.BreakerOpen)
	m.Refused("b.test", audit.TriggerServerError)
	m.RetryAfter("b.test", time.Second)
	m.BreakerChanged("b.test", audit.BreakerOpen)
	m.BreakerChanged("b.test", audit.BreakerHalfOpen)

	const want = `
# HELP collypace_breaker_hosts Hosts in memory whose circuit breaker is in the state.
# TYPE collypace_breaker_hosts gauge
collypace_breaker_hosts{state="closed"} 1
collypace_breaker_hosts{state="half-open"} 1
collypace_breaker_hosts{state="open"} 1
# HELP collypace_breaker_state State of the host's circuit breaker: 0 closed, 1 open, 2 half-open.
# TYPE collypace_breaker_state gauge
collypace_breaker_state{host="a.test"} 1
# HELP collypace_breaker_transitions_total Transitions of the host's circuit breaker, by the state entered.
# TYPE collypace_breaker_transitions_total counter
collypace_breaker_transitions_total{host="a.test",state="open"} 1
collypace_breaker_transitions_total{host="other",state="closed"} 0
collypace_breaker_transitions_total{host="other",state="half-open"} 1
collypace_breaker_transitions_total{host="other",state="open"} 1
# HELP collypace_departure_wait_seconds Time a request waited for its in-flight slot and departure slot before departing (all hosts).
# TYPE collypace_departure_wait_seconds histogram
collypace_departure_wait_seconds_bucket{le="0.001"} 0
collypace_departure_wait_seconds_bucket{le="0.0025"} 0
collypace_departure_wait_seconds_bucket{le="0.005"} 1
collypace_departure_wait_seconds_bucket{le="0.01"} 2
collypace_departure_wait_seconds_bucket{le="0.025"} 2
collypace_departure_wait_seconds_bucket{le="0.05"} 3
collypace_departure_wait_seconds_bucket{le="0.1"} 3
collypace_departure_wait_seconds_bucket{le="0.25"} 3
collypace_departure_wait_seconds_bucket{le="0.5"} 3
collypace_departure_wait_seconds_bucket{le="1"} 3
collypace_departure_wait_seconds_bucket{le="2.5"} 3
collypace_departure_wait_seconds_bucket{le="5"} 3
collypace_departure_wait_seconds_bucket{le="10"} 3
collypace_departure_wait_seconds_bucket{le="30"} 3
collypace_departure_wait_seconds_bucket{le="60"} 3
collypace_departure_wait_seconds_bucket{le="120"} 3
collypace_departure_wait_seconds_bucket{le="300"} 3
collypace_departure_wait_seconds_bucket{le="+Inf"} 3
collypace_departure_wait_seconds_sum 0.045
collypace_departure_wait_seconds_count 3
# HELP collypace_departures_total Requests that departed to the host.
# TYPE collypace_departures_total counter
collypace_departures_total{host="a.test"} 2
collypace_departures_total{host="other"} 1
# HELP collypace_host_delay_seconds Current interval between departures to the host, before jitter; for host="other", the largest.
# TYPE collypace_host_delay_seconds gauge
collypace_host_delay_seconds{host="a.test"} 1
collypace_host_delay_seconds{host="other"} 3
# HELP collypace_hosts Hosts whose pacing state is in memory.
# TYPE collypace_hosts gauge
collypace_hosts 3
# HELP collypace_in_flight Requests in flight to the host.
# TYPE collypace_in_flight gauge
collypace_in_flight{host="a.test"} 1
collypace_in_flight{host="other"} 2
# HELP collypace_queue_depth Requests queued for the host.
# TYPE collypace_queue_depth gauge
collypace_queue_depth{host="a.test"} 4
collypace_queue_depth{host="other"} 3
# HELP collypace_refusals_total Refusals by the host (429/503, other 5xx, transport errors), by trigger.
# TYPE collypace_refusals_total counter
collypace_refusals_total{host="a.test",trigger="refusal"} 1
collypace_refusals_total{host="other",trigger="refusal"} 0
collypace_refusals_total{host="other",trigger="server_error"} 1
collypace_refusals_total{host="other",trigger="transport_error"} 0
# HELP collypace_retry_after_wait_seconds_total Total length of the Retry-After windows obeyed for the host, safety buffer included.
# TYPE collypace_retry_after_wait_seconds_total counter
collypace_retry_after_wait_seconds_total{host="a.test"} 2.2
collypace_retry_after_wait_seconds_total{host="other"} 1
# HELP collypace_retry_after_waits_total Retry-After windows obeyed for the host.
# TYPE collypace_retry_after_waits_total counter
collypace_retry_after_waits_total{host="a.test"} 1
collypace_retry_after_waits_total{host="other"} 1
# HELP collypace_wait_seconds_total Total time requests to the host waited for their in-flight slot and departure slot.
# TYPE collypace_wait_seconds_total counter
collypace_wait_seconds_total{host="a.test"} 0.04
collypace_wait_seconds_total{host="other"} 0.005
`
	if err := testutil.CollectAndCompare(m, strings.NewReader(want)); err != nil {
		t.Fatal(err)
	}
	if n := testutil.CollectAndCount(m, "collypace_departures_total"); n != 2 {
		t.Errorf("departures series = %d, want 2", n)
	}
}

// TestUnknownTriggerAndOtherHost: an unknown trigger counts under trigger="other", and a host named
// "other" never gets series of its own (it would collide with the aggregate).
func TestUnknownTriggerAndOtherHost(t *testing.T) {
	m := pacemetrics.New()
	m.Departed(pacemetrics.OtherHost, 0)
	m.Departed(pacemetrics.OtherHost, 0)
	m.Refused("x.test", "teapot")
	testutil.CollectAndCount(m)
	const want = `
# HELP collypace_departures_total Requests that departed to the host.
# TYPE collypace_departures_total counter
collypace_departures_total{host="other"} 2
collypace_departures_total{host="x.test"} 0
# HELP collypace_refusals_total Refusals by the host (429/503, other 5xx, transport errors), by trigger.
# TYPE collypace_refusals_total counter
collypace_refusals_total{host="other",trigger="refusal"} 0
collypace_refusals_total{host="other",trigger="server_error"} 0
collypace_refusals_total{host="other",trigger="transport_error"} 0
collypace_refusals_total{host="x.test",trigger="other"} 1
`
	if err := testutil.CollectAndCompare(m, strings.NewReader(want), "collypace_departures_total", "collypace_refusals_total"); err != nil {
		t.Fatal(err)
	}
}

// gather scrapes m through a registry, as Prometheus would.
func gather(t *testing.T, g prometheus.Gatherer) []*dto.MetricFamily {
	t.Helper()
	mfs, err := g.Gather()
	if err != nil {
		t.Fatal(err)
	}
	return mfs
}

func label(m *dto.Metric, name string) (string, bool) {
	for _, l := range m.GetLabel() {
		if l.GetName() == name {
			return l.GetValue(), true
		}
	}
	return "", false
}

// seriesKey names one series: its family and labels.
func seriesKey(mf *dto.MetricFamily, m *dto.Metric) string {
	var b strings.Builder
	b.WriteString(mf.GetName())
	for _, l := range m.GetLabel() {
		fmt.Fprintf(&b, ",%s=%s", l.GetName(), l.GetValue())
	}
	return b.String()
}

// feed sends events for hosts through the Observer methods, from several goroutines; hosts[i]
// departs 1+i%7 times.
func feed(m *pacemetrics.Collector, hosts []string) {
	var wg sync.WaitGroup
	for w := range 8 {
		wg.Go(func() {
			for i := w; i < len(hosts); i += 8 {
				h := hosts[i]
				for range 1 + i%7 {
					m.Departed(h, time.Duration(i)*time.Millisecond)
				}
				switch i % 5 {
				case 0:
					m.Refused(h, audit.TriggerRefusal)
					m.RetryAfter(h, time.Second)
				case 1:
					m.Refused(h, audit.TriggerTransportError)
					m.BreakerChanged(h, audit.BreakerOpen)
				case 2:
					m.Refused(h, audit.TriggerServerError)
					m.BreakerChanged(h, audit.BreakerHalfOpen)
				}
			}
		})
	}
	wg.Wait()
}

func TestCardinalityBounded(t *testing.T) {
	const hosts = 10_000
	for _, top := range []int{pacemetrics.DefaultTopHosts, 5, 0} {
		t.Run(fmt.Sprint(top), func(t *testing.T) {
			m := pacemetrics.New(pacemetrics.WithTopHosts(top))
			names := make([]string, hosts)
			statuses := make(fakePacer, hosts)
			depths := make(fakeQueue, hosts)
			for i := range statuses {
				h := fmt.Sprintf("host-%d", i)
				names[i] = h
				statuses[i] = ext.HostSnapshot{Host: h, Interval: time.Duration(i) * time.Millisecond, InFlight: 1, Breaker: audit.BreakerState(i % 3)}
				depths[h] = i % 4
			}
			m.Watch(statuses)
			m.WatchQueue(depths)
			reg := prometheus.NewPedanticRegistry()
			reg.MustRegister(m)
			// Places are taken by the first hosts seen, then contested at each scrape: a scrape exports
			// the top N, "other", and one last time the hosts that just lost their place (at most N).
			for range 3 {
				feed(m, names)
				for _, mf := range gather(t, reg) {
					hostValues := map[string]bool{}
					for _, s := range mf.GetMetric() {
						if h, ok := label(s, "host"); ok {
							hostValues[h] = true
						}
					}
					if len(hostValues) == 0 {
						continue // no host label: a fixed set of series
					}
					if len(hostValues) > 2*top+1 {
						t.Errorf("%s: %d host label values, want ≤ %d", mf.GetName(), len(hostValues), 2*top+1)
					}
					perHost := 1
					if strings.Contains(mf.GetHelp(), "by trigger") {
						perHost = 4 // refusal, server_error, transport_error, other
					} else if strings.Contains(mf.GetHelp(), "by the state") {
						perHost = 3
					}
					if n := len(mf.GetMetric()); n > (2*top+1)*perHost && mf.GetType() != dto.MetricType_HISTOGRAM {
						t.Errorf("%s: %d series, want ≤ %d", mf.GetName(), n, (2*top+1)*perHost)
					}
				}
			}
			n, err := testutil.GatherAndCount(reg, "collypace_departures_total")
			if err != nil {
				t.Fatal(err)
			}
			if n != top+1 {
				t.Errorf("departures series = %d, want %d", n, top+1)
			}
		})
	}
}

// TestCountersMonotonicAcrossTopNChanges moves activity from host to host so that hosts enter and
// leave the top N, and checks at every scrape that no counter series goes back and that the
// increases of all series add up to the events fed (sums of rates count every event once).
func TestCountersMonotonicAcrossTopNChanges(t *testing.T) {
	const hosts, top = 20, 3
	m := pacemetrics.New(pacemetrics.WithTopHosts(top))
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(m)

	prev := map[string]float64{}
	labelled := map[string]bool{}
	var lost int
	var before map[string]bool
	for round := range 9 {
		// Three hot hosts a round, each 3× busier than the previous round's (so they displace them),
		// and one departure for everybody else.
		hot := map[string]bool{}
		fed := 0
		for k := range 3 {
			h := fmt.Sprintf("host-%d", (round*3+k)%hosts)
			hot[h] = true
			n := 10 * int(math.Pow(3, float64(round)))
			for range n {
				m.Departed(h, time.Millisecond)
			}
			m.Refused(h, audit.TriggerRefusal)
			m.RetryAfter(h, time.Second)
			m.BreakerChanged(h, audit.BreakerState(round%3))
			fed += n
		}
		for i := range hosts {
			if h := fmt.Sprintf("host-%d", i); !hot[h] {
				m.Departed(h, time.Millisecond)
				fed++
			}
		}

		cur := map[string]float64{}
		now := map[string]bool{}
		increase := 0.0
		for _, mf := range gather(t, reg) {
			if mf.GetType() != dto.MetricType_COUNTER {
				continue
			}
			for _, s := range mf.GetMetric() {
				k, v := seriesKey(mf, s), s.GetCounter().GetValue()
				cur[k] = v
				if p, ok := prev[k]; ok {
					if v < p {
						t.Errorf("round %d: %s went back from %v to %v", round, k, p, v)
					}
					if mf.GetName() == "collypace_departures_total" {
						increase += v - p
					}
				}
				if h, _ := label(s, "host"); mf.GetName() == "collypace_departures_total" && h != pacemetrics.OtherHost {
					now[h] = true
					labelled[h] = true
				}
			}
		}
		if round > 0 && increase != float64(fed) {
			t.Errorf("round %d: departure series increased by %v in all, want %d", round, increase, fed)
		}
		for h := range before {
			if !now[h] {
				lost++
			}
		}
		prev, before = cur, now
	}
	if len(labelled) <= top || lost == 0 {
		t.Errorf("top %d never changed: %d hosts labelled in all, %d places lost", top, len(labelled), lost)
	}
}

// TestWithPacer drives a real Pacer: Wait for departures, ObserveAt with 429 + Retry-After for
// refusals, Retry-After windows and a breaker trip.
func TestWithPacer(t *testing.T) {
	m := pacemetrics.New()
	p := ext.NewPacer(ext.WithObserver(m), ext.WithBaseDelay(0), ext.WithJitter(0), ext.WithBreaker(ext.BreakerPolicy{Failures: 2}))
	m.Watch(p)
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(m)

	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	for _, h := range []string{"a.test", "a.test", "b.test"} {
		_, release, err := p.Wait(ctx, h)
		if err != nil {
			t.Fatal(err)
		}
		release()
	}
	gather(t, reg) // a.test and b.test have had places since their first departure

	now := time.Now()
	for range 2 {
		res := p.ReserveAt("b.test", now)
		p.ObserveAt(res, ext.Outcome{Status: http.StatusTooManyRequests, Header: http.Header{"Retry-After": {"2"}}}, now)
	}

	got := values(gather(t, reg))
	for k, want := range map[string]float64{
		`collypace_departures_total{host="a.test"}`:                       2,
		`collypace_departures_total{host="b.test"}`:                       1,
		`collypace_departures_total{host="other"}`:                        0, // every host fits the top 50
		`collypace_departure_wait_seconds_count{}`:                        3,
		`collypace_refusals_total{host="b.test",trigger="refusal"}`:       2,
		`collypace_refusals_total{host="other",trigger="refusal"}`:        0,
		`collypace_retry_after_waits_total{host="b.test"}`:                2,
		`collypace_retry_after_wait_seconds_total{host="b.test"}`:         4.4, // 2 × (2 s + 10%)
		`collypace_breaker_transitions_total{host="b.test",state="open"}`: 1,
		`collypace_breaker_state{host="a.test"}`:                          0,
		`collypace_breaker_state{host="b.test"}`:                          1,
		`collypace_breaker_hosts{state="closed"}`:                         1,
		`collypace_breaker_hosts{state="open"}`:                           1,
		`collypace_hosts{}`:                                               2,
		`collypace_host_delay_seconds{host="a.test"}`:                     0,
		`collypace_in_flight{host="a.test"}`:                              0,
	} {
		v, ok := got[k]
		if !ok {
			t.Errorf("%s missing", k)
			continue
		}
		if math.Abs(v-want) > 1e-9 {
			t.Errorf("%s = %v, want %v", k, v, want)
		}
	}
	if d := got[`collypace_host_delay_seconds{host="b.test"}`]; d <= 0 {
		t.Errorf("b.test's delay is %v after two 429s, want > 0", d)
	}
}

// values flattens metric families to "name{labels}" → value, histograms as _bucket and _count.
func values(mfs []*dto.MetricFamily) map[string]float64 {
	out := map[string]float64{}
	key := func(name string, m *dto.Metric, extra ...string) string {
		var ls []string
		for _, l := range m.GetLabel() {
			ls = append(ls, fmt.Sprintf("%s=%q", l.GetName(), l.GetValue()))
		}
		ls = append(ls, extra...)
		sort.Strings(ls)
		return name + "{" + strings.Join(ls, ",") + "}"
	}
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			switch mf.GetType() {
			case dto.MetricType_COUNTER:
				out[key(mf.GetName(), m)] = m.GetCounter().GetValue()
			case dto.MetricType_GAUGE:
				out[key(mf.GetName(), m)] = m.GetGauge().GetValue()
			case dto.MetricType_HISTOGRAM:
				h := m.GetHistogram()
				out[key(mf.GetName()+"_count", m)] = float64(h.GetSampleCount())
				out[key(mf.GetName()+"_sum", m)] = h.GetSampleSum()
				for _, b := range h.GetBucket() {
					out[key(mf.GetName()+"_bucket", m, fmt.Sprintf("le=%q", fmt.Sprint(b.GetUpperBound())))] = float64(b.GetCumulativeCount())
				}
				out[key(mf.GetName()+"_bucket", m, `le="+Inf"`)] = float64(h.GetSampleCount())
			}
		}
	}
	return out
}

// TestHandlerServesMetrics scrapes /metrics over HTTP on 127.0.0.1.
func TestHandlerServesMetrics(t *testing.T) {
	m := pacemetrics.New()
	m.Departed("a.test", 20*time.Millisecond)
	srv := httptest.NewServer(m.Handler())
	defer srv.Close()

	scrape := func() string {
		resp, err := http.Get(srv.URL + "/metrics")
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		body, err := io.ReadAll(resp.Body)
		if err != nil {
			t.Fatal(err)
		}
		if resp.StatusCode != http.StatusOK || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/plain") {
			t.Fatalf("status %d, content type %q", resp.StatusCode, resp.Header.Get("Content-Type"))
		}
		return string(body)
	}
	scrape() // a.test has had its place since its first departure
	m.Departed("a.test", 20*time.Millisecond)
	body := scrape()
	for _, want := range []string{
		"# TYPE collypace_departures_total counter",
		`collypace_departures_total{host="a.test"} 2`,
		`collypace_departures_total{host="other"} 0`,
		`collypace_departure_wait_seconds_bucket{le="0.025"} 2`,
		`collypace_departure_wait_seconds_count 2`,
	} {
		if !strings.Contains(body, want) {
			t.Errorf("/metrics lacks %q:\n%s", want, body)
		}
	}
	if strings.Contains(body, "go_goroutines") {
		t.Error("Handler serves more than the Collector's metrics")
	}
	if err := testutil.ScrapeAndCompare(srv.URL+"/metrics", strings.NewReader(`
# HELP collypace_retry_after_waits_total Retry-After windows obeyed for the host.
# TYPE collypace_retry_after_waits_total counter
collypace_retry_after_waits_total{host="a.test"} 0
collypace_retry_after_waits_total{host="other"} 0
`), "collypace_retry_after_waits_total"); err != nil {
		t.Error(err)
	}
}

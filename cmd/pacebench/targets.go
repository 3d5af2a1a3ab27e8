package main

import (
	"fmt"
	"math"
	"time"
)

// Targets of issue 4 for adaptive pacing, checked against every run. They are not relaxed to fit a
// result: a miss is reported as a miss.
const (
	targetMedianPrecision = 0.01             // latency: median gap within 1% of the interval
	targetGoodput         = 0.85             // hidden capacity: goodput at least 85% of capacity…
	targetRefused         = 0.03             // …with at most 3% of requests refused
	targetOutageDrop      = 4.0              // outage: request rate drops at least 4×…
	targetRecovery        = 30 * time.Second // …and is back at the floor within 30 s of recovery
	targetScenarioWall    = time.Minute      // each scenario run under a minute
	targetSuiteWall       = 6 * time.Minute  // issue 4's six scenarios under 6 minutes
)

// Targets of issue 9 (admission at the moment of departure), at the server.
const (
	targetFleetGoodput   = 0.80            // fleet of 3 on a 4/s host: at least 80% of capacity…
	targetFleetRefused   = 0.05            // …with at most 5% refused
	targetFloorShortfall = 0.005           // fleet at a floor: no gap under it by more than 0.5%
	targetOutageRequests = 6               // outage under a deadline: at most 6 requests during it…
	targetFirstOK        = 3 * time.Second // …and the first 200 within 3 s of its end
	targetSteadyGoodput  = 0.90            // steady capacity: at least 90%…
	targetStepGoodput    = 0.85            // capacity step: at least 85% before and after…
	targetCapRefused     = targetRefused   // …each with at most 3% refused
)

// Targets of issue 15 (one capacity model per host), at the server.
const (
	targetQueueWaitMedian = 10 * time.Millisecond  // overload, 1 worker × 100 ms: median wait for a worker…
	targetQueueWaitP95    = 100 * time.Millisecond // …p95 at most one service time…
	targetOverloadGoodput = 0.85                   // …with goodput at least 85% of workers / service time
	targetNoBurstGoodput  = 0.90                   // limiter without burst, 4/s: at least 90% of capacity…
	targetNoBurstRefused  = 0.03                   // …at most 3% refused
	targetStepNBGoodput   = 0.85                   // step without burst: at least 85% before and after, at most 3% refused
	targetNginxGoodput    = 0.85                   // nginx defaults (503, no Retry-After): at least 85%…
	targetNginxRefused    = 0.05                   // …at most 5% refused, no URL lost
	targetFleetNBGoodput  = 0.85                   // fleet of 3 without burst: at least 85%…
	targetFleetNBRefused  = 0.03                   // …at most 3% refused, no arrival in a Retry-After window
	targetGridGoodput     = 0.85                   // every limiter of the grid: at least 85%, no URL lost
	targetQuotaGoodput    = 0.90                   // quota headers 10 per 5 s: at least 90% of the quota, nothing refused
)

// Targets of issue 26 (the capacity model over a long crawl), at the server, judged on the long
// versions of the limiter shapes (-long) and on the real limiters. The steady state starts steadyFrom
// after the first page request.
const (
	targetLongWindow     = 0.90 // limiter without burst, 4/s, Retry-After 1: every 30 s window after 30 s at least 90%…
	targetLongRefusedMin = 1.0  // …with at most 1 refusal a minute after 30 s
	targetLongGridSteady = 0.90 // every limiter of the grid: at least 90% from 30 s on…
	targetLongGridWhole  = 0.85 // …at least 85% over the whole crawl, no URL lost
	targetLongStep       = 0.85 // steps 4→2 and 2→4: at least 85% before the step and after the 30 s that follow it
	targetRealNginx      = 0.90 // nginx limit_req at 4/s, with 503 and with 429: at least 90% of its rate
	targetRealHAProxy    = 0.85 // HAProxy's sliding window at 4/s: at least 85%
	// Refusals that speed does not cause: the crawl ends within a minute, nothing deferred, and the
	// interval stays within 4× the base once the model has seen that slowing down does not help.
	targetRIWall          = time.Minute
	targetRIIntervalBases = 4.0
)

// Target is one target of the issue, evaluated on one run.
type Target struct {
	Scenario string
	Text     string // the target as the issue states it
	Adaptive string // what adaptive pacing measured
	Static   string // what static Colly measured, for contrast ("" when meaningless)
	Met      bool
}

// evaluate checks the issues' targets against the results. suite is the wall time of issue 4's six
// scenarios, checked only when all of them ran.
func evaluate(results []*ScenarioResult, suite time.Duration, allRan bool) []Target {
	var out []Target
	for _, r := range results {
		sc := &r.Scenario
		add := func(text, adaptive, static string, met bool) {
			out = append(out, Target{Scenario: sc.Name, Text: text, Adaptive: adaptive, Static: static, Met: met})
		}
		st, ad := r.Metrics[Static], r.Metrics[Adaptive]
		if isLowRate(sc) {
			out = append(out, evaluateLowRate(r)...)
			continue // minutes of crawl by design: no wall-time target
		}
		if sc.Long {
			out = append(out, evaluateLong(r)...)
			continue // a long scenario runs for minutes by design: no wall-time target
		}
		switch sc.Name {
		case scLatency:
			for g, grp := range sc.Groups {
				dev := deviation(ad[g].Median, sc.Interval)
				add(fmt.Sprintf("%s host: median gap within 1%% of the %s interval (jitter 0)", grp.Label, fmtDur(sc.Interval)),
					fmt.Sprintf("%s (%+.2f%%)", fmtDur(ad[g].Median), dev*100),
					fmt.Sprintf("%s (%+.0f%%: latency + delay)", fmtDur(st[g].Median), deviation(st[g].Median, sc.Interval)*100),
					math.Abs(dev) <= targetMedianPrecision && ad[g].Median > 0)
			}
		case scCapacity:
			a, s := ad[0], st[0]
			add("goodput at least 85% of the host's capacity", fmtGoodput(a), fmtGoodput(s), a.GoodputShare() >= targetGoodput)
			add("at most 3% of requests refused", fmtRefused(a), fmtRefused(s), a.RefusedShare() <= targetRefused)
			add("no page lost", fmtLost(a), fmtLost(s), a.Lost == 0)
			add("zero requests inside a Retry-After window", fmtInWindow(a), fmtInWindow(s), a.InWindow == 0)
		case scHTTPDate:
			a, s := ad[0], st[0]
			add("zero requests inside a Retry-After window (HTTP-date, clock +1 h)", fmtInWindow(a), fmtInWindow(s), a.InWindow == 0)
			worst, over, ok := a.MaxLateness()
			met := ok && over == 0
			text := "no window to measure"
			if ok {
				text = fmt.Sprintf("max %s after the window (allowed %s), %d of %d over", fmtDur(worst.Late), fmtDur(worst.Allow), over, len(a.Lateness))
			}
			add("first request after the window no later than the safety buffer plus the HTTP-date's 1 s resolution", text, "", met)
		case scCrawlDelay:
			a, s := ad[0], st[0]
			lo, hi := a.Floor, a.Floor+time.Duration(float64(a.Floor)*sc.Jitter)
			add(fmt.Sprintf("gaps between %s and %s (Crawl-delay, jitter %g)", fmtDur(lo), fmtDur(hi), sc.Jitter),
				fmt.Sprintf("%s – %s (median %s)", fmtDur(a.Min), fmtDur(a.Max), fmtDur(a.Median)),
				fmt.Sprintf("%s – %s", fmtDur(s.Min), fmtDur(s.Max)),
				a.Min >= lo && a.Max <= hi && len(a.Gaps) > 0)
		case scOutage:
			a, s := ad[0], st[0]
			if a.Outage != nil && s.Outage != nil {
				add("request rate during the outage at least 4× lower than before", fmtDrop(a.Outage), fmtDrop(s.Outage), a.Outage.Drop() >= targetOutageDrop)
				add("back at the floor within 30 s of recovery", fmtRecovery(a.Outage), fmtRecovery(s.Outage),
					a.Outage.Recovered && a.Outage.Recovery <= targetRecovery)
			}
			add("no page lost", fmtLost(a), fmtLost(s), a.Lost == 0)
		case scFleetCapacity:
			a, s := ad[0], st[0]
			add("every page fetched", fmtLost(a), fmtLost(s), a.Lost == 0)
			add("zero arrivals inside a Retry-After window (beyond requests already on their way)", fmtInWindow(a), fmtInWindow(s), a.InWindow == 0)
			add("at least 80% of the host's capacity used", fmtGoodput(a), fmtGoodput(s), a.GoodputShare() >= targetFleetGoodput)
			add("at most 5% of requests refused", fmtRefused(a), fmtRefused(s), a.RefusedShare() <= targetFleetRefused)
		case scFleetFloor:
			a, s := ad[0], st[0]
			least := a.Floor - time.Duration(float64(a.Floor)*targetFloorShortfall)
			add(fmt.Sprintf("no gap at the server under the %s floor by more than 0.5%% (≥ %s)", fmtDur(a.Floor), fmtDur(least)),
				fmtFloorGaps(a), fmtFloorGaps(s), len(a.Gaps) > 0 && a.Min >= least)
		case scOutageDeadline:
			a, s := ad[0], st[0]
			add("every page fetched (under the collector's context deadline)", fmtLost(a), fmtLost(s), a.Lost == 0)
			if a.Outage != nil && s.Outage != nil {
				add("at most 6 requests during the outage", fmtDuring(a.Outage), fmtDuring(s.Outage), a.Outage.DuringCount <= targetOutageRequests)
				add("first 200 within 3 s of the outage's end", fmtFirstOK(a.Outage), fmtFirstOK(s.Outage),
					a.Outage.FirstOKSeen && a.Outage.FirstOK <= targetFirstOK)
			}
		case scSteadyCapacity:
			a, s := ad[0], st[0]
			add("at least 90% of the host's capacity used", fmtGoodput(a), fmtGoodput(s), a.GoodputShare() >= targetSteadyGoodput)
			add("at most 3% of requests refused", fmtRefused(a), fmtRefused(s), a.RefusedShare() <= targetCapRefused)
		case scCapacityStep:
			a, s := ad[0], st[0]
			stepTargets(add, a, s, targetStepGoodput)
			add("at most 3% of requests refused", fmtRefused(a), fmtRefused(s), a.RefusedShare() <= targetCapRefused)
		default:
			out = append(out, evaluateIssue15(r)...)
		}
		add("scenario run under a minute (both crawls, side by side)", fmtDur(r.Wall), "", r.Wall < targetScenarioWall)
	}
	if allRan {
		out = append(out, Target{Scenario: "all", Text: "issue 4's six scenarios under 6 minutes", Adaptive: fmtDur(suite), Met: suite < targetSuiteWall})
	}
	return out
}

// evaluateIssue15 checks the targets of issue 15's scenarios (none for another scenario).
func evaluateIssue15(r *ScenarioResult) []Target {
	var out []Target
	sc := &r.Scenario
	add := func(text, adaptive, static string, met bool) {
		out = append(out, Target{Scenario: sc.Name, Text: text, Adaptive: adaptive, Static: static, Met: met})
	}
	st, ad := r.Metrics[Static], r.Metrics[Adaptive]
	switch sc.Name {
	case scOverload:
		a, s := ad[0], st[0]
		add("the server's queue wait: median at most 10 ms", fmtDur(a.WaitMedian), fmtDur(s.WaitMedian),
			len(a.QueueWaits) > 0 && a.WaitMedian <= targetQueueWaitMedian)
		add("the server's queue wait: p95 at most 100 ms (one service time)", fmtDur(a.WaitP95), fmtDur(s.WaitP95),
			len(a.QueueWaits) > 0 && a.WaitP95 <= targetQueueWaitP95)
		add("goodput at least 85% of capacity (workers / service time)", fmtGoodput(a), fmtGoodput(s), a.GoodputShare() >= targetOverloadGoodput)
	case scSteadyNoBurst:
		a, s := ad[0], st[0]
		add("at least 90% of the host's capacity used", fmtGoodput(a), fmtGoodput(s), a.GoodputShare() >= targetNoBurstGoodput)
		add("at most 3% of requests refused", fmtRefused(a), fmtRefused(s), a.RefusedShare() <= targetNoBurstRefused)
	case scStepNoBurst, scStepUpNoBurst:
		a, s := ad[0], st[0]
		stepTargets(add, a, s, targetStepNBGoodput)
		add("at most 3% of requests refused", fmtRefused(a), fmtRefused(s), a.RefusedShare() <= targetNoBurstRefused)
	case scNginx503:
		a, s := ad[0], st[0]
		add("at least 85% of the host's capacity used", fmtGoodput(a), fmtGoodput(s), a.GoodputShare() >= targetNginxGoodput)
		add("at most 5% of requests refused", fmtRefused(a), fmtRefused(s), a.RefusedShare() <= targetNginxRefused)
		add("no URL lost", fmtLost(a), fmtLost(s), a.Lost == 0)
	case scFleetNoBurst:
		a, s := ad[0], st[0]
		add("at least 85% of the host's capacity used", fmtGoodput(a), fmtGoodput(s), a.GoodputShare() >= targetFleetNBGoodput)
		add("at most 3% of requests refused", fmtRefused(a), fmtRefused(s), a.RefusedShare() <= targetFleetNBRefused)
		add("zero arrivals inside a Retry-After window (beyond requests already on their way)", fmtInWindow(a), fmtInWindow(s), a.InWindow == 0)
	case scLimiterGrid:
		for g, grp := range sc.Groups {
			a, s := ad[g], st[g]
			add(grp.Label+": at least 85% of capacity, no URL lost", fmtGoodput(a)+", "+fmtLost(a), fmtGoodput(s)+", "+fmtLost(s),
				a.GoodputShare() >= targetGridGoodput && a.Lost == 0)
		}
	case scQuota:
		a, s := ad[0], st[0]
		add("at least 90% of the quota used", fmtGoodput(a), fmtGoodput(s), a.GoodputShare() >= targetQuotaGoodput)
		add("nothing refused", fmtRefused(a), fmtRefused(s), a.Refused == 0)
	case scRealNginx503, scRealNginx429, scRealHAProxy:
		out = append(out, evaluateReal(r)...)
	case scRateIndependent, scRateIndependentFleet:
		a, s := ad[0], st[0]
		ar, sr := r.Runs[Adaptive], r.Runs[Static]
		add("the crawl ends within 60 s", fmtCrawl(ar), fmtCrawl(sr), !ar.TimedOut && ar.Wall <= targetRIWall)
		add("nothing deferred", fmt.Sprintf("%d deferred", ar.Deferred), "", ar.Deferred == 0)
		add("no URL lost", fmtLost(a), fmtLost(s), a.Lost == 0)
		settled := "no host refused 4 times"
		if a.Settled {
			settled = fmt.Sprintf("at most %s (%.1f× base)", fmtDur(a.SettledInterval), float64(a.SettledInterval)/float64(sc.Interval))
		}
		add("the interval in force at most 4× the base once the model has seen slowing down not help (its refusals_uncorrelated event; without one, from a host's 4th refusal)",
			settled, "", !a.Settled || a.SettledInterval <= time.Duration(targetRIIntervalBases*float64(sc.Interval)))
	}
	return out
}

// fmtCrawl renders how long a crawl took: "41.20 s", "stopped at 3m0s".
func fmtCrawl(run *Run) string {
	if run.TimedOut {
		return "stopped at " + fmtDur(run.Wall)
	}
	return fmtDur(run.Wall)
}

// evaluateReal checks a real limiter's targets (issue 26), at any length: nginx at least 90% of its
// rate over the whole crawl, HAProxy at least 85%, no URL lost.
func evaluateReal(r *ScenarioResult) []Target {
	sc := &r.Scenario
	if sc.Limiter == nil {
		return nil
	}
	goal := targetRealNginx
	if sc.Limiter.Kind == HAProxy {
		goal = targetRealHAProxy
	}
	a, s := r.Metrics[Adaptive][0], r.Metrics[Static][0]
	withSteady := func(m *Metrics) string {
		if m.Steady == nil {
			return fmtGoodput(m)
		}
		return fmtGoodput(m) + "; from 30 s on " + fmtSteadyGoodput(m)
	}
	return []Target{
		{Scenario: sc.Name, Text: fmt.Sprintf("at least %.0f%% of the limiter's rate over the whole crawl", goal*100),
			Adaptive: withSteady(a), Static: withSteady(s), Met: a.GoodputShare() >= goal},
		{Scenario: sc.Name, Text: "no URL lost", Adaptive: fmtLost(a), Static: fmtLost(s), Met: a.Lost == 0},
	}
}

// evaluateLong checks the targets of issue 26 on the long version of a limiter shape.
func evaluateLong(r *ScenarioResult) []Target {
	var out []Target
	sc := &r.Scenario
	add := func(text, adaptive, static string, met bool) {
		out = append(out, Target{Scenario: sc.Name + " (long)", Text: text, Adaptive: adaptive, Static: static, Met: met})
	}
	st, ad := r.Metrics[Static], r.Metrics[Adaptive]
	switch sc.Name {
	case scSteadyNoBurst:
		a, s := ad[0], st[0]
		low, ok := minWindowShare(a)
		add("every 30 s window after the first 30 s at least 90% of capacity", fmtMinWindow(a), fmtMinWindow(s), ok && low >= targetLongWindow)
		add("at most 1 refusal a minute after the first 30 s", fmtRefusedPerMinute(a), fmtRefusedPerMinute(s),
			a.Steady != nil && a.Steady.RefusedPerMinute <= targetLongRefusedMin)
	case scFleetNoBurst:
		a, s := ad[0], st[0]
		add("at least 90% of capacity from 30 s on", fmtSteadyGoodput(a), fmtSteadyGoodput(s),
			a.Steady != nil && a.Steady.Goodput >= targetLongGridSteady*a.Capacity)
		add("zero arrivals inside a Retry-After window (beyond requests already on their way)", fmtInWindow(a), fmtInWindow(s), a.InWindow == 0)
	case scStepNoBurst, scStepUpNoBurst:
		a, s := ad[0], st[0]
		if a.Step == nil || s.Step == nil {
			break
		}
		add(fmt.Sprintf("at least 85%% of the %g/s capacity before the step", a.Step.CapBefore),
			fmtStepShare(a.Step.Before, a.Step.CapBefore), fmtStepShare(s.Step.Before, s.Step.CapBefore), a.Step.Before >= targetLongStep*a.Step.CapBefore)
		add(fmt.Sprintf("at least 85%% of the %g/s capacity after the step, from 30 s after it on", a.Step.CapAfter),
			fmtSettled(a.Step), fmtSettled(s.Step), a.Step.SettledOK && a.Step.Settled >= targetLongStep*a.Step.CapAfter)
	case scLimiterGrid:
		for g, grp := range sc.Groups {
			a, s := ad[g], st[g]
			cell := func(m *Metrics) string {
				return fmt.Sprintf("from 30 s on %s; whole %s; %s", fmtSteadyGoodput(m), fmtGoodput(m), fmtLost(m))
			}
			add(grp.Label+": at least 90% of capacity from 30 s on, 85% over the whole crawl, no URL lost", cell(a), cell(s),
				a.Steady != nil && a.Steady.Goodput >= targetLongGridSteady*a.Capacity && a.GoodputShare() >= targetLongGridWhole && a.Lost == 0)
		}
	case scWorkersGrid:
		for g, grp := range sc.Groups {
			a, s := ad[g], st[g]
			cell := func(m *Metrics) string {
				return fmt.Sprintf("queue wait median %s, p95 %s; %s", fmtDur(m.WaitMedian), fmtDur(m.WaitP95), fmtGoodput(m))
			}
			add(grp.Label+": the server's queue wait median at most 10% of a service time, p95 at most one, goodput at least 85%", cell(a), cell(s),
				len(a.QueueWaits) > 0 && a.WaitMedian <= a.Service/10 && a.WaitP95 <= a.Service && a.GoodputShare() >= targetOverloadGoodput)
		}
	case scRealNginx503, scRealNginx429, scRealHAProxy:
		for _, t := range evaluateReal(r) {
			add(t.Text, t.Adaptive, t.Static, t.Met)
		}
	}
	return out
}

// minWindowShare is the worst 30 s window after the first 30 s as a share of capacity; ok is false
// without a window or a capacity.
func minWindowShare(m *Metrics) (share float64, ok bool) {
	if m.Steady == nil || m.Capacity <= 0 {
		return 0, false
	}
	low, ok := m.Steady.MinWindow()
	return low / m.Capacity, ok
}

// fmtSettled renders the rate after a step, from 30 s after it on.
func fmtSettled(st *StepMetrics) string {
	if !st.SettledOK {
		return "the crawl ended within 30 s of the step"
	}
	return fmtStepShare(st.Settled, st.CapAfter)
}

// deviation is (d − ref) / ref.
func deviation(d, ref time.Duration) float64 {
	if ref == 0 {
		return 0
	}
	return float64(d-ref) / float64(ref)
}

// stepTargets adds a capacity step's two goodput targets, before and after the step (at least goal of
// each capacity), when both crawls measured the step.
func stepTargets(add func(text, adaptive, static string, met bool), a, s *Metrics, goal float64) {
	if a.Step == nil || s.Step == nil {
		return
	}
	add(fmt.Sprintf("at least %.0f%% of the %g/s capacity before the step", goal*100, a.Step.CapBefore),
		fmtStepShare(a.Step.Before, a.Step.CapBefore), fmtStepShare(s.Step.Before, s.Step.CapBefore), a.Step.Before >= goal*a.Step.CapBefore)
	add(fmt.Sprintf("at least %.0f%% of the %g/s capacity after the step", goal*100, a.Step.CapAfter),
		fmtStepShare(a.Step.After, a.Step.CapAfter), fmtStepShare(s.Step.After, s.Step.CapAfter), a.Step.After >= goal*a.Step.CapAfter)
}

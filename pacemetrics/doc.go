// Package pacemetrics exports the pacing of a collypace [ext.Pacer] as Prometheus metrics.
//
// A [Collector] is an [ext.Observer], which the pacer calls on every departure, refusal, Retry-After
// window and breaker transition, and a [prometheus.Collector], which exports what it counted together
// with what the pacer ([Collector.Watch]) and the host-aware queue ([Collector.WatchQueue]) report
// at scrape time:
//
//	m := pacemetrics.New()
//	pacer := ext.AdaptivePacing(c, ext.WithObserver(m))
//	m.Watch(pacer)             // delay, in flight and breaker state per host
//	m.WatchQueue(queue)        // queue depth per host, with the host-aware queue
//	prometheus.MustRegister(m) // or http.Handle("/metrics", m.Handler())
//
// # Metrics
//
// Label names are stable: host (the pacer's host key, or "other"), trigger, state.
//
//	name                                      type       labels         meaning
//	collypace_departures_total                counter    host           requests that departed
//	collypace_wait_seconds_total              counter    host           time they waited for their slots before departing
//	collypace_refusals_total                  counter    host, trigger  refusals: trigger refusal (429, 503, Retry-After),
//	                                                                    server_error (other 5xx), transport_error
//	collypace_retry_after_waits_total         counter    host           Retry-After windows obeyed
//	collypace_retry_after_wait_seconds_total  counter    host           their total length, safety buffer included
//	collypace_breaker_transitions_total       counter    host, state    breaker transitions, by state entered
//	collypace_breaker_state                   gauge      host           breaker state: 0 closed, 1 open, 2 half-open
//	collypace_breaker_hosts                   gauge      state          hosts in memory per breaker state
//	collypace_host_delay_seconds              gauge      host           current interval before jitter (max(base, Crawl-delay,
//	                                                                    rate limit, adaptive)); for "other", the largest
//	collypace_in_flight                       gauge      host           requests in flight
//	collypace_hosts                           gauge      (none)         hosts whose pacing state is in memory
//	collypace_queue_depth                     gauge      host           requests queued (WatchQueue)
//	collypace_fleet_hosts_held                gauge      member         a fleet member's hosts leased now (told by its
//	                                                                    Queue, through FleetChanged; audit.FleetStats)
//	collypace_fleet_share                     gauge      member         its share of the fleet's hosts, at its last heartbeat
//	collypace_fleet_leases_total              counter    member         leases it won
//	collypace_fleet_hosts_stolen_total        counter    member         hosts it gave up, holding more than its share
//	collypace_fleet_hosts_taken_over_total    counter    member         hosts it took over from a dead member
//	collypace_fleet_requests_resent_total     counter    member         requests handed to it again after a lease ran out
//	collypace_departure_wait_seconds          histogram  (none)         time each request waited before departing,
//	                                                                    buckets 1, 2.5, 5, 10 … 250, 500 ms, 1, 2.5, 5,
//	                                                                    10, 30 s, 1, 2, 5 min
//	collypace_option_invalid                  gauge      option         1 for an option of New whose value was invalid
//	                                                                    (its default is used); absent when none was
//
// The counters come from the Observer: without ext.WithObserver(m) they stay at zero and no host has
// series of its own. The gauges collypace_host_delay_seconds, collypace_in_flight and collypace_hosts
// need Watch, collypace_queue_depth needs WatchQueue; collypace_breaker_state and
// collypace_breaker_hosts are read from the pacer when it is watched (its state restored from a store
// included), else from the transitions observed. Mean wait per host is
// rate(collypace_wait_seconds_total) / rate(collypace_departures_total); the histogram has no host
// label, so that it costs 20 series whatever the number of hosts.
//
// For host="other", counters count the events of the hosts that had no series of their own when the
// event happened, gauges sum (max for the delay) over those hosts. collypace_refusals_total and
// collypace_breaker_transitions_total are exported for a labelled host only for the trigger or state
// it has seen, and for "other" for every known one (trigger="other" counts unknown triggers).
//
// # Cardinality
//
// At most N hosts (WithTopHosts, default 50) have series of their own; every other host is counted
// under host="other". A crawl of 100 000 hosts therefore makes at most N+1 host values per metric
// (times the 4 triggers or 3 states where there is such a label), whatever the hosts' names, plus,
// in the one scrape after they lose their place, the hosts that lost it (at most N more).
//
// Places are filled as hosts appear, at a host's first event: while places are free, no host's
// events go to "other". Once all N are taken, the N hosts are the most active ones, activity being
// each host's departures decayed with a half-life of 5 minutes, re-ranked at each scrape: a host
// takes the place of a labelled one only when its activity is more than twice the latter's, so that
// hosts of similar activity do not swap at every scrape. A host that loses its
// place has its counters exported one last time, then its series disappear (Prometheus marks them
// stale); a host named "other" or "", or whose key is not valid UTF-8, never gets a place.
//
// Every exported counter is monotonic (forgotten hosts aside, see below). A labelled host's series
// report the host's totals since the Collector first saw it, and "other" only ever adds the events
// of hosts that were unlabelled when they happened, so neither goes back when hosts enter or leave
// the top N. Between two scrapes, each event increases exactly one series, so
// sum(rate(collypace_departures_total[5m])) counts every departure once. The price: the events a
// host had before it took a labelled host's place are both in "other" and in the first value of its
// own series (which rate and increase do not count as an increase), so the sum of the raw values,
// sum(collypace_departures_total), can count them twice. Use sums of rates, as usual for counters.
//
// # Memory and cost
//
// The Collector keeps one record per host: its counters, its breaker state and its activity score,
// in a sharded map: about 165 bytes per host (a 144-byte record and its map entry; the key's bytes
// are shared with the pacer's), 17 MB for 100 000 hosts active at once. An unlabelled host with a
// closed breaker and no event for 30 minutes is forgotten (its events are already in "other"); if it
// comes back, its totals start again from zero, which Prometheus reads as a counter reset should it
// once have had series of its own. The Observer methods take a shard's read lock for
// the lookup, then add to atomic counters: no allocation once the host is known, no lock held
// afterwards (about 75 ns a call); a host's first event also takes the Collector's lock, once, to give
// it a free place. A scrape walks every record once (scores, top N) and the pacer's
// Hosts() once: about 25 ms for 100 000 hosts, plus Hosts(). No lock is held while metrics are sent
// to Prometheus.
package pacemetrics

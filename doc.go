// Package ext paces Colly crawlers per host: polite to every host, and as fast as each one allows.
//
// Colly's LimitRule sleeps after each response while holding its slot, so the gap between request
// starts is response time + delay, and it ignores what a host says. This package spaces the starts
// of requests to each host by an interval instead, whatever the latency, and takes the interval from
// the host:
//
//   - start-based pacing per host, with a cap on requests in flight; redirect hops and robots.txt
//     fetches are paced too, cache hits are not;
//   - an adaptive interval: the largest of the base delay (your floor), the robots.txt Crawl-delay,
//     the interval the host's rate-limit headers imply (X-RateLimit-*, RateLimit-*, RateLimit and
//     RateLimit-Policy) and an adaptive delay that doubles on refusals and gives capacity back slowly;
//     jitter on top, a ceiling always;
//   - Retry-After obeyed to the instant (seconds or an HTTP-date, skew corrected through Date), for
//     requests already waiting too; an exhausted rate limit holds the host the same way;
//   - retries of refused requests after the host's window, tracked by Collector.Wait;
//   - a circuit breaker per host that parks a failing host and defers its requests;
//   - durable or shared state through a Store (sqlitestore for one machine, redisstore for a fleet);
//   - a JSON audit trail through zerolog, with a stable schema, to show that a crawl was polite.
//
// # Entry points
//
// [AdaptivePacing] installs pacing on a collector and returns the [Pacer]; call it right after
// colly.NewCollector, before your own callbacks:
//
//	c := colly.NewCollector(colly.Async(true))
//	pacer := ext.AdaptivePacing(c, ext.WithBaseDelay(500*time.Millisecond))
//
// [NewPacer] builds a Pacer without a collector: [Pacer.Install] puts it on several collectors, which
// then share each host's schedule, and [Pacer.Wait] and [Pacer.Observe] pace any HTTP client.
// [NewQueue] is a crawl frontier like Colly's queue, but aware of hosts: no worker waits on one host
// while another is ready; on a store that is a [Frontier] (redisstore), it is the fleet's, every
// process crawling the hosts it leases. [Pacer.Hosts] shows each host's interval and what sets it.
// Options (With…) tune the defaults; [WithStore] keeps state in a [Store].
//
// # A request's path
//
// A Colly request waits in the pacer's OnRequestHeaders callback, after the cache and before
// http.Client starts its timeout (extension.go). There its origin's robots.txt is read first (once,
// through the pacer); then the request joins its host's FIFO and waits at its head until the
// admission rule lets it go: no earlier than the last departure plus the interval in force now (plus
// its jitter), not during a hold, and not while the host has as many requests in flight as its cap
// (the queueing signal's, at most WithMaxInFlight) (limiter.go). Nothing is
// booked ahead, so an interval that changes, or a hold that arrives, applies at once to every request
// still waiting. With a [SharedStore], the fleet admits the departure too, on the store's clock
// (persist.go).
//
// The pacing RoundTripper sees every hop, redirects and robots.txt fetches included, and takes the
// departure instant from the wire (httptrace WroteHeaders): the next departure counts from there
// (transport.go). The outcome of each hop goes to [Pacer.ObserveAt] (outcome.go), which classifies
// it, moves the adaptive delay (package internal/capacity), sets holds from Retry-After (parsed by
// internal/retryafter) and exhausted rate limits (internal/ratelimit) and feeds the breaker
// (breaker.go). A refused request is retried after its host's window; one whose host is parked is
// deferred (defer.go) and [Pacer.Drain] sends it later. ARCHITECTURE.md draws the packages.
//
// # Where each rule lives
//
//   - limiter.go: admission (interval, jitter, holds, in-flight slots, redirect deadlines);
//   - waitline.go: the host's FIFO, each request waiting at its head for its departure;
//   - internal/capacity: the capacity model, a pure package: its rate signal (bisecting between good
//     and refused intervals, the noise test, the refusal governor), its queueing signal (the in-flight
//     cap at the bandwidth-delay product) and the slow rule; outcome.go turns an outcome into its Sample;
//   - outcome.go: what an outcome means (refusal, server error, clean, neutral) and what it changes;
//   - retryafter.go: a Retry-After's hold; internal/retryafter parses it (HTTP-dates and the server's
//     clock in internal/httpfield), internal/ratelimit the rate-limit header families (X-RateLimit-*,
//     RateLimit-*, structured RateLimit);
//   - robots.go, robotsread.go: robots.txt's Crawl-delay and its cap applied to the host, and what an
//     unavailable one does to it; internal/robots caches it, one fetch per origin a day (per fleet,
//     with a store that shares reads); internal/robotstxt parses it;
//   - breaker.go (the state machine in internal/breaker), defer.go: the circuit breaker and the
//     requests it defers;
//   - queue.go, queuenext.go, queuesend.go, queuestore.go, queueheap.go: the host-aware Queue, its
//     scheduler, its requests on their way, its store I/O and its heaps; queuefleet.go, fleetlease.go,
//     fleetrenew.go: a Queue on a fleet's frontier (leases, heartbeats);
//   - store.go, persist.go, persistfleet.go, memstore.go, storehealth.go: the Store contract,
//     write-behind and write-through of state, a shared store's admission, a failing store audited;
//   - hostkey.go (internal/hostkey): what counts as one host ([DefaultHostKey],
//     [ByRegistrableDomain], [ByIP]);
//   - auditlog.go: writing audit events; their names, field keys and triggers are the
//     vocabulary of package audit.
//
// # Time
//
// Every decision has an explicit-time form ([Pacer.ObserveAt], [Pacer.HostAt], [Pacer.AdmitAt],
// [Pacer.ReserveAt]); the form without At is shorthand for it at time.Now(). Simulations and tests
// drive the pacer with their own clock through them.
//
// # More
//
// The README holds the tables: options and their defaults
// (https://github.com/collypace/ext#options), the adaptive rule
// (https://github.com/collypace/ext#how-it-paces), the breaker
// (https://github.com/collypace/ext#circuit-breaker-and-deferred-requests), stores
// (https://github.com/collypace/ext#durable-and-shared-state), what bad input does
// (https://github.com/collypace/ext#bad-input--behaviour) and the audit schema
// (https://github.com/collypace/ext#audit-trail). Subpackages: sqlitestore and redisstore (stores),
// pacemetrics (Prometheus); cmd/pacereport checks an audit trail.
package ext

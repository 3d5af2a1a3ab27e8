// Package audit is the vocabulary of collypace's audit trail: the event names, the field keys of
// every JSON line, the triggers that say what caused an event and the reasons a circuit breaker
// trips. The pacer (package ext) writes events with these names through the zerolog.Logger given to
// ext.WithLogger; readers (cmd/pacereport, compliance tooling) match on them. The names and keys
// are a stable schema: a new version adds, it never renames or reuses.
package audit

// Schema is the version of the audit schema written in every event's "schema" field.
const Schema = 2

// Event is the value of an event's "event" field: what happened.
type Event string

// The events.
const (
	EventDelayApplied   Event = "delay_applied"   // a request departed (at the instant its headers reached the wire)
	EventDelayIncreased Event = "delay_increased" // the adaptive delay grew (refusal or latency)
	EventDelayDecreased Event = "delay_decreased" // the adaptive delay gave capacity back
	// EventRefusalsUncorrelated: the host's refusals stayed as frequent once the pace slowed (or came
	// after a whole Retry-After hold): speed does not cause them, so they no longer move the adaptive
	// delay, which decays to the floor. Each Retry-After is still obeyed.
	EventRefusalsUncorrelated Event = "refusals_uncorrelated"
	// EventRefusalsCorrelated: refusals became clearly more frequent than that noise: a rate signal
	// again, for the rest of the crawl.
	EventRefusalsCorrelated Event = "refusals_correlated"
	// EventRefusalShareHigh: more of the host's recent outcomes were refused than any pace the model
	// believes in allows (see ext's refusal governor): the delay was slowed by half, whatever the model
	// (noise mode included) reads from them.
	EventRefusalShareHigh     Event = "refusal_share_high"
	EventRetryAfterHonoured   Event = "retry_after_honoured"   // no departure to the host before the window ends
	EventRetryAfterNow        Event = "retry_after_now"        // a Retry-After of 0 or a past date: no hold, the backoff only
	EventCrawlDelayApplied    Event = "crawl_delay_applied"    // a robots.txt Crawl-delay became part of the interval
	EventRateLimitApplied     Event = "rate_limit_applied"     // rate-limit headers set the interval or a hold
	EventHeaderInvalid        Event = "header_invalid"         // a Retry-After or rate-limit field was ignored
	EventRobotsInvalid        Event = "robots_invalid"         // part of robots.txt was not taken as published
	EventRobotsUnavailable    Event = "robots_unavailable"     // robots.txt could not be read (5xx, 429, network): the host is held, retried
	EventRetryScheduled       Event = "retry_scheduled"        // a refused request will be sent again after the window
	EventRetriesExhausted     Event = "retries_exhausted"      // a refused request reached the retry limit
	EventRetryDuplicate       Event = "retry_duplicate"        // an OnError callback retried a request the pacer retries: the copy was dropped
	EventPacingBypassed       Event = "pacing_bypassed"        // requests reach the network without the pacer's transport
	EventCallbacksBeforePacer Event = "callbacks_before_pacer" // OnError/OnResponse callbacks were registered before the pacer's
	EventLimitRuleStacked     Event = "limit_rule_stacked"     // a LimitRule Delay adds latency + delay on top of pacing
	EventDepartureAbandoned   Event = "departure_abandoned"    // a wait ended by cancellation or a deadline
	EventRetryAfterTooLong    Event = "retry_after_too_long"   // a Retry-After above the maximum
	EventCrawlDelayClamped    Event = "crawl_delay_clamped"    // a Crawl-delay above the maximum was clamped
	EventRedirectHopTimedOut  Event = "redirect_hop_timed_out" // a redirect hop's wait reached its request's deadline: retried
	EventBreakerOpened        Event = "breaker_opened"         // the host is parked: its requests are deferred
	EventBreakerHalfOpen      Event = "breaker_half_open"      // the cool-down is over: one probe goes out
	EventBreakerClosed        Event = "breaker_closed"         // the probe succeeded: the host is crawled again
	EventRequestDeferred      Event = "request_deferred"       // a request to a parked host was stored, not sent
	EventDeferredDrained      Event = "deferred_drained"       // deferred requests were handed back to a collector
	EventStateRepaired        Event = "state_repaired"         // a stored value could not be trusted and was fixed
	EventStateCorrupt         Event = "state_corrupt"          // a stored row could not be decoded: the host starts afresh
	EventStoreUnavailable     Event = "store_unavailable"      // the store failed: a shared store's departures wait for it, a local store's state waits in memory
	EventStoreSlow            Event = "store_slow"             // admission waited on a slow shared store beyond the bound
	EventFleetWireWait        Event = "fleet_wire_wait"        // a departure waited for another process's departure to reach the wire (a slow dial)
	EventStoreRecovered       Event = "store_recovered"        // the store answers again
	EventOptionInvalid        Event = "option_invalid"         // an option value was set aside at construction: the default is used
	// EventAuditWriteFailed names, in an alert (never in the trail it could not write), a failed write
	// of the audit trail (ext.WithAuditWriter): events are being lost.
	EventAuditWriteFailed   Event = "audit_write_failed"
	EventFleetHostTakenOver Event = "fleet_host_taken_over" // a Queue leased a host whose previous lease ran out unrenewed (its member died)
	EventFleetHostStolen    Event = "fleet_host_stolen"     // a Queue gave a host up at its heartbeat, holding more than its share, for a member under its share
	EventFleetMember        Event = "fleet_member"          // a Queue's Run on a fleet's frontier ended: its figures (the fleet_* fields)
	// EventFleetLeaseLost: a Queue lost its lease of a host (the frontier says another member holds
	// it, a renewal came too late, or the store refused a departure under it: a pause past the lease),
	// and sends nothing more there; the requests it had taken go back to the frontier for the next
	// holder (fleet_given_back).
	EventFleetLeaseLost Event = "fleet_lease_lost"
	// EventRestartHeld: the pacer before this one on a durable store ended without Close (killed,
	// crashed): the departures it wrote behind in its last flush interval may be lost, so this start
	// counts as a departure to every host, each held its interval from it. No target_domain.
	EventRestartHeld Event = "restart_held"
)

// Trigger is the value of an event's "trigger" field: what set a host's interval (or held it), or
// what caused the event.
type Trigger string

// What sets a host's interval, or holds it.
const (
	TriggerBase       Trigger = "base"        // the base delay (the floor)
	TriggerCrawlDelay Trigger = "crawl_delay" // robots.txt's Crawl-delay
	TriggerRateLimit  Trigger = "rate_limit"  // the rate-limit headers (an interval, or a hold when exhausted)
	TriggerAdaptive   Trigger = "adaptive"    // the adaptive delay
	TriggerRetryAfter Trigger = "retry_after" // a Retry-After window
	// TriggerUnreachable holds a host whose robots.txt read found it cannot be reached at all (no such
	// name, connection refused, no route) until that read is due again; its requests fail at once
	// meanwhile. Nothing was learned of the host, so the hold is this process's alone: it is not stored.
	TriggerUnreachable Trigger = "unreachable"
)

// What caused an event, beside the interval triggers.
const (
	TriggerDeparture      Trigger = "departure"
	TriggerRefusal        Trigger = "refusal"         // 429, 503, or a 3xx/4xx with Retry-After
	TriggerServerError    Trigger = "server_error"    // any other 5xx
	TriggerTransportError Trigger = "transport_error" // refused or reset connection, timeout
	TriggerLatency        Trigger = "latency"         // latency above the host's rolling p95
	TriggerClean          Trigger = "clean"           // a 2xx or 3xx
	TriggerRobots         Trigger = "robots"
	TriggerTransport      Trigger = "transport"
	TriggerLimitRule      Trigger = "limit_rule"
	TriggerCancel         Trigger = "cancel"
	TriggerBreaker        Trigger = "breaker"
	TriggerStore          Trigger = "store"
	TriggerOption         Trigger = "option"
	TriggerFleet          Trigger = "fleet" // the fleet's frontier: leases, shares, takeovers
)

// Trip is why a host's circuit breaker opened, in audit details and alerts.
type Trip string

// The trip reasons.
const (
	TripSustainedDelay Trip = "sustained_delay"       // the refusal-driven delay stayed above the threshold
	TripFailures       Trip = "consecutive_failures"  // too many refusals in a row
	TripRetryAfter     Trip = "retry_after_above_cap" // a Retry-After above MaxRetryAfter: parked until its end
	TripCrawlDelay     Trip = "crawl_delay_above_cap" // a Crawl-delay above MaxCrawlDelay
	TripProbeFailed    Trip = "probe_failed"          // the half-open probe was refused
	// TripRobotsUnreachable: robots.txt could not be read for 30 minutes (ext's robotsUnreachableLimit): its pages
	// are deferred, and the breaker's probe is the next robots.txt read.
	TripRobotsUnreachable Trip = "robots_unreachable"
)

// The field keys of every event.
const (
	FieldTimestamp      = "timestamp"         // RFC 3339 UTC time of the event
	FieldPipelineID     = "pipeline_id"       // ext.WithPipelineID
	FieldTargetDomain   = "target_domain"     // the host key
	FieldEvent          = "event"             // an Event
	FieldTrigger        = "trigger"           // a Trigger
	FieldBaseDelayMS    = "base_delay_ms"     // the host's base delay
	FieldComputedDelay  = "computed_delay_ms" // departures: this request's wait; else the interval set, or the wait the event is about
	FieldJitterMS       = "jitter_ms"         // the jitter of this departure
	FieldComplianceFlag = "compliance_flag"   // false whenever a constraint the host published was not fully honoured
	FieldStatusCode     = "status_code"       // the HTTP status involved, 0 when none
	FieldDetail         = "detail"            // a human-readable explanation
)

// Field keys added in schema 2: every key above keeps its meaning, and readers ignore keys they do
// not know.
const (
	FieldSchema         = "schema"                 // the schema version, Schema
	FieldURL            = "url"                    // departures, refusals, retries, deferrals, abandoned waits: the request, without userinfo (query only with ext.WithAuditQuery)
	FieldWaitMS         = "wait_ms"                // departures: how long this request waited in the pacer
	FieldIntervalMS     = "interval_ms"            // departures: the interval in force, jitter excluded
	FieldCrawlDelayMS   = "crawl_delay_ms"         // departures: the robots.txt Crawl-delay in force (0: none)
	FieldRateIntervalMS = "rate_limit_interval_ms" // departures: the interval the rate-limit headers imply (0: none)
	FieldWindowStart    = "window_start"           // holds: when the window was learned (took effect in the pacer), RFC 3339
	FieldWindowEnd      = "window_end"             // holds: no departure before this instant, RFC 3339
	// FieldShared: holds in a fleet (a shared store): when the hold was in the store, RFC 3339. The
	// fleet's other processes read it from there: a departure they admitted between window_start and
	// this instant had not seen it yet (the pacer's own process had, from window_start).
	FieldShared   = "shared"
	FieldUntil    = "until"    // rate_limit_applied setting an interval: when that interval ends (the quota's reset), RFC 3339
	FieldAdmitted = "admitted" // departures: when the pacer let the request go, RFC 3339 (the event's timestamp is when it reached the wire)

	// fleet_member: a fleet member's figures (ext.FleetStats), counted from its Queue's creation.
	FieldFleetMember    = "fleet_member"     // the member's name in the frontier
	FieldFleetHeld      = "fleet_held"       // hosts it leased when the event was written
	FieldFleetShare     = "fleet_share"      // its share of the fleet's hosts with work, at its last heartbeat
	FieldFleetLeased    = "fleet_leased"     // leases it won
	FieldFleetStolen    = "fleet_stolen"     // hosts it gave up, holding more than its share
	FieldFleetTakenOver = "fleet_taken_over" // hosts it took over from a member whose lease ran out
	FieldFleetResent    = "fleet_resent"     // requests handed to it again after a lease ran out
	FieldFleetLost      = "fleet_lost"       // leases it lost (fleet_lease_lost)
	// FieldFleetGivenBack: fleet_lease_lost: the requests the member had taken from the frontier and not
	// sent, which went back to it for the host's next holder.
	FieldFleetGivenBack = "fleet_given_back"
)

// FleetStats are a fleet member's figures (an ext.Queue on a fleet's frontier), as the fleet_member
// event's fleet_* fields and pacemetrics' collypace_fleet_* metrics give them. The counts are since the
// Queue was made.
type FleetStats struct {
	Member    string // the member's name in the frontier (random, one per Queue): fleet_member
	Held      int    // hosts it leases now: fleet_held
	Share     int    // its share of the fleet's hosts with work, at its last heartbeat (0: none yet): fleet_share
	Leased    int64  // leases it won: fleet_leased
	Stolen    int64  // hosts it gave up at a heartbeat because it held more than its share: fleet_stolen
	TakenOver int64  // hosts it leased whose previous lease ran out unrenewed (a member died): fleet_taken_over
	Resent    int64  // requests handed to it again after a lease ran out (perhaps sent by the dead member): fleet_resent
	Lost      int64  // leases it lost, not given up (fleet_lease_lost): fleet_lost
}

// BreakerState is the state of a host's circuit breaker (ext's HostSnapshot.Breaker, its Observer's
// BreakerChanged). Its values are stored: a new version adds, it never renumbers.
type BreakerState int

// Breaker states: closed sends requests, open defers them, half-open lets one probe through while
// the others wait for its outcome.
const (
	BreakerClosed BreakerState = iota
	BreakerOpen
	BreakerHalfOpen
)

// String returns the state's name: closed, open or half-open ("unknown" for any other value).
func (s BreakerState) String() string {
	switch s {
	case BreakerClosed:
		return "closed"
	case BreakerOpen:
		return "open"
	case BreakerHalfOpen:
		return "half-open"
	}
	return "unknown"
}

// NoiseVerdict is a host's capacity model's verdict on its refusals (the README's "Refusals that speed
// does not cause"): ext's HostSnapshot.Noise, and stored with the host so that a restart and a fleet's
// other processes share it. It only moves forward. Its values are stored: a new version adds, it never
// renumbers.
type NoiseVerdict uint8

const (
	// NoiseUndecided: refusals are a rate signal (nothing else was seen).
	NoiseUndecided NoiseVerdict = iota
	// NoiseSeen: the host refused as often at a slower pace: its refusals no longer move the delay
	// (refusals_uncorrelated).
	NoiseSeen
	// NoiseRefuted: the host was read as noisy, then refused clearly more often than that noise: its
	// refusals depend on the pace, for good (refusals_correlated).
	NoiseRefuted
)

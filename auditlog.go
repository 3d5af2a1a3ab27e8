package ext

import (
	"net/url"
	"regexp"
	"strings"
	"time"

	"github.com/rs/zerolog"
)

// Audit event names: the value of the "event" field. They are part of the stable schema.
const (
	EventDelayApplied        = "delay_applied"          // a request departed after the computed interval
	EventDelayIncreased      = "delay_increased"        // the adaptive delay grew (refusal or latency)
	EventDelayDecreased      = "delay_decreased"        // the adaptive delay gave capacity back
	EventRetryAfterHonoured  = "retry_after_honoured"   // no departure to the host before the window ends
	EventRetryAfterNow       = "retry_after_now"        // a Retry-After of 0 or a past date: no hold, the backoff only
	EventCrawlDelayApplied   = "crawl_delay_applied"    // a robots.txt Crawl-delay became part of the interval
	EventRateLimitApplied    = "rate_limit_applied"     // rate-limit headers set the interval or a hold
	EventHeaderInvalid       = "header_invalid"         // a Retry-After or rate-limit field was ignored
	EventRobotsInvalid       = "robots_invalid"         // part of robots.txt was not taken as published
	EventRobotsUnavailable   = "robots_unavailable"     // robots.txt could not be read (5xx, network): retried later
	EventRetryScheduled      = "retry_scheduled"        // a refused request will be sent again after the window
	EventRetriesExhausted    = "retries_exhausted"      // a refused request reached the retry limit
	EventRetryDuplicate      = "retry_duplicate"        // an OnError callback retried a request the pacer retries: the copy was dropped
	EventPacingBypassed      = "pacing_bypassed"        // requests reach the network without the pacer's transport
	EventLimitRuleStacked    = "limit_rule_stacked"     // a LimitRule Delay adds latency + delay on top of pacing
	EventDepartureAbandoned  = "departure_abandoned"    // a wait ended by cancellation or a deadline
	EventRetryAfterTooLong   = "retry_after_too_long"   // a Retry-After above the maximum: backoff applied instead
	EventCrawlDelayClamped   = "crawl_delay_clamped"    // a Crawl-delay above the maximum was clamped
	EventRedirectHopTimedOut = "redirect_hop_timed_out" // a redirect hop's wait reached its request's deadline: retried
	EventBreakerOpened       = "breaker_opened"         // the host is parked: its requests are deferred
	EventBreakerHalfOpen     = "breaker_half_open"      // the cool-down is over: one probe goes out
	EventBreakerClosed       = "breaker_closed"         // the probe succeeded: the host is crawled again
	EventRequestDeferred     = "request_deferred"       // a request to a parked host was stored, not sent
	EventDeferredDrained     = "deferred_drained"       // deferred requests were handed back to a collector
	EventStateRepaired       = "state_repaired"         // a stored value could not be trusted and was fixed
	EventStateCorrupt        = "state_corrupt"          // a stored row could not be decoded: the host starts afresh
	EventStoreUnavailable    = "store_unavailable"      // the store failed: pacing continues locally
	EventStoreRecovered      = "store_recovered"        // the store answers again
	EventOptionInvalid       = "option_invalid"         // an option value was set aside at construction: the default is used
)

// Audit field keys: the stable schema of every event.
const (
	FieldTimestamp      = "timestamp"
	FieldPipelineID     = "pipeline_id"
	FieldTargetDomain   = "target_domain"
	FieldEvent          = "event"
	FieldTrigger        = "trigger"
	FieldBaseDelayMS    = "base_delay_ms"
	FieldComputedDelay  = "computed_delay_ms"
	FieldJitterMS       = "jitter_ms"
	FieldComplianceFlag = "compliance_flag"
	FieldStatusCode     = "status_code"
	FieldDetail         = "detail"
	// Added in schema 2 (every field above keeps its meaning; readers ignore fields they do not know).
	FieldSchema         = "schema"                 // the schema version, AuditSchema
	FieldURL            = "url"                    // the request (departures, refusals, retries, deferrals): no userinfo, query only with WithAuditQuery
	FieldWaitMS         = "wait_ms"                // departures: how long this request waited in the pacer
	FieldIntervalMS     = "interval_ms"            // departures: the interval in force, jitter excluded
	FieldCrawlDelayMS   = "crawl_delay_ms"         // departures: the robots.txt Crawl-delay in force (0: none)
	FieldRateIntervalMS = "rate_limit_interval_ms" // departures: the interval the rate-limit headers imply (0: none)
	FieldWindowStart    = "window_start"           // holds (retry_after_honoured, rate_limit_applied): when it was learned, RFC 3339
	FieldWindowEnd      = "window_end"             // holds: no departure before this instant, RFC 3339
)

// AuditSchema is the version of the audit schema written in every event's "schema" field.
const AuditSchema = 2

// Outcome triggers: what caused an event, beside the interval triggers of delay.go.
const (
	TriggerDeparture      = "departure"
	TriggerRefusal        = "refusal"
	TriggerServerError    = "server_error"
	TriggerTransportError = "transport_error"
	TriggerLatency        = "latency"
	TriggerClean          = "clean"
	TriggerRobots         = "robots"
	TriggerTransport      = "transport"
	TriggerLimitRule      = "limit_rule"
	TriggerCancel         = "cancel"
	TriggerBreaker        = "breaker"
	TriggerStore          = "store"
	TriggerOption         = "option"
)

// auditEvent is one line of the audit trail.
type auditEvent struct {
	at        time.Time
	host      string
	event     string
	trigger   string
	base      time.Duration
	computed  time.Duration
	jitter    time.Duration
	compliant bool
	status    int
	detail    string

	url          string        // the request, already redacted (auditURL)
	wait         time.Duration // departures: time spent waiting in the pacer
	interval     time.Duration // departures: the interval in force
	crawlDelay   time.Duration // departures: the Crawl-delay in force
	rateInterval time.Duration // departures: the rate-limit interval in force
	windowStart  time.Time     // holds: when the window was learned
	windowEnd    time.Time     // holds: when it ends
	departure    bool          // a departure event: the departure fields are written, even when 0
}

// auditLog writes audit events through a zerolog.Logger without touching zerolog's globals.
type auditLog struct {
	logger     zerolog.Logger
	pipelineID string
}

// emit writes e at the given level. A disabled level or a silent Logger costs a nil check.
func (a *auditLog) emit(level zerolog.Level, e auditEvent) {
	ev := a.logger.WithLevel(level)
	if ev == nil {
		return
	}
	ev.Str(FieldTimestamp, e.at.UTC().Format(time.RFC3339Nano)).
		Str(FieldPipelineID, a.pipelineID).
		Str(FieldTargetDomain, e.host).
		Str(FieldEvent, e.event).
		Str(FieldTrigger, e.trigger).
		Int64(FieldBaseDelayMS, e.base.Milliseconds()).
		Int64(FieldComputedDelay, e.computed.Milliseconds()).
		Int64(FieldJitterMS, e.jitter.Milliseconds()).
		Bool(FieldComplianceFlag, e.compliant).
		Int(FieldStatusCode, e.status).
		Int(FieldSchema, AuditSchema)
	if e.detail != "" {
		ev.Str(FieldDetail, stripUserinfo(e.detail))
	}
	if e.url != "" {
		ev.Str(FieldURL, e.url)
	}
	if e.departure {
		ev.Int64(FieldWaitMS, e.wait.Milliseconds()).
			Int64(FieldIntervalMS, e.interval.Milliseconds()).
			Int64(FieldCrawlDelayMS, e.crawlDelay.Milliseconds()).
			Int64(FieldRateIntervalMS, e.rateInterval.Milliseconds())
	}
	if !e.windowEnd.IsZero() {
		ev.Str(FieldWindowStart, e.windowStart.UTC().Format(time.RFC3339Nano)).
			Str(FieldWindowEnd, e.windowEnd.UTC().Format(time.RFC3339Nano))
	}
	ev.Send()
}

// userinfoInText matches the userinfo of URLs quoted in free text: error messages quote URLs whole
// (url.Parse's do), and url.URL.Redacted and http.Client's errors keep the user name.
var userinfoInText = regexp.MustCompile(`([A-Za-z][A-Za-z0-9+.-]*://)[^/?#\s"'@]*@`)

// stripUserinfo drops URL userinfo from any text before it is logged.
func stripUserinfo(s string) string {
	if !strings.Contains(s, "@") {
		return s
	}
	return userinfoInText.ReplaceAllString(s, "$1")
}

// auditURL is how a request's URL appears in the audit trail: no userinfo, no fragment, and no query
// unless WithAuditQuery asked for it (queries carry session IDs and tokens).
func (p *Pacer) auditURL(u *url.URL) string {
	if u == nil {
		return ""
	}
	c := *u
	c.User, c.Fragment, c.RawFragment = nil, "", ""
	if !p.cfg.auditQuery {
		c.RawQuery, c.ForceQuery = "", false
	}
	return c.String()
}

// redactURL drops userinfo from a URL before it is logged.
func redactURL(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return "(unparseable URL)"
	}
	u.User = nil
	return u.String()
}

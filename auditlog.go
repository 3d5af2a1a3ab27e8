package ext

import (
	"net/url"
	"regexp"
	"strings"
	"time"

	"github.com/collypace/ext/audit"
	"github.com/rs/zerolog"
)

// auditEvent is one line of the audit trail.
type auditEvent struct {
	at        time.Time
	host      string
	event     audit.Event
	trigger   audit.Trigger
	base      time.Duration
	computed  time.Duration
	jitter    time.Duration
	compliant bool
	status    int
	detail    string

	url          *url.URL      // the request, redacted only when the event is written (redactURL)
	admitted     time.Time     // departures: when the pacer let it go (at is when it reached the wire)
	wait         time.Duration // departures: time spent waiting in the pacer
	interval     time.Duration // departures: the interval in force
	crawlDelay   time.Duration // departures: the Crawl-delay in force
	rateInterval time.Duration // departures: the rate-limit interval in force
	windowStart  time.Time     // holds: when the window was learned
	windowEnd    time.Time     // holds: when it ends
	shared       time.Time     // holds in a fleet: when the hold was in the shared store
	until        time.Time     // a rate-limit interval: when it ends
	departure    bool          // a departure event: the departure fields are written, even when 0
	fleet        *fleetFigures // fleet_member: the member's figures
	givenBack    int           // fleet_lease_lost: the requests given back to the frontier
}

// auditLog writes audit events through a zerolog.Logger without touching zerolog's globals.
type auditLog struct {
	logger     zerolog.Logger
	pipelineID string
	auditQuery bool // URLs keep their query (WithAuditQuery)
}

// off reports that nothing at level is written: an event need not even be built.
func (a *auditLog) off(level zerolog.Level) bool {
	return level < a.logger.GetLevel() || level < zerolog.GlobalLevel()
}

// emit writes e at the given level. A disabled level or a silent Logger costs a nil check.
func (a *auditLog) emit(level zerolog.Level, e auditEvent) {
	ev := a.logger.WithLevel(level)
	if ev == nil {
		return
	}
	ev.Str(audit.FieldTimestamp, e.at.UTC().Format(time.RFC3339Nano)).
		Str(audit.FieldPipelineID, a.pipelineID).
		Str(audit.FieldTargetDomain, e.host).
		Str(audit.FieldEvent, string(e.event)).
		Str(audit.FieldTrigger, string(e.trigger)).
		Int64(audit.FieldBaseDelayMS, e.base.Milliseconds()).
		Int64(audit.FieldComputedDelay, e.computed.Milliseconds()).
		Int64(audit.FieldJitterMS, e.jitter.Milliseconds()).
		Bool(audit.FieldComplianceFlag, e.compliant).
		Int(audit.FieldStatusCode, e.status).
		Int(audit.FieldSchema, audit.Schema)
	if e.detail != "" {
		ev.Str(audit.FieldDetail, stripUserinfo(e.detail))
	}
	if e.url != nil {
		ev.Str(audit.FieldURL, redactURL(e.url, a.auditQuery))
	}
	if e.departure {
		ev.Str(audit.FieldAdmitted, e.admitted.UTC().Format(time.RFC3339Nano)).
			Int64(audit.FieldWaitMS, e.wait.Milliseconds()).
			Int64(audit.FieldIntervalMS, e.interval.Milliseconds()).
			Int64(audit.FieldCrawlDelayMS, e.crawlDelay.Milliseconds()).
			Int64(audit.FieldRateIntervalMS, e.rateInterval.Milliseconds())
	}
	if !e.windowEnd.IsZero() {
		ev.Str(audit.FieldWindowStart, e.windowStart.UTC().Format(time.RFC3339Nano)).
			Str(audit.FieldWindowEnd, e.windowEnd.UTC().Format(time.RFC3339Nano))
		if !e.shared.IsZero() {
			ev.Str(audit.FieldShared, e.shared.UTC().Format(time.RFC3339Nano))
		}
	}
	if !e.until.IsZero() {
		ev.Str(audit.FieldUntil, e.until.UTC().Format(time.RFC3339Nano))
	}
	if f := e.fleet; f != nil {
		ev.Str(audit.FieldFleetMember, f.Member).Int(audit.FieldFleetHeld, f.Held).Int(audit.FieldFleetShare, f.Share).
			Int64(audit.FieldFleetLeased, f.Leased).Int64(audit.FieldFleetStolen, f.Stolen).
			Int64(audit.FieldFleetTakenOver, f.TakenOver).Int64(audit.FieldFleetResent, f.Resent).Int64(audit.FieldFleetLost, f.Lost)
	}
	if e.event == audit.EventFleetLeaseLost {
		ev.Int(audit.FieldFleetGivenBack, e.givenBack)
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

// redactURL is how a request's URL appears in the audit trail: no userinfo, no fragment, and no query
// unless query (WithAuditQuery) asks for it (queries carry session IDs and tokens). Events carry the
// *url.URL and emit formats it, only when the event is written: a silent audit log formats nothing.
func redactURL(u *url.URL, query bool) string {
	if u == nil {
		return ""
	}
	c := *u
	c.User, c.Fragment, c.RawFragment = nil, "", ""
	if !query {
		c.RawQuery, c.ForceQuery = "", false
	}
	return c.String()
}

// auditRawURL is redactURL for a URL kept as a string (a deferred or queued request).
func (p *Pacer) auditRawURL(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return "(unparseable URL)"
	}
	return redactURL(u, p.cfg.auditQuery)
}

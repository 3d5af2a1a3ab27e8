package ext

import (
	"testing"
	"time"

	"github.com/rs/zerolog"
)

// Every audit event carries the ten schema fields with their JSON types.
func TestAuditSchema(t *testing.T) {
	var buf auditBuf
	p := NewPacer(WithBaseDelay(time.Second), WithLogger(zerolog.New(&buf)), WithPipelineID("nightly"))
	res := p.ReserveAt("shop.example:8443", t0)
	p.auditDeparture(&flight{h: p.host("shop.example:8443"), res: res, url: "https://shop.example:8443/x"}, t0)
	p.ObserveAt(res, Outcome{Status: 429, Header: header("Retry-After", "7")}, t0)
	evs := events(t, &buf)
	if len(evs) < 3 {
		t.Fatalf("got %d events, want delay_applied, retry_after_honoured, delay_increased", len(evs))
	}
	for _, e := range evs {
		for _, k := range []string{FieldTimestamp, FieldPipelineID, FieldTargetDomain, FieldEvent, FieldTrigger} {
			if _, ok := e[k].(string); !ok {
				t.Errorf("%v: field %s missing or not a string", e[FieldEvent], k)
			}
		}
		for _, k := range []string{FieldBaseDelayMS, FieldComputedDelay, FieldJitterMS, FieldStatusCode} {
			if _, ok := e[k].(float64); !ok {
				t.Errorf("%v: field %s missing or not a number", e[FieldEvent], k)
			}
		}
		if _, ok := e[FieldComplianceFlag].(bool); !ok {
			t.Errorf("%v: compliance_flag missing or not a bool", e[FieldEvent])
		}
		if e[FieldPipelineID] != "nightly" || e[FieldTargetDomain] != "shop.example:8443" {
			t.Errorf("%v: pipeline/domain = %v/%v", e[FieldEvent], e[FieldPipelineID], e[FieldTargetDomain])
		}
	}
	ra := findEvent(t, &buf, EventRetryAfterHonoured)
	if ra == nil || ra[FieldComputedDelay] != 7700.0 || ra[FieldStatusCode] != 429.0 {
		t.Errorf("retry_after_honoured = %v, want computed_delay_ms 7700 and status_code 429", ra)
	}
	if ts, _ := ra[FieldTimestamp].(string); ts != "2026-12-02T12:00:00Z" {
		t.Errorf("timestamp = %q, want the event's time in RFC 3339 UTC", ts)
	}
}

// The zero Logger is silent and installing a pacer leaves zerolog's globals alone.
func TestZeroLoggerSilentAndGlobalsUntouched(t *testing.T) {
	level, field := zerolog.GlobalLevel(), zerolog.TimestampFieldName
	p := NewPacer(WithLogger(zerolog.Logger{}))
	p.ObserveAt(p.ReserveAt("h", t0), Outcome{Status: 503, Header: header("Retry-After", "garbage")}, t0)
	if zerolog.GlobalLevel() != level || zerolog.TimestampFieldName != field {
		t.Error("the pacer changed zerolog's globals")
	}
}

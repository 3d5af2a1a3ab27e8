package ext

import (
	"io"
	"net/url"
	"testing"
	"time"

	"github.com/collypace/ext/audit"
	"github.com/rs/zerolog"
)

// Every audit event carries the ten schema fields with their JSON types.
func TestAuditSchema(t *testing.T) {
	var buf auditBuf
	p := NewPacer(WithBaseDelay(time.Second), WithLogger(zerolog.New(&buf)), WithPipelineID("nightly"))
	res := p.ReserveAt("shop.example:8443", t0)
	res.url = &url.URL{Scheme: "https", Host: "shop.example:8443", Path: "/x"}
	p.auditDeparture(&flight{res: res}, t0)
	p.ObserveAt(res, Outcome{Status: 429, Header: header("Retry-After", "7")}, t0)
	evs := events(t, &buf)
	if len(evs) < 3 {
		t.Fatalf("got %d events, want delay_applied, retry_after_honoured, delay_increased", len(evs))
	}
	for _, e := range evs {
		for _, k := range []string{audit.FieldTimestamp, audit.FieldPipelineID, audit.FieldTargetDomain, audit.FieldEvent, audit.FieldTrigger} {
			if _, ok := e[k].(string); !ok {
				t.Errorf("%v: field %s missing or not a string", e[audit.FieldEvent], k)
			}
		}
		for _, k := range []string{audit.FieldBaseDelayMS, audit.FieldComputedDelay, audit.FieldJitterMS, audit.FieldStatusCode} {
			if _, ok := e[k].(float64); !ok {
				t.Errorf("%v: field %s missing or not a number", e[audit.FieldEvent], k)
			}
		}
		if _, ok := e[audit.FieldComplianceFlag].(bool); !ok {
			t.Errorf("%v: compliance_flag missing or not a bool", e[audit.FieldEvent])
		}
		if e[audit.FieldPipelineID] != "nightly" || e[audit.FieldTargetDomain] != "shop.example:8443" {
			t.Errorf("%v: pipeline/domain = %v/%v", e[audit.FieldEvent], e[audit.FieldPipelineID], e[audit.FieldTargetDomain])
		}
	}
	ra := findEvent(t, &buf, audit.EventRetryAfterHonoured)
	if ra == nil || ra[audit.FieldComputedDelay] != 7700.0 || ra[audit.FieldStatusCode] != 429.0 {
		t.Errorf("retry_after_honoured = %v, want computed_delay_ms 7700 and status_code 429", ra)
	}
	if ts, _ := ra[audit.FieldTimestamp].(string); ts != "2026-12-02T12:00:00Z" {
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

// A departure's event is not even built when its level is not written: off says so for the
// logger's level and a silent logger, and not otherwise.
func TestAuditOffFollowsLevels(t *testing.T) {
	warn := auditLog{logger: zerolog.New(io.Discard).Level(zerolog.WarnLevel)}
	if !warn.off(zerolog.InfoLevel) || warn.off(zerolog.WarnLevel) {
		t.Errorf("a Warn logger: Info off %v, Warn off %v; want true, false", warn.off(zerolog.InfoLevel), warn.off(zerolog.WarnLevel))
	}
	if nop := (auditLog{logger: zerolog.Nop()}); !nop.off(zerolog.ErrorLevel) {
		t.Error("a silent logger is not off")
	}
}

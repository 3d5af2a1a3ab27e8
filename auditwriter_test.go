package ext

import (
	"bytes"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/collypace/ext/audit"
)

// A failing audit writer (a file opened read-only) does not go unnoticed: its first failed write raises
// an alert, the next ones of the run do not, and Close returns the count of events lost and the cause. A
// writer that works raises nothing.
func TestFailingAuditWriterRaisesAnAlert(t *testing.T) {
	path := filepath.Join(t.TempDir(), "audit.jsonl")
	if err := os.WriteFile(path, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	readOnly, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer readOnly.Close()
	var good bytes.Buffer
	t0 := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	for _, tc := range []struct {
		name   string
		opt    Option
		failed bool
	}{
		{"read-only file", WithAuditWriter(readOnly), true},
		{"working writer", WithAuditWriter(&good), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var alerts []Alert
			p := NewPacer(tc.opt, WithoutRobots(), WithAlert(func(a Alert) { alerts = append(alerts, a) }))
			p.now = func() time.Time { return t0 }
			for range 2 { // two refusals: two delay_increased events
				p.ObserveAt(p.ReserveAt("h.test", t0), Outcome{Status: 503}, t0)
			}
			err := p.Close()
			var pathErr *fs.PathError
			switch {
			case !tc.failed && (err != nil || len(alerts) != 0 || good.Len() == 0):
				t.Errorf("Close %v, alerts %v, %d bytes written; want nil, none, the events", err, alerts, good.Len())
			case !tc.failed:
			case len(alerts) != 1 || alerts[0].Event != audit.EventAuditWriteFailed || !alerts[0].At.Equal(t0):
				t.Errorf("alerts %+v, want one audit_write_failed at %v", alerts, t0)
			case !errors.As(err, &pathErr) || !bytes.Contains([]byte(err.Error()), []byte("2 event(s) not written")):
				t.Errorf("Close = %v, want the 2 events lost and the file's error", err)
			}
		})
	}
}

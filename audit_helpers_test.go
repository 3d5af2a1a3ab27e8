package ext

import (
	"bufio"
	"bytes"
	"encoding/json"
	"sync"
	"testing"

	"github.com/collypace/ext/audit"
)

// auditBuf collects audit lines from concurrent goroutines.
type auditBuf struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *auditBuf) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *auditBuf) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// events parses an audit buffer into JSON objects.
func events(t *testing.T, buf *auditBuf) []map[string]any {
	t.Helper()
	var out []map[string]any
	sc := bufio.NewScanner(bytes.NewReader([]byte(buf.String())))
	for sc.Scan() {
		var m map[string]any
		if err := json.Unmarshal(sc.Bytes(), &m); err != nil {
			t.Fatalf("audit line is not JSON: %q: %v", sc.Text(), err)
		}
		out = append(out, m)
	}
	return out
}

// findEvent returns the first audit event named name, or nil.
func findEvent(t *testing.T, buf *auditBuf, name audit.Event) map[string]any {
	t.Helper()
	for _, e := range events(t, buf) {
		if e[audit.FieldEvent] == string(name) {
			return e
		}
	}
	return nil
}

// lastEvent returns the last audit event named name, or nil.
func lastEvent(t *testing.T, buf *auditBuf, name audit.Event) map[string]any {
	t.Helper()
	var last map[string]any
	for _, e := range events(t, buf) {
		if e[audit.FieldEvent] == string(name) {
			last = e
		}
	}
	return last
}

package ext

import (
	"bufio"
	"bytes"
	"encoding/json"
	"testing"
)

// events parses an audit buffer into JSON objects.
func events(t *testing.T, buf *bytes.Buffer) []map[string]any {
	t.Helper()
	var out []map[string]any
	sc := bufio.NewScanner(bytes.NewReader(buf.Bytes()))
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
func findEvent(t *testing.T, buf *bytes.Buffer, name string) map[string]any {
	t.Helper()
	for _, e := range events(t, buf) {
		if e[FieldEvent] == name {
			return e
		}
	}
	return nil
}

// lastEvent returns the last audit event named name, or nil.
func lastEvent(t *testing.T, buf *bytes.Buffer, name string) map[string]any {
	t.Helper()
	var last map[string]any
	for _, e := range events(t, buf) {
		if e[FieldEvent] == name {
			last = e
		}
	}
	return last
}

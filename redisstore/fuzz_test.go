package redisstore_test

import (
	"errors"
	"maps"
	"slices"
	"strings"
	"testing"

	"github.com/collypace/ext"
	"github.com/collypace/ext/redisstore"
	"github.com/collypace/ext/storetest"
)

// FuzzDecodeHostHash decodes arbitrary host hashes, given as "field=value" lines: decoding never
// panics, fails only with ErrCorruptState, and what it decodes encodes and decodes to itself.
func FuzzDecodeHostHash(f *testing.F) {
	f.Add(hashText(redisstore.EncodeHostHash(storetest.Sample("seed.test"))))
	f.Add("next_departure=1796212800000000000")
	f.Fuzz(func(t *testing.T, text string) {
		m := map[string]string{}
		for line := range strings.Lines(text) {
			k, v, _ := strings.Cut(strings.TrimSuffix(line, "\n"), "=")
			m[k] = v
		}
		st, ok, err := redisstore.DecodeHostHash("fuzz.test", m)
		if err != nil {
			if ok || !errors.Is(err, ext.ErrCorruptState) || !strings.HasPrefix(err.Error(), "redisstore: ") {
				t.Fatalf("decode error %v (ok %v), want a redisstore: error wrapping ErrCorruptState", err, ok)
			}
			return
		}
		if !ok {
			return
		}
		again, ok, err := redisstore.DecodeHostHash("fuzz.test", redisstore.EncodeHostHash(st))
		if !ok || err != nil {
			t.Fatalf("re-decoding %+v: ok %v, err %v", st, ok, err)
		}
		if d := storetest.Diff(again, st); d != "" {
			t.Fatalf("re-decoding %+v: %s", st, d)
		}
	})
}

func hashText(m map[string]string) string {
	var b strings.Builder
	for _, k := range slices.Sorted(maps.Keys(m)) {
		b.WriteString(k + "=" + m[k] + "\n")
	}
	return b.String()
}

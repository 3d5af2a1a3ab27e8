package duration

import (
	"math"
	"testing"
	"time"
)

func TestSaturatingArithmetic(t *testing.T) {
	for _, tt := range []struct {
		name string
		got  time.Duration
		want time.Duration
	}{
		{"add", Add(time.Second, time.Second), 2 * time.Second},
		{"add overflows up", Add(Max, 1), Max},
		{"add overflows down", Add(Min, -1), Min},
		{"add mixed signs", Add(Max, Min), -1},
		{"mul", Mul(time.Second, 2.5), 2500 * time.Millisecond},
		{"mul overflows up", Mul(Max, 2), Max},
		{"mul by the largest float", Mul(time.Second, math.MaxFloat64), Max},
		{"mul overflows down", Mul(Max, -2), Min},
		{"mul by infinity", Mul(time.Second, math.Inf(1)), Max},
		{"mul NaN", Mul(time.Second, math.NaN()), 0},
		{"mul zero by infinity", Mul(0, math.Inf(1)), 0},
	} {
		if tt.got != tt.want {
			t.Errorf("%s: got %v, want %v", tt.name, tt.got, tt.want)
		}
	}
}

package pacemetrics_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/collypace/ext"
	"github.com/collypace/ext/pacemetrics"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

// TestTopHostsInvalidValue: WithTopHosts follows the invalid-value rule (README "Invalid
// values"). A negative n is an error wrapping ext.ErrInvalidOption from NewErr; New uses the default
// (50 hosts with series of their own) and exports collypace_option_invalid{option="WithTopHosts"} 1.
// 0 is valid: every host under "other", and no invalid option exported.
func TestTopHostsInvalidValue(t *testing.T) {
	if m, err := pacemetrics.NewErr(pacemetrics.WithTopHosts(-1)); !errors.Is(err, ext.ErrInvalidOption) || m != nil ||
		!strings.Contains(err.Error(), "WithTopHosts(-1)") {
		t.Errorf("NewErr(WithTopHosts(-1)) = %v, %v; want no collector and an error naming WithTopHosts(-1), wrapping ErrInvalidOption", m, err)
	}

	m := pacemetrics.New(pacemetrics.WithTopHosts(-1))
	m.Departed("a.test", 0)
	m.Departed("b.test", 0)
	const invalid = `
# HELP collypace_option_invalid 1 for each option of New whose value was invalid: its default is used instead.
# TYPE collypace_option_invalid gauge
collypace_option_invalid{option="WithTopHosts"} 1
`
	if err := testutil.CollectAndCompare(m, strings.NewReader(invalid), "collypace_option_invalid"); err != nil {
		t.Error(err)
	}
	const defaultTop = `
# HELP collypace_departures_total Requests that departed to the host.
# TYPE collypace_departures_total counter
collypace_departures_total{host="a.test"} 1
collypace_departures_total{host="b.test"} 1
collypace_departures_total{host="other"} 0
`
	if err := testutil.CollectAndCompare(m, strings.NewReader(defaultTop), "collypace_departures_total"); err != nil {
		t.Errorf("New(WithTopHosts(-1)) should keep the default of %d places: %v", pacemetrics.DefaultTopHosts, err)
	}

	zero, err := pacemetrics.NewErr(pacemetrics.WithTopHosts(0))
	if err != nil {
		t.Fatalf("NewErr(WithTopHosts(0)): %v", err)
	}
	zero.Departed("a.test", 0)
	if n := testutil.CollectAndCount(zero, "collypace_option_invalid"); n != 0 {
		t.Errorf("WithTopHosts(0): %d collypace_option_invalid series, want none", n)
	}
	const allOther = `
# HELP collypace_departures_total Requests that departed to the host.
# TYPE collypace_departures_total counter
collypace_departures_total{host="other"} 1
`
	if err := testutil.CollectAndCompare(zero, strings.NewReader(allOther), "collypace_departures_total"); err != nil {
		t.Error(err)
	}
}

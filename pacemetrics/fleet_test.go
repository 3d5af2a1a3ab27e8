package pacemetrics_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/collypace/ext/audit"
	"github.com/collypace/ext/pacemetrics"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

var fleetNames = []string{"collypace_fleet_hosts_held", "collypace_fleet_share", "collypace_fleet_leases_total",
	"collypace_fleet_hosts_stolen_total", "collypace_fleet_hosts_taken_over_total", "collypace_fleet_requests_resent_total"}

// Issue 27, item 4: a fleet member's figures, as its Queue tells them (the latest), labelled by
// member; none before any member told.
func TestFleetMemberFigures(t *testing.T) {
	m := pacemetrics.New()
	if n := testutil.CollectAndCount(m, fleetNames...); n != 0 {
		t.Errorf("%d fleet series before any member told its figures, want none", n)
	}
	m.FleetChanged(audit.FleetStats{Member: "m1", Held: 1, Leased: 1})
	m.FleetChanged(audit.FleetStats{Member: "m1", Held: 3, Share: 4, Leased: 9, Stolen: 2, TakenOver: 5, Resent: 1})
	want := `
# HELP collypace_fleet_hosts_held Hosts the fleet member leases now.
# TYPE collypace_fleet_hosts_held gauge
collypace_fleet_hosts_held{member="m1"} 3
# HELP collypace_fleet_share The member's share of the fleet's hosts with work (the hosts over the live members), at its last heartbeat.
# TYPE collypace_fleet_share gauge
collypace_fleet_share{member="m1"} 4
# HELP collypace_fleet_leases_total Host leases the member won.
# TYPE collypace_fleet_leases_total counter
collypace_fleet_leases_total{member="m1"} 9
# HELP collypace_fleet_hosts_stolen_total Hosts the member gave up at a heartbeat, holding more than its share, for members under theirs.
# TYPE collypace_fleet_hosts_stolen_total counter
collypace_fleet_hosts_stolen_total{member="m1"} 2
# HELP collypace_fleet_hosts_taken_over_total Hosts the member leased whose previous lease ran out unrenewed (their member died).
# TYPE collypace_fleet_hosts_taken_over_total counter
collypace_fleet_hosts_taken_over_total{member="m1"} 5
# HELP collypace_fleet_requests_resent_total Requests handed to the member again after a lease ran out (perhaps sent by the dead member).
# TYPE collypace_fleet_requests_resent_total counter
collypace_fleet_requests_resent_total{member="m1"} 1
`
	if err := testutil.CollectAndCompare(m, strings.NewReader(want), fleetNames...); err != nil {
		t.Error(err)
	}
	for i := range 40 { // Queues made one after the other: the Collector keeps the latest 16
		m.FleetChanged(audit.FleetStats{Member: fmt.Sprintf("q%d", i)})
	}
	if n := testutil.CollectAndCount(m, "collypace_fleet_hosts_held"); n != 16 {
		t.Errorf("%d members exported after 41 told, want the latest 16", n)
	}
}

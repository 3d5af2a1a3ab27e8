package pacemetrics

import (
	"maps"
	"slices"
	"sync"

	"github.com/collypace/ext/audit"
	"github.com/prometheus/client_golang/prometheus"
)

// A Queue on a fleet's frontier tells the pacer's Observer its member's figures at each heartbeat and
// when its Run ends (FleetChanged); the Collector keeps the latest of each member and exports them.

const labelMember = "member"

// maxFleetMembers bounds the members a Collector remembers: a process makes one Queue, or a few one
// after the other; the oldest figures go first.
const maxFleetMembers = 16

var (
	descFleetHeld = newDesc("fleet_hosts_held",
		"Hosts the fleet member leases now.", labelMember)
	descFleetShare = newDesc("fleet_share",
		"The member's share of the fleet's hosts with work (the hosts over the live members), at its last heartbeat.", labelMember)
	descFleetLeased = newDesc("fleet_leases_total",
		"Host leases the member won.", labelMember)
	descFleetStolen = newDesc("fleet_hosts_stolen_total",
		"Hosts the member gave up at a heartbeat, holding more than its share, for members under theirs.", labelMember)
	descFleetTakenOver = newDesc("fleet_hosts_taken_over_total",
		"Hosts the member leased whose previous lease ran out unrenewed (their member died).", labelMember)
	descFleetResent = newDesc("fleet_requests_resent_total",
		"Requests handed to the member again after a lease ran out (perhaps sent by the dead member).", labelMember)
	descFleetLost = newDesc("fleet_leases_lost_total",
		"Host leases the member lost (passed to another member or ran out: a pause, a store that did not answer), not given up.", labelMember)
)

var fleetDescs = []*prometheus.Desc{descFleetHeld, descFleetShare, descFleetLeased, descFleetStolen, descFleetTakenOver, descFleetResent, descFleetLost}

// fleetFigures are the latest figures of each member the Collector was told of.
type fleetFigures struct {
	mu      sync.Mutex // protects the fields below
	members map[string]audit.FleetStats
	order   []string // members by when first told, oldest first
}

// FleetChanged records a fleet member's figures, exported as collypace_fleet_*. ext.Queue calls it on
// the pacer's Observer at each heartbeat of a member of a fleet's frontier, and when its Run ends.
func (c *Collector) FleetChanged(st audit.FleetStats) {
	f := &c.fleet
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.members == nil {
		f.members = map[string]audit.FleetStats{}
	}
	if _, ok := f.members[st.Member]; !ok {
		f.order = append(f.order, st.Member)
		if len(f.order) > maxFleetMembers {
			delete(f.members, f.order[0])
			f.order = slices.Delete(f.order, 0, 1)
		}
	}
	f.members[st.Member] = st
}

// metrics are the members' figures as metrics.
func (f *fleetFigures) metrics() []prometheus.Metric {
	f.mu.Lock()
	members := maps.Clone(f.members)
	f.mu.Unlock()
	var out []prometheus.Metric
	for _, st := range members {
		gauge := func(d *prometheus.Desc, v float64) prometheus.Metric {
			return prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, st.Member)
		}
		counter := func(d *prometheus.Desc, v int64) prometheus.Metric {
			return prometheus.MustNewConstMetric(d, prometheus.CounterValue, float64(v), st.Member)
		}
		out = append(out, gauge(descFleetHeld, float64(st.Held)), gauge(descFleetShare, float64(st.Share)),
			counter(descFleetLeased, st.Leased), counter(descFleetStolen, st.Stolen),
			counter(descFleetTakenOver, st.TakenOver), counter(descFleetResent, st.Resent), counter(descFleetLost, st.Lost))
	}
	return out
}

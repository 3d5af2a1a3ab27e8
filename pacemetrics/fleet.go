package pacemetrics

import (
	"github.com/collypace/ext"
	"github.com/prometheus/client_golang/prometheus"
)

// FleetSource is what WatchQueue also reads at scrape time when the queue implements it: a fleet
// member's figures. *ext.Queue implements it; ok is false for a Queue that is not on a fleet's
// frontier, and then nothing is exported.
type FleetSource interface {
	FleetStats() (ext.FleetStats, bool)
}

const labelMember = "member"

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
)

var fleetDescs = []*prometheus.Desc{descFleetHeld, descFleetShare, descFleetLeased, descFleetStolen, descFleetTakenOver, descFleetResent}

// fleetMetrics are the member's figures as metrics, none when q is no fleet member.
func fleetMetrics(q QueueDepths) []prometheus.Metric {
	src, ok := q.(FleetSource)
	if !ok {
		return nil
	}
	st, ok := src.FleetStats()
	if !ok {
		return nil
	}
	gauge := func(d *prometheus.Desc, v float64) prometheus.Metric {
		return prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, st.Member)
	}
	counter := func(d *prometheus.Desc, v int64) prometheus.Metric {
		return prometheus.MustNewConstMetric(d, prometheus.CounterValue, float64(v), st.Member)
	}
	return []prometheus.Metric{
		gauge(descFleetHeld, float64(st.Held)), gauge(descFleetShare, float64(st.Share)),
		counter(descFleetLeased, st.Leased), counter(descFleetStolen, st.Stolen),
		counter(descFleetTakenOver, st.TakenOver), counter(descFleetResent, st.Resent),
	}
}

package queue

import (
	"math"

	v1 "k8s.io/api/core/v1"

	"github.com/muster-sched/muster/pkg/gang"
)

// Order compares members of two different gangs by their queues and
// gangs, as QueueSort orders them between the gangs' priority and their
// creation: the higher queue priority, then the queue least into its
// share, then the members a gang needs to start, then the lowest projected
// dominant share (DRF). qa and qb are the members' queues in the last
// snapshot (nil: not in it), pa and pb their projections. decided is false
// when they tie.
func Order(qa, qb *Figures, pa, pb Projection) (less, decided bool) {
	if qa != qb && qa != nil && qb != nil {
		if qa.Priority != qb.Priority {
			return qa.Priority > qb.Priority, true
		}
		if sa, sb := qa.Share(), qb.Share(); sa != sb {
			return sa < sb, true
		}
	}
	if pa.Start != pb.Start {
		return pa.Start, true
	}
	if pa.Share != pb.Share {
		return pa.Share < pb.Share, true
	}
	return false, false
}

// Projection is the dominant share a member's gang will have once the
// member is placed (DRF), and whether the member is one of those the gang
// still needs to start. A gang's starting members all stand at the share
// it will have when ready, so they stay together; each member beyond
// stands one more task further. The projection counts what the gang is
// allocated plus the members ahead of this one, so it does not move while
// the gang's members are placed one by one — the scheduling queue orders
// a pod once, when it is added.
type Projection struct {
	Share float64
	Start bool
	// against is the cluster's allocatable it was computed against.
	against *Vector
}

// Project is the projection of the member at pos, which needs its status.
func (s *State) Project(pos *gang.Position) Projection {
	total := s.cluster.latest.Load()
	if !pos.Pending {
		return Projection{Share: projectedShare(*total, pos.Status.Allocated, nil, 0), Start: !pos.Status.Ready(), against: total}
	}
	start := int32(pos.Rank) < pos.Need
	n := pos.Rank + 1
	if start {
		n = int(pos.Need)
	}
	return Projection{Share: projectedShare(*total, pos.Status.Allocated, pos.Requests, n), Start: start, against: total}
}

// Current reports whether p was computed against the cluster's allocatable
// as it is now: with the member's position unchanged, p still holds.
func (s *State) Current(p Projection) bool { return p.against == s.cluster.latest.Load() }

// projectedShare is the dominant share of a gang allocated allocated once
// n more pods of requests are placed: max over resources of
// (allocated + n·requests)/total; for QueueSort, total is the cluster's
// allocatable as it is now (not a snapshot's). Only the resources the
// gang holds or asks for can raise it above 0, so only those are looked at:
// fewer than the nodes have, as a rule.
func projectedShare(total Vector, allocated, requests v1.ResourceList, n int) float64 {
	share := 0.0
	ratio := func(name v1.ResourceName, a int64) {
		if t := total[name]; t > 0 {
			share = math.Max(share, float64(a)/float64(t))
		}
	}
	for name, q := range allocated {
		ratio(name, quantity(name, q)+int64(n)*quantity(name, requests[name]))
	}
	if n == 0 {
		return share
	}
	for name, q := range requests {
		if _, counted := allocated[name]; !counted {
			ratio(name, int64(n)*quantity(name, q))
		}
	}
	return share
}

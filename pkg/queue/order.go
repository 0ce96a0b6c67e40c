package queue

import (
	"math"

	v1 "k8s.io/api/core/v1"

	"github.com/muster-sched/muster/pkg/gang"
)

// Order compares members of two different gangs, at positions a and b, by
// their queues and gangs, as QueueSort orders them between the gangs'
// priority and their creation: the higher queue priority, then the queue
// least into its share, then the members a gang needs to start, then the
// lowest projected dominant share (DRF). decided is false when they tie.
// Queue figures come from the last snapshot; a and b need their statuses.
func (s *State) Order(a, b *gang.Position) (less, decided bool) {
	snap := s.Last()
	if snap == nil {
		return false, false
	}
	if qa, qb := QueueOf(a.Status), QueueOf(b.Status); qa != qb {
		fa, fb := snap.Queues[qa], snap.Queues[qb]
		if fa != nil && fb != nil {
			if fa.Priority != fb.Priority {
				return fa.Priority > fb.Priority, true
			}
			if sa, sb := fa.Share(), fb.Share(); sa != sb {
				return sa < sb, true
			}
		}
	}
	sharea, starta := s.projection(a)
	shareb, startb := s.projection(b)
	if starta != startb {
		return starta, true
	}
	if sharea != shareb {
		return sharea < shareb, true
	}
	return false, false
}

// projection is the dominant share the member's gang will have once the
// member is placed (DRF), and whether the member is one of those the gang
// still needs to start. A gang's starting members all stand at the share
// it will have when ready, so they stay together; each member beyond
// stands one more task further. The projection counts what the gang is
// allocated plus the members ahead of this one, so it does not move while
// the gang's members are placed one by one — the scheduling queue orders
// a pod once, when it is added.
func (s *State) projection(pos *gang.Position) (float64, bool) {
	if !pos.Pending {
		return s.ProjectedShare(pos.Status.Allocated, nil, 0), !pos.Status.Ready()
	}
	start := int32(pos.Rank) < pos.Need
	n := pos.Rank + 1
	if start {
		n = int(pos.Need)
	}
	return s.ProjectedShare(pos.Status.Allocated, pos.Requests, n), start
}

// ProjectedShare is the dominant share of a gang allocated allocated once
// n more pods of requests are placed: max over resources of
// (allocated + n·requests)/allocatable, against the cluster's allocatable
// as it is now (not a snapshot's), for QueueSort. Only the resources the
// gang holds or asks for can raise it above 0, so only those are looked at:
// fewer than the nodes have, as a rule.
func (s *State) ProjectedShare(allocated, requests v1.ResourceList, n int) float64 {
	total := s.cluster.latestAllocatable()
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

package gang

import (
	"sync/atomic"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
)

// What QueueSort reads of a member's gang, under one lock.

// Stamp tells whether a Position still says what the gang state would say
// now: it goes stale with the next change of the gang (members, their
// reservations, plan, failure, PodGroup).
type Stamp struct{ stale atomic.Bool }

// Current reports whether the gang has not changed since; a nil Stamp
// (a gang not known yet) never is.
func (s *Stamp) Current() bool { return s != nil && !s.stale.Load() }

// Position is what QueueSort reads of a member's gang: where the member
// stands in it, and the gang's status, plan and creation time.
type Position struct {
	// Stamp says whether the gang changed since (nil: a gang not known).
	Stamp *Stamp
	// Status is the gang's (shared: read only); nil unless asked for.
	Status *Status
	// Pending reports whether the gang state knows the member as pending;
	// Rank is then its index among the pending members, oldest first.
	// Both, with Need and Requests, only with the status.
	Pending bool
	Rank    int
	// Need is how many members are still to be placed before the gang is
	// ready: minMember − placed, at least 0.
	Need int32
	// Requests are the member's own (shared: read only).
	Requests v1.ResourceList
	// Plan is when the gang's placement plan last made progress (see
	// gang.Plan); zero without one.
	Plan time.Time
	// Created is the gang's creation time (see CreationTime).
	Created time.Time
	// Priority is the gang's priority class's value (see Spec.Priority);
	// nil when its PodGroup names none.
	Priority *int32
}

// Placing reports whether the gang's placement plan is being carried out
// at now (see Manager.Placing).
func (p *Position) Placing(now time.Time) bool {
	return !p.Plan.IsZero() && now.Sub(p.Plan) <= PlanTTL
}

// Position returns what QueueSort reads of member uid's gang; the status
// and the member's rank only withStatus (they are computed again after
// every change of the gang). The gang state is read under one lock, and
// what it returns holds while pos.Stamp is current.
func (m *Manager) Position(key Key, uid types.UID, withStatus bool) Position {
	m.mu.RLock()
	defer m.mu.RUnlock()
	g := m.groups[key]
	pos := Position{Created: m.creationTimeLocked(key, g)}
	if g != nil {
		pos.Stamp = g.stampLocked()
		if g.plan != nil {
			pos.Plan = g.plan.Progress
		}
		pos.Priority = m.classPriority(key)
	}
	if !withStatus {
		return pos
	}
	s := m.statusLocked(key, g)
	pos.Status = &s
	pos.Need = max(0, pos.Status.Spec.MinMember-pos.Status.Placed)
	if g == nil {
		return pos
	}
	ranks := g.ranks.Load()
	if ranks == nil {
		pending := g.pendingLocked()
		r := make(map[types.UID]rank, len(pending))
		for i, p := range pending {
			r[p.UID] = rank{index: i, requests: g.requests[p.UID]}
		}
		ranks = &r
		g.ranks.Store(ranks)
	}
	var r rank
	r, pos.Pending = (*ranks)[uid]
	pos.Rank, pos.Requests = r.index, r.requests
	return pos
}

// stampLocked is g's current stamp. m.mu held for reading at least:
// readers may race to make it, and all get the one that won.
func (g *group) stampLocked() *Stamp {
	if s := g.stamp.Load(); s != nil {
		return s
	}
	g.stamp.CompareAndSwap(nil, &Stamp{})
	return g.stamp.Load()
}

// rank is where a pending member stands in its gang (see Position).
type rank struct {
	index    int
	requests v1.ResourceList
}

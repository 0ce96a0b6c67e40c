package queue

import (
	"fmt"
	"math"
	"slices"

	v1 "k8s.io/api/core/v1"

	"github.com/muster-sched/muster/apis/scheduling/v1alpha1"
	"github.com/muster-sched/muster/pkg/gang"
)

// ancestry returns the queue and its ancestors, nearest first.
func (snap *Snapshot) ancestry(name string) []*Figures {
	var out []*Figures
	for cur := name; cur != ""; {
		f, ok := snap.Queues[cur]
		if !ok || slices.Contains(out, f) {
			break // a loop is reported, as Invalid, on its queues
		}
		out = append(out, f)
		if f.Invalid != "" {
			break // placed at the top
		}
		cur = f.Parent
	}
	return out
}

// Admit decides whether a valid gang may start (Volcano's enqueue): its
// queue must be an open leaf its namespace may use, and minResources + allocated + inqueue −
// elastic must fit the ceiling of the queue and every ancestor, and the
// cluster must not be committed beyond the overcommit factor. An admitted
// gang's minResources count as inqueue until it runs; it stays admitted
// until then unless a placement attempt shows it cannot fit (Release).
//
// Unlike Volcano, which admits against realCapability, the ceiling here is
// the policy's placement ceiling (deserved under proportion): a gang the
// queue cannot start now is not admitted, so work beyond a queue's share
// never sits in inqueue, where the overcommit check would count it against
// every other queue; except on room no other queue claims (see Lends).
//
// A gang of one pod is checked but not recorded as admitted: nothing of it
// counts as inqueue.
func (s *State) Admit(st *gang.Status, snap *Snapshot) (bool, string) {
	ok, why, _ := s.Decide(st, snap)
	return ok, why
}

// Decide is Admit, and also says which of a bounded set of reasons
// (Reason…) decided, for metrics: "" when the gang was admitted before
// and nothing was decided now.
func (s *State) Decide(st *gang.Status, snap *Snapshot) (ok bool, why, reason string) {
	g := snap.Gang(st.Key)
	if g == nil {
		return false, "the gang is not known to the queue accounting yet", ReasonNotAccounted
	}
	if g.Admitted {
		return true, "", ""
	}
	if ok, why, reason := s.admissible(snap, st.Key.Namespace, g.Queue, g.MinResources, false); !ok {
		return false, why, reason
	}
	if st.Spec.MinMember <= 1 && len(st.Spec.MinTaskMember) == 0 {
		// A gang of one starts with its single placement, checked against
		// the ceiling right after: holding its minimum as inqueue would
		// only keep the queue's other pods out while this one waits in
		// backoff for room.
		return true, "", ReasonFits
	}
	s.mu.Lock()
	s.admitted[st.Key] = true
	s.dirty[st.Key] = true
	s.updateFigures(st.Key, func(g *GangFigures) { g.Admitted = true })
	s.mu.Unlock()
	return true, "", ReasonFits
}

// Reasons of an admission decision: a fixed set, for metric labels.
const (
	ReasonFits            = "Fits"
	ReasonNotAccounted    = "NotAccounted"
	ReasonQueueMissing    = "QueueMissing"
	ReasonQueueInvalid    = "QueueInvalid"
	ReasonNotLeaf         = "NotLeaf"
	ReasonQueueClosed     = "QueueClosed"
	ReasonNamespaceDenied = "NamespaceDenied"
	ReasonOverCeiling     = "OverCeiling"
	ReasonOvercommit      = "Overcommit"
)

// WouldAdmit says whether a gang of that namespace and queue ("" for the
// default queue) with minimum min may be enqueued now, recording nothing:
// Volcano's enqueue of a PodGroup whose pods do not exist yet. Its queue's
// realCapability bounds it, as in Volcano, counting what the gangs
// enqueued before hold (Reserved); not its share, nor the overcommit
// bound: a queue's share counts only the pods that exist, and a job whose
// pods wait for its enqueue would never get one on a busy cluster. Its
// pods are admitted when they are tried, as any gang's, against the share,
// reclaiming for it.
func (s *State) WouldAdmit(snap *Snapshot, namespace, queue string, min Vector) (bool, string) {
	if queue == "" {
		queue = v1alpha1.DefaultQueue
	}
	ok, why, _ := s.admissible(snap, namespace, queue, min, true)
	return ok, why
}

// admissible checks what Admit requires of a gang of that namespace, queue
// and minimum; for an enqueue, against realCapability (see WouldAdmit).
func (s *State) admissible(snap *Snapshot, namespace, queue string, min Vector, enqueue bool) (bool, string, string) {
	chain := snap.ancestry(queue)
	if len(chain) == 0 {
		return false, fmt.Sprintf("queue %s does not exist", queue), ReasonQueueMissing
	}
	leaf := chain[0]
	switch {
	case leaf.Invalid != "":
		return false, fmt.Sprintf("queue %s: %s", leaf.Name, leaf.Invalid), ReasonQueueInvalid
	case !leaf.IsLeaf():
		return false, fmt.Sprintf("queue %s has child queues; gangs belong in leaf queues", leaf.Name), ReasonNotLeaf
	}
	for _, f := range chain {
		if f.Closed {
			return false, fmt.Sprintf("queue %s is closed", f.Name), ReasonQueueClosed
		}
	}
	if ok, why := snap.Permits(namespace, queue); !ok {
		return false, why, ReasonNamespaceDenied
	}
	if enqueue {
		// What it reserves is bounded by its queue alone (see WouldAdmit).
		why := overCeiling(chain, min, func(f *Figures) Vector { return f.RealCapability }, "realCapability")
		if why != "" {
			return false, why, ReasonOverCeiling
		}
		return true, "", ReasonFits
	}
	if why := overCeiling(chain, min, snap.Ceiling, snap.ceilingName()); why != "" && !snap.Lends(queue, min, nil, true) {
		return false, why, ReasonOverCeiling
	}
	if ok, r := s.overcommitted(queue, min, snap, withinDeserved(leaf, min)); !ok {
		return false, fmt.Sprintf("cluster: %s would be committed beyond %.2f × allocatable", r, s.overcommit), ReasonOvercommit
	}
	return true, "", ReasonFits
}

// overCeiling says which queue of the chain would go over its ceiling (as
// ceilingOf gives it, called name) by
// admitting a gang of minimum min: allocated + inqueue − elastic + min ≤
// ceiling, in every dimension the ceiling names (a dimension it does not
// name is unlimited); "" when none would.
func overCeiling(chain []*Figures, min Vector, ceilingOf func(*Figures) Vector, name string) string {
	for _, f := range chain {
		ceiling := ceilingOf(f)
		r := firstOver(ceiling, func(k v1.ResourceName) bool {
			c := f.Allocated[k] + f.Inqueue[k] - f.Elastic[k] + min[k]
			return c > 0 && c > ceiling[k]
		})
		if r != "" {
			return fmt.Sprintf("queue %s: %s %s allocated+inqueue of %s %s, gang needs %s", f.Name, r,
				Format(r, f.Allocated[r]+f.Inqueue[r]-f.Elastic[r]), Format(r, ceiling[r]), name, Format(r, min[r]))
		}
	}
	return ""
}

// overcommitted checks minResources + Σ inqueue ≤ factor·allocatable − used
// (+ lent, for a gang within its queue's deserved share), inqueue not
// counting what enqueued gangs reserve (Usage.Reserved), which the bound
// does not limit either. Dimensions no node offers are not limited here.
//
// lent is what other reclaimable queues hold above their deserved share
// and guarantee: reclaim gives it back to the queues that deserve it, so
// room lent out never keeps a queue from taking its own share back on a
// full cluster.
func (s *State) overcommitted(queue string, min Vector, snap *Snapshot, withinDeserved bool) (bool, v1.ResourceName) {
	var lent Vector
	if withinDeserved {
		lent = snap.lentOut(queue)
	}
	r := firstOver(min, func(k v1.ResourceName) bool {
		a, ok := snap.Allocatable[k]
		if !ok || min[k] <= 0 {
			return false
		}
		limit := int64(math.Min(s.overcommit*float64(a), math.MaxInt64/2)) - snap.Used[k] + lent[k]
		for _, f := range snap.Queues {
			if f.IsLeaf() {
				limit -= f.Inqueue[k] - f.Reserved[k]
			}
		}
		return min[k] > limit
	})
	return r == "", r
}

// Ceiling returns the most a queue may hold under the policy: deserved for
// proportion, realCapability for capacity.
func (snap *Snapshot) Ceiling(f *Figures) Vector {
	if snap.Policy == Capacity {
		return f.RealCapability
	}
	return f.Deserved
}

func (snap *Snapshot) ceilingName() string {
	if snap.Policy == Capacity {
		return "realCapability"
	}
	return "deserved"
}

// FitsCeiling reports whether the queue of a gang, and every ancestor, can
// take need more without going over its ceiling.
func (snap *Snapshot) FitsCeiling(queue string, need Vector) (bool, string) {
	for _, f := range snap.ancestry(queue) {
		// A dimension the ceiling does not name has none of it.
		ceiling := snap.Ceiling(f)
		r := firstOver(need, func(r v1.ResourceName) bool {
			return need[r] > 0 && f.Allocated[r]+need[r] > ceiling[r]
		})
		if r != "" {
			return false, fmt.Sprintf("queue %s: %s %s/%s %s, needs %s more", f.Name, r,
				Format(r, f.Allocated[r]), Format(r, ceiling[r]), snap.ceilingName(), Format(r, need[r]))
		}
	}
	return true, ""
}

// lentOut sums what the reclaimable leaf queues but q hold above their
// deserved share and their guarantee, which reclaim never goes below.
func (snap *Snapshot) lentOut(q string) Vector {
	out := Vector{}
	for name, f := range snap.Queues {
		if name == q || !f.IsLeaf() || !f.Reclaimable {
			continue
		}
		for k, a := range f.Allocated {
			if d, ok := f.Deserved[k]; ok {
				if floor := max(d, f.Guarantee[k]); a > floor {
					out[k] += a - floor
				}
			}
		}
	}
	return out
}

// withinDeserved reports whether the leaf queue f holds, with a gang of
// minimum min admitted, no more than its deserved share: allocated +
// inqueue − elastic + min ≤ deserved wherever min asks.
func withinDeserved(f *Figures, min Vector) bool {
	for k, n := range min {
		if n > 0 && f.Allocated[k]+f.Inqueue[k]-f.Elastic[k]+n > f.Deserved[k] {
			return false
		}
	}
	return true
}

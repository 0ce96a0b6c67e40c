package queuepolicy

import (
	"context"
	"slices"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"

	"github.com/muster-sched/muster/pkg/gang"
	"github.com/muster-sched/muster/pkg/placement"
	"github.com/muster-sched/muster/pkg/queue"
)

// chooseVictims adds units in order while they are allowed, until the
// gang's needed members all fit; then drops every unit the fit does not
// need. It returns no victims when the gang cannot fit at all, or fits
// without any. inFlight is what victims evicted before and still counted
// in snap take: the deletions run off the scheduling cycle. ahead is room
// claimed earlier in the cycle for other gangs of the queue: it counts
// against the queue's ceiling. nodes, when not nil, are the only nodes
// the members may go to (a topology domain).
func (pl *Plugin) chooseVictims(ctx context.Context, snap *queue.Snapshot, inFlight flight, members []*v1.Pod, units []unit, st *gang.Status, need, ahead queue.Vector, nodes sets.Set[string]) ([]unit, map[types.UID]string, error) {
	chosen, plan, err := pl.pickVictims(ctx, snap, inFlight, members, units, st, need, ahead, nodes)
	if err != nil || len(chosen) == 0 {
		return nil, nil, err
	}
	return chosen, plan, nil
}

// pickVictims is chooseVictims, except that a gang that fits once its
// chosen units are pruned to none is told apart from one that does not
// fit: it returns no units and the plan.
func (pl *Plugin) pickVictims(ctx context.Context, snap *queue.Snapshot, inFlight flight, members []*v1.Pod, units []unit, st *gang.Status, need, ahead queue.Vector, nodes sets.Set[string]) ([]unit, map[types.UID]string, error) {
	// The preemptor's dominant share once the members are placed, with
	// its other members nominated to room evicted earlier and not placed
	// yet.
	ownAfter := queue.FromList(st.Allocated)
	ownAfter.Add(need)
	ownAfter.Add(pl.records.nominatedRequests(st.Key, members))
	b := budget{snap: snap, members: members, shareAfter: snap.DominantShare(ownAfter)}
	trial := fitTrial{snap: snap, members: members, st: st, need: need, ahead: ahead, nodes: nodes}
	chosen, plan, limited, err := pl.takeInOrder(ctx, trial, b, inFlight, units)
	if err == nil && plan == nil && limited {
		// The budget ran out before the members fit. Spent node by node, it
		// may free room whole where, spent in order, it left a little on
		// each node: 8 one-cpu victims, 5 on one node and 3 on the other,
		// make room for three two-cpu members, 8 on one node for four.
		chosen, plan, _, err = pl.takeInOrder(ctx, trial, b, inFlight, byNode(units, pl.usable(trial)))
	}
	if err != nil || plan == nil {
		return nil, nil, err
	}
	// Prune every unit the fit does not need, the latest too: the members
	// may fit with no victim at all (they failed for a reason evicting
	// does not mend, such as admission), and then none helps.
	for i := len(chosen) - 1; i >= 0; i-- {
		without := append(append([]unit{}, chosen[:i]...), chosen[i+1:]...)
		p, err := pl.fits(ctx, trial, without)
		if err != nil {
			return nil, nil, err
		}
		if p != nil {
			chosen, plan = without, p
		}
	}
	return chosen, plan, nil
}

// takeInOrder adds the units in order, each only if the budget allows it,
// until the members fit. It returns the units added and the plan, or no
// plan; limited says whether the budget turned a unit down.
func (pl *Plugin) takeInOrder(ctx context.Context, trial fitTrial, b budget, inFlight flight, units []unit) (chosen []unit, plan map[types.UID]string, limited bool, err error) {
	taken := inFlight.clone()
	for _, u := range units {
		if !u.whole && slices.ContainsFunc(chosen, func(c unit) bool { return c.whole && c.gang == u.gang }) {
			continue // its gang is taken whole (byNode may put the whole first)
		}
		if !b.allows(taken, chosen, u) {
			limited = true
			continue
		}
		if u.whole {
			// The whole gang includes its members taken one by one so far.
			chosen = slices.DeleteFunc(chosen, func(c unit) bool {
				if c.gang == u.gang {
					taken.sub(c)
					return true
				}
				return false
			})
		}
		chosen = append(chosen, u)
		taken.add(u)
		p, err := pl.fits(ctx, trial, chosen)
		if err != nil {
			return nil, nil, false, err
		}
		if p != nil {
			return chosen, p, limited, nil
		}
	}
	return nil, nil, limited, nil
}

// budget is what may be taken from whom: a queue down to its deserved
// share and its guarantee, a gang of the preemptor's queue down to the
// preemptor's dominant share once placed (shareAfter).
type budget struct {
	snap       *queue.Snapshot
	members    []*v1.Pod
	shareAfter float64
}

// allows reports whether u may be taken on top of what is taken already;
// chosen are the units taken in this search.
func (b budget) allows(taken flight, chosen []unit, u unit) bool {
	switch u.reason {
	case reclaim: // from another queue: within its budget
		f := b.snap.Queues[u.queue]
		after := f.Allocated.Clone()
		after.Sub(taken.byQueue[u.queue])
		if !stillOver(after, f.Deserved, b.members) {
			return false
		}
		after.Sub(u.usage)
		if u.whole {
			// Its members chosen one by one so far are in u.usage
			// already: count them once.
			for _, c := range chosen {
				if c.gang == u.gang {
					after.Add(c.usage)
				}
			}
		}
		ok, _ := f.Guarantee.Fits(after) // not below its guarantee
		return ok
	case evenShares: // the victim's share must not fall below ours
		left := u.gangAllocated.Clone()
		left.Sub(taken.byGang[u.gang])
		left.Sub(u.usage)
		return b.shareAfter <= b.snap.DominantShare(left)+shareEpsilon
	}
	return true
}

// byNode orders the units node by node: first the nodes a member may take
// (usable), then the others, each in the order its first unit comes; the
// units of each node in their own order. A unit counts at the node of its
// first pod. Units on other nodes stay, last: evicting them may still
// help (a victim's inter-pod anti-affinity), but seldom does.
func byNode(units []unit, usable func(node string) bool) []unit {
	rank := map[string]int{}
	for _, useful := range []bool{true, false} {
		for _, u := range units {
			n := nodeOf(u)
			if _, ok := rank[n]; !ok && usable(n) == useful {
				rank[n] = len(rank)
			}
		}
	}
	out := slices.Clone(units)
	slices.SortStableFunc(out, func(a, b unit) int { return rank[nodeOf(a)] - rank[nodeOf(b)] })
	return out
}

// usable reports whether a member of the trial may take the node: in its
// nodes, when they are set, and within the members' static constraints
// (taints, node affinity, cordon). Answers are kept: byNode asks once per
// unit.
func (pl *Plugin) usable(t fitTrial) func(node string) bool {
	canTake := placement.CanTake(t.members)
	infos := pl.placer.Handle.SnapshotSharedLister().NodeInfos()
	known := map[string]bool{}
	return func(name string) bool {
		ok, seen := known[name]
		if !seen {
			n, err := infos.Get(name)
			ok = err == nil && (t.nodes == nil || t.nodes.Has(name)) && canTake(n.Node())
			known[name] = ok
		}
		return ok
	}
}

func nodeOf(u unit) string {
	if len(u.pods) == 0 {
		return ""
	}
	return u.pods[0].Spec.NodeName
}

// fitTrial is what a trial placement of a gang's needed members checks,
// whatever victims it is given.
type fitTrial struct {
	snap    *queue.Snapshot
	members []*v1.Pod
	st      *gang.Status
	// need is what the members request; ahead is room claimed earlier in
	// the cycle for other gangs of the queue.
	need, ahead queue.Vector
	// nodes, when not nil, are the only nodes the members may go to.
	nodes sets.Set[string]
}

// fits places the members with the units' pods taken off their nodes and
// returns where they go, or nil when they do not all fit. The gang's queue
// must also be within its ceiling once its own victims (preemption) are
// gone and the gang is placed.
func (pl *Plugin) fits(ctx context.Context, t fitTrial, us []unit) (map[types.UID]string, error) {
	own := t.snap.QueueOf(t.st)
	ownVictims := queue.Vector{}
	var removed []placement.PodOnNode
	for _, u := range us {
		if u.queue == own {
			ownVictims.Add(u.usage)
		}
		for _, p := range u.pods {
			removed = append(removed, placement.PodOnNode{Pod: p, Node: p.Spec.NodeName})
		}
	}
	after := t.need.Clone()
	after.Add(t.ahead)
	after.Sub(ownVictims)
	if ok, _ := t.snap.FitsCeiling(own, after); !ok {
		return nil, nil
	}
	plan, msg, err := pl.placer.Place(ctx, placement.Trial{Members: t.members, Removed: removed, Placed: t.st.Placed, MinMember: t.st.Spec.MinMember, Nodes: t.nodes})
	if err != nil || msg != "" {
		return nil, err
	}
	return plan.Nodes(), nil
}

// stillOver reports whether after exceeds deserved in a resource the
// members request.
func stillOver(after, deserved queue.Vector, members []*v1.Pod) bool {
	for _, m := range members {
		for k, n := range queue.FromList(podRequests(m)) {
			if n > 0 && after[k] > deserved[k] {
				return true
			}
		}
	}
	return false
}

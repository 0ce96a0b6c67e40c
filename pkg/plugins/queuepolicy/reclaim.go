package queuepolicy

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/apis/scheduling"
	"k8s.io/kubernetes/pkg/scheduler/framework"

	"github.com/muster-sched/muster/pkg/gang"
	"github.com/muster-sched/muster/pkg/queue"
)

// unit is what reclaim evicts together: one member above its gang's
// minMember, or a whole gang (never part of one below its minimum).
type unit struct {
	gang   gang.Key
	queue  string
	pods   []*v1.Pod
	usage  queue.Vector
	whole  bool
	reason reason
	// gangAllocated is the victim gang's allocation when the unit was
	// listed: what a DRF preemption leaves it is measured from it.
	gangAllocated queue.Vector
	// guarded: evicting the unit's whole gang would break a disruption
	// budget, so it is offered after every other unit.
	guarded bool
}

// reason is why a unit may be evicted.
type reason int

const (
	// reclaim: the unit's queue is reclaimable and above its deserved
	// share, the preemptor's below.
	reclaim reason = iota
	// preempt: the unit's gang has a lower priority in the same queue.
	preempt
	// evenShares: same queue and priority, and the eviction lowers the gap
	// between the two gangs' dominant shares (DRF preemption).
	evenShares
)

// PostFilter reclaims and preempts for a starving gang, transactionally:
// it looks for victims such that every member the gang still needs fits
// afterwards, and evicts nothing unless they all do. Victims come first
// from reclaimable queues above their deserved share (never below their
// guarantee), then from lower-priority gangs of the gang's own queue, then
// (with DRF preemption on) members above minMember of same-priority gangs
// of that queue whose dominant share does not fall below the preemptor's;
// members above a victim gang's minMember before whole gangs; never a
// system-critical pod, and a pod whose PodDisruptionBudget allows no
// disruption only when no other choice lets the gang fit. The gang's queue
// must stay within its ceiling afterwards, so two queues never reclaim
// from each other in turn; a DRF preemption leaves the victim's share no
// lower than the preemptor's, so two gangs never preempt each other in
// turn either.
//
// A gang that is ready already (an elastic member) preempts only within
// its queue: it has started, and its queue's share is not what holds it.
// A gang whose members must share one domain of a topology key takes its
// victims within one domain, where the fewest pods go (victimsFor).
func (pl *Plugin) PostFilter(ctx context.Context, _ fwk.CycleState, pod *v1.Pod, _ fwk.NodeToStatusReader) (*fwk.PostFilterResult, *fwk.Status) {
	key, ok := pl.gangs.KeyOf(pod)
	if !ok {
		return nil, fwk.NewStatus(fwk.Unschedulable)
	}
	if pod.Spec.PreemptionPolicy != nil && *pod.Spec.PreemptionPolicy == v1.PreemptNever {
		pl.state.Release(key) // it cannot fit and will not reclaim
		return nil, fwk.NewStatus(fwk.Unschedulable)
	}
	st := pl.gangs.Status(key)
	if st.Invalid != "" {
		return nil, fwk.NewStatus(fwk.Unschedulable)
	}
	if _, _, placing := pl.gangs.PlannedNode(key, pod.UID, time.Now()); placing {
		return nil, fwk.NewStatus(fwk.Unschedulable) // being placed: nothing to reclaim for
	}
	inFlight := pl.records.inFlight() // before the snapshot: see inFlight
	snap := pl.state.Refresh()
	g := snap.Gang(key)
	if g == nil {
		return nil, fwk.NewStatus(fwk.Unschedulable)
	}
	if ok, why := snap.Permits(key.Namespace, g.Queue); !ok {
		return nil, fwk.NewStatus(fwk.UnschedulableAndUnresolvable, why) // its queue is not its namespace's to use
	}
	// A gang its queue does not admit may still preempt lower-priority
	// work of that queue (which is what fills it), but reclaims from no
	// other. (Admit is asked again rather than g.Admitted read: a gang of
	// one is never recorded as admitted.)
	admitted, _ := pl.state.Admit(&st, snap)
	members := []*v1.Pod{pod}
	if !st.Ready() {
		members = gang.PickMembers(pod, pl.gangs.PendingMembers(key), &st)
	}
	need := requestsOf(members)
	// A queue that cannot take the members under its ceiling gains nothing
	// from other queues' victims: only evicting its own work makes room.
	underCeiling, _ := snap.FitsCeiling(g.Queue, need)
	withinQueue := !admitted || st.Ready() || !underCeiling
	logger := klog.FromContext(ctx)
	if n := pl.records.terminating(key); n > 0 {
		return nil, fwk.NewStatus(fwk.Unschedulable, fmt.Sprintf("reclaim: waiting for %d evicted pods to terminate", n))
	}
	units := pl.candidates(snap, key, g.Queue, gang.PriorityOf(pod, &st.Spec), need, withinQueue, admitted)
	victims, plan, err := pl.victimsFor(ctx, snap, inFlight, members, units, &st, need, nil)
	if err != nil {
		return nil, fwk.AsStatus(err)
	}
	if victims == nil {
		// Nor can it hold its queue's admission while it waits: another
		// gang of the queue may fit now (see queue.State.Release).
		pl.giveUp(key, g.Queue, need, snap)
		logger.V(3).Info("Reclaim cannot make the gang fit: evicting nothing", "gang", key, "candidates", len(units))
		return nil, fwk.NewStatus(fwk.Unschedulable, "reclaim: no set of victims lets the whole gang fit")
	}
	pl.records.prune()
	pl.records.recordEvictions(key, victims)
	// The API calls run off the scheduling cycle, as kube-scheduler's own
	// asynchronous preemption does: the victims are recorded, so the gang
	// waits for them whatever the calls' pace, and the next pod need not.
	go pl.evict(context.WithoutCancel(ctx), snap, pod, key, g.Queue, victims)
	pl.gangs.DropPlan(key)
	logger.V(3).Info("Reclaim planned the gang", "gang", key, "members", len(plan))
	if !withinQueue && slices.ContainsFunc(victims, func(u unit) bool { return u.reason == reclaim }) {
		inFlight.add(victims...)
		if err := pl.reclaimAhead(ctx, snap, inFlight, key, g.Queue, need); err != nil {
			return nil, fwk.AsStatus(err)
		}
	}
	if node, ok := plan[pod.UID]; ok && len(plan) == 1 && slices.ContainsFunc(victims, func(u unit) bool { return u.reason != reclaim }) {
		// Room made within the queue is nominated, as stock preemption
		// does: the queue's own lower- and equal-priority pods would take
		// it otherwise.
		pl.records.recordNomination(key, pod)
		return framework.NewPostFilterResultWithNominatedNode(node), fwk.NewStatus(fwk.Success)
	}
	// Room reclaimed from other queues is not nominated: those queues are
	// at their ceiling now, so it stays this queue's, and whichever of the
	// queue's pods comes first takes it (a nominated pod would hold it idle
	// until its own backoff ends: the fairness scenario took twice as long
	// to reach fair shares). Nor are a gang's members nominated: the
	// scheduler would count a nominated member again in the gang's own
	// trial placement.
	return nil, fwk.NewStatus(fwk.Success)
}

// giveUp records a gang that cannot be placed, even by reclaim: it gives
// back its admission, and it claims no room under its queue's share
// (queue.State.Block) until it is tried again, unless room is coming to
// its queue (victims evicted for another of its gangs still terminating)
// and the nodes' free room (allocatable less every bound pod, terminating
// ones included) would not cover what it needs: then it waits for that
// room, which is its share. It is tried again when the deserved shares
// move (queue.State.NoVictims).
func (pl *Plugin) giveUp(key gang.Key, q string, need queue.Vector, snap *queue.Snapshot) {
	pl.state.NoVictims(key, snap)
	pl.state.Release(key)
	free := snap.Allocatable.Clone()
	free.Sub(snap.Used)
	if queue.FitsIn(need, free) || !pl.records.reclaimingFor(q, snap) {
		pl.state.Block(key)
	}
}

// maxAhead bounds the gangs reclaimAhead reclaims for in one cycle.
const maxAhead = 100

// reclaimAhead reclaims, in the cycle of a gang that reclaimed from other
// queues, for the other starving gangs of its queue too, as Volcano's
// reclaim action does for every starving job of a session. Each would
// otherwise fail a scheduling attempt of its own before reclaiming, and
// kube-scheduler writes a pod's status at every failure, tens of
// milliseconds on a busy apiserver: a queue that arrives with many small
// gangs would reach its deserved share one failure at a time. Now most of
// them find their room free when they are first tried; one tried before
// its victims are gone waits for them, and is activated when they are.
//
// Each gang is transactional as the first one is (its whole remaining gang
// fits once its own victims are gone, or it evicts nothing), from other
// queues only, and the room claimed earlier in the pass counts against the
// queue's ceiling. The pass ends at the first gang no victims help, or
// after maxAhead gangs. Each trial placement sees the snapshot without its
// own victims only, not the room promised to gangs before it: where two
// gangs counted on the same free room, the later one reclaims again when
// it is tried.
func (pl *Plugin) reclaimAhead(ctx context.Context, snap *queue.Snapshot, inFlight flight, leader gang.Key, q string, claimed queue.Vector) error {
	claimed = claimed.Clone()
	type eviction struct {
		pod     *v1.Pod
		key     gang.Key
		victims []unit
	}
	var evictions []eviction
	defer func() {
		if len(evictions) == 0 {
			return
		}
		klog.FromContext(ctx).V(3).Info("Reclaimed ahead for the queue's other starving gangs", "gang", leader, "queue", q, "gangs", len(evictions))
		// One goroutine started from the cycle, not one per gang: each
		// goroutine started here costs the scheduling loop its turn on a
		// busy CPU.
		go func() {
			for _, e := range evictions {
				go pl.evict(context.WithoutCancel(ctx), snap, e.pod, e.key, q, e.victims)
			}
		}()
	}()
	for _, key := range pl.starving(snap, leader, q) {
		if len(evictions) == maxAhead {
			break
		}
		st := pl.gangs.Status(key)
		if st.Invalid != "" || st.Ready() || pl.records.terminating(key) > 0 || pl.gangs.Placing(key, time.Now()) {
			continue
		}
		if admitted, _ := pl.state.Admit(&st, snap); !admitted {
			continue
		}
		pending := pl.gangs.PendingMembers(key)
		if len(pending) == 0 {
			continue
		}
		pod := pending[0]
		if pod.Spec.PreemptionPolicy != nil && *pod.Spec.PreemptionPolicy == v1.PreemptNever {
			continue
		}
		members := gang.PickMembers(pod, pending, &st)
		need := requestsOf(members)
		units := slices.DeleteFunc(pl.candidates(snap, key, q, gang.PriorityOf(pod, &st.Spec), need, false, true),
			func(u unit) bool { return u.reason != reclaim })
		victims, _, err := pl.victimsFor(ctx, snap, inFlight, members, units, &st, need, claimed)
		if err != nil {
			return err
		}
		if victims == nil {
			break
		}
		pl.records.recordEvictions(key, victims)
		inFlight.add(victims...)
		evictions = append(evictions, eviction{pod, key, victims})
		claimed.Add(need)
	}
	return nil
}

// starving lists the queue's gangs other than leader that have pending
// members and are not ready, highest priority first, then oldest.
func (pl *Plugin) starving(snap *queue.Snapshot, leader gang.Key, q string) []gang.Key {
	type entry struct {
		key      gang.Key
		priority int32
		created  time.Time
	}
	var out []entry
	snap.RangeGangs(func(key gang.Key, g *queue.GangFigures) bool {
		if g.Queue == q && key != leader && !g.Ready && permitted(snap, key, q) {
			out = append(out, entry{key, g.Priority, pl.gangs.CreationTime(key)})
		}
		return true
	})
	sort.Slice(out, func(i, j int) bool {
		a, b := out[i], out[j]
		if a.priority != b.priority {
			return a.priority > b.priority
		}
		if !a.created.Equal(b.created) {
			return a.created.Before(b.created)
		}
		return a.key.Less(b.key)
	})
	keys := make([]gang.Key, len(out))
	for i, e := range out {
		keys[i] = e.key
	}
	return keys
}

// candidates lists the units reclaim and preemption may take, in the order
// they are preferred: from other queues, then lower-priority gangs of the
// preemptor's queue, then (DRF) its same-priority gangs; from each, members
// above minMember before the fewest whole gangs; gangs a disruption budget
// protects after all others. A gang its queue does not admit is offered
// whole gangs only: evicting members above a minimum lowers allocated and
// elastic alike, which admission does not see.
func (pl *Plugin) candidates(snap *queue.Snapshot, preemptor gang.Key, preemptorQueue string, priority int32, need queue.Vector, withinQueue, admitted bool) []unit {
	// Units of gangs a PodDisruptionBudget protects come after every other
	// choice: taken only when nothing else lets the gang fit.
	var free, guarded unitLists
	evicting := pl.records.evictingNow()
	snap.RangeGangs(func(key gang.Key, g *queue.GangFigures) bool {
		if key == preemptor || g.Allocated == nil {
			return true
		}
		sameQueue := g.Queue == preemptorQueue
		if withinQueue && !sameQueue {
			return true
		}
		f := snap.Queues[g.Queue]
		if f == nil {
			return true
		}
		if !sameQueue && (!f.Reclaimable || !overDeserved(f, need)) {
			return true
		}
		if sameQueue && (g.Priority > priority || g.Priority == priority && !pl.drfPreemption) {
			return true // neither lower priority nor evened by share
		}
		// Members being evicted are not counted: taking "extras" must never
		// leave the gang below its minimum. Members reserved and not bound
		// yet are counted: a whole gang is taken whole.
		bound := slices.DeleteFunc(pl.gangs.PlacedMembers(key), func(p *v1.Pod) bool { _, ok := evicting[p.UID]; return ok })
		if len(bound) == 0 || systemCritical(bound) {
			return true
		}
		lists := &free
		if pl.pdbs(bound) { // evicting the whole gang would break a budget
			lists = &guarded
		}
		var spec *gang.Spec
		if admitted {
			st := pl.gangs.Status(key)
			spec = &st.Spec
		}
		switch {
		case !sameQueue:
			lists.extras = append(lists.extras, extraUnits(key, g, bound, spec, reclaim)...)
			lists.wholes = append(lists.wholes, wholeUnit(key, g, bound, reclaim))
		case g.Priority < priority:
			lists.lowerExtras = append(lists.lowerExtras, extraUnits(key, g, bound, spec, preempt)...)
			lists.lower = append(lists.lower, wholeUnit(key, g, bound, preempt))
		default:
			lists.byShare = append(lists.byShare, extraUnits(key, g, bound, spec, evenShares)...)
		}
		return true
	})
	last := guarded.ordered(snap)
	for i := range last {
		last[i].guarded = true
	}
	return slices.Concat(free.ordered(snap), last)
}

// unitLists holds candidate units by kind, in the order they are preferred.
type unitLists struct {
	extras, wholes, lowerExtras, lower, byShare []unit
}

// ordered sorts each kind and concatenates them: from other queues, then
// lower-priority gangs of the preemptor's queue, then (DRF) its
// same-priority gangs; members above minMember before whole gangs.
func (l *unitLists) ordered(snap *queue.Snapshot) []unit {
	// The gangs come from a map: ordered by key first, so that a cycle's
	// choice does not depend on the map's order. Sorts are stable: a
	// gang's extras stay newest first.
	byKey := func(us []unit) {
		sort.SliceStable(us, func(i, j int) bool { return us[i].gang.Less(us[j].gang) })
	}
	for _, us := range [][]unit{l.extras, l.wholes, l.lowerExtras, l.lower, l.byShare} {
		byKey(us)
	}
	// Fewest pods first among whole gangs.
	sort.SliceStable(l.wholes, func(i, j int) bool { return len(l.wholes[i].pods) < len(l.wholes[j].pods) })
	sort.SliceStable(l.lower, func(i, j int) bool { return len(l.lower[i].pods) < len(l.lower[j].pods) })
	// Members of the gang with the highest dominant share first.
	sort.SliceStable(l.byShare, func(i, j int) bool {
		return snap.DominantShare(l.byShare[i].gangAllocated) > snap.DominantShare(l.byShare[j].gangAllocated)
	})
	return slices.Concat(l.extras, l.wholes, l.lowerExtras, l.lower, l.byShare)
}

// requestsOf sums the pods' resource requests.
func requestsOf(pods []*v1.Pod) queue.Vector {
	sum := queue.Vector{}
	for _, p := range pods {
		sum.Add(queue.FromList(podRequests(p)))
	}
	return sum
}

func wholeUnit(key gang.Key, g *queue.GangFigures, pods []*v1.Pod, why reason) unit {
	return unit{gang: key, queue: g.Queue, pods: pods, usage: requestsOf(pods), whole: true, reason: why, gangAllocated: g.Allocated}
}

// extraUnits are the bound members (newest first) a gang can lose and
// still have minMember members and each role its minimum, one unit each;
// none without a spec (a gang its queue does not admit is offered whole).
func extraUnits(key gang.Key, g *queue.GangFigures, bound []*v1.Pod, spec *gang.Spec, why reason) []unit {
	if spec == nil {
		return nil
	}
	left := map[string]int32{}
	for _, p := range bound {
		left[gang.RoleOf(p)]++
	}
	n := len(bound) - int(spec.MinMember)
	var out []unit
	for _, p := range bound {
		if len(out) >= n {
			break
		}
		role := gang.RoleOf(p)
		if left[role] <= spec.MinTaskMember[role] {
			continue // the role would fall below its minimum
		}
		left[role]--
		out = append(out, unit{gang: key, queue: g.Queue, pods: []*v1.Pod{p}, usage: queue.FromList(podRequests(p)), reason: why, gangAllocated: g.Allocated})
	}
	return out
}

// vectorAt returns m[k], made empty first if absent.
func vectorAt[K comparable](m map[K]queue.Vector, k K) queue.Vector {
	if m[k] == nil {
		m[k] = queue.Vector{}
	}
	return m[k]
}

// overDeserved reports whether the queue holds more than it deserves in a
// resource the preemptor needs.
func overDeserved(f *queue.Figures, need queue.Vector) bool {
	for k, n := range need {
		if n > 0 && f.Allocated[k] > f.Deserved[k] {
			return true
		}
	}
	return false
}

// systemCritical reports whether any of the pods is never evicted: in
// kube-system, or of a system-critical priority class.
func systemCritical(pods []*v1.Pod) bool {
	return slices.ContainsFunc(pods, func(p *v1.Pod) bool {
		return p.Namespace == metav1.NamespaceSystem || p.Spec.PriorityClassName == scheduling.SystemClusterCritical || p.Spec.PriorityClassName == scheduling.SystemNodeCritical
	})
}

// shareEpsilon absorbs rounding when dominant shares are compared: shares
// that end equal are the fair outcome DRF preemption works towards. Equal is
// allowed, and no back-and-forth follows: the victim preempting back would
// end above the other.
const shareEpsilon = 1e-9

// permitted reports whether the gang's namespace may use queue q.
func permitted(snap *queue.Snapshot, key gang.Key, q string) bool {
	ok, _ := snap.Permits(key.Namespace, q)
	return ok
}

package gangscheduling

import (
	"cmp"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	fwk "k8s.io/kube-scheduler/framework"

	"github.com/muster-sched/muster/pkg/gang"
	"github.com/muster-sched/muster/pkg/queue"
)

// Less orders the whole scheduling queue. Two pods in no gang compare
// exactly as kube-scheduler's PrioritySort compares them: priority, then
// queue timestamp. A gang member has its gang's priority: its PodGroup's
// priority class, else its own. Of equal priority, a pod in no gang goes
// before every gang member: it takes one short cycle, while a gang may
// need thousands, and the room a gang's plan counts on is promised to it
// (see Filter).
// Between gangs, a gang being placed goes first, so that its plan is used
// up before another gang's is made. A member stands in the order by its
// gang's creation time and key, so that the members of a gang are
// adjacent and placed one right after another, in their gang's member
// order (gang.MemberBefore, not the time each was queued). Between gangs of
// equal priority, when a queue policy is on: the higher queue priority,
// the queue least into its share, the members a gang needs to start, and
// the lowest projected dominant share (DRF) go first. Shares are read from
// the last accounting snapshot.
//
// What Less reads of a member is kept between comparisons (see orders)
// while it holds: the scheduling queue compares the pod it sifts about
// twenty times per pop, and most gangs do not change between pops.
//
// An entity that is not a pod (kube-scheduler's own pod groups, queued only
// where its GenericWorkload gate is on) compares as a pod in no gang.
func (pl *Plugin) Less(a, b fwk.QueuedEntityInfo) bool {
	podA, podB := podOf(a), podOf(b)
	ka, oka := pl.keyOfEntity(podA)
	kb, okb := pl.keyOfEntity(podB)
	if !oka && !okb {
		return prioritySort(a, b)
	}
	if ka == kb {
		if pa, pb := a.GetPriority(), b.GetPriority(); pa != pb {
			return pa > pb
		}
		return gang.MemberBefore(podA, podB)
	}
	pl.orders.lock()
	defer pl.orders.unlock()
	var oa, ob order // members whose entries are not kept
	var qs *queue.State
	if pl.queues != nil {
		qs = pl.queues()
	}
	// Queues order two members; their statuses are read only then.
	byQueue := qs != nil && oka && okb
	var snap *queue.Snapshot
	if byQueue {
		snap = qs.Last()
	}
	// A member has its gang's priority (its PodGroup's priority class).
	pa, pb := a.GetPriority(), b.GetPriority()
	var ea, eb *order
	if oka {
		ea = pl.orders.entry(podA, ka, &oa)
		pl.refreshOrder(ea, podA.UID, byQueue, qs, snap)
		if p := ea.pos.Priority; p != nil {
			pa = *p
		}
	}
	if okb {
		eb = pl.orders.entry(podB, kb, &ob)
		pl.refreshOrder(eb, podB.UID, byQueue, qs, snap)
		if p := eb.pos.Priority; p != nil {
			pb = *p
		}
	}
	switch {
	case pa != pb:
		return pa > pb
	case oka != okb:
		return okb // the pod in no gang first
	}
	if !ea.pos.Plan.IsZero() || !eb.pos.Plan.IsZero() {
		now := pl.now()
		if placingA, placingB := ea.pos.Placing(now), eb.pos.Placing(now); placingA != placingB {
			return placingA
		}
	}
	if byQueue && snap != nil {
		if less, decided := queue.Order(ea.queue, eb.queue, ea.projection, eb.projection); decided {
			return less
		}
	}
	ta, tb := orderTime(a, &ea.pos), orderTime(b, &eb.pos)
	if !ta.Equal(tb) {
		return ta.Before(tb)
	}
	if c := compareKeys(ka, kb); c != 0 {
		return c < 0
	}
	return a.GetTimestamp().Before(b.GetTimestamp())
}

// prioritySort is kube-scheduler's PrioritySort: priority, then the time
// queued.
func prioritySort(a, b fwk.QueuedEntityInfo) bool {
	if pa, pb := a.GetPriority(), b.GetPriority(); pa != pb {
		return pa > pb
	}
	return a.GetTimestamp().Before(b.GetTimestamp())
}

// podOf is the pod a queued entity holds; nil for a pod group.
func podOf(e fwk.QueuedEntityInfo) *v1.Pod {
	if p, ok := e.(interface{ GetPodInfo() fwk.PodInfo }); ok {
		return p.GetPodInfo().GetPod()
	}
	return nil
}

// keyOfEntity is keyOf for a queued entity's pod, which may be nil.
func (pl *Plugin) keyOfEntity(pod *v1.Pod) (gang.Key, bool) {
	if pod == nil {
		return gang.Key{}, false
	}
	return pl.keyOf(pod)
}

// refreshOrder brings o, the entry of member uid, up to date: its position
// in its gang, and withStatus (queues order it: qs on, snap their last
// snapshot) its queue and projection.
func (pl *Plugin) refreshOrder(o *order, uid types.UID, withStatus bool, qs *queue.State, snap *queue.Snapshot) {
	if !o.pos.Stamp.Current() || withStatus && o.pos.Status == nil {
		o.pos = pl.manager.Position(o.key, uid, withStatus)
		o.snap, o.projected = nil, false
	}
	if !withStatus {
		return
	}
	if o.snap != snap {
		o.snap, o.queue = snap, nil
		if snap != nil {
			o.queue = snap.Queues[snap.QueueOf(o.pos.Status)]
		}
	}
	if !o.projected || !qs.Current(o.projection) {
		o.projection, o.projected = qs.Project(&o.pos), true
	}
}

// orderTime is the time a member is ordered by: its gang's creation, or
// for a gang not known yet the time the member was queued.
func orderTime(q fwk.QueuedEntityInfo, pos *gang.Position) time.Time {
	if pos.Created.IsZero() {
		return q.GetTimestamp()
	}
	return pos.Created
}

// compareKeys orders gangs created at the same time by key: −1, 0 or 1.
func compareKeys(a, b gang.Key) int {
	if c := cmp.Compare(a.Namespace, b.Namespace); c != 0 {
		return c
	}
	if c := cmp.Compare(a.Name, b.Name); c != 0 {
		return c
	}
	return cmp.Compare(a.Family, b.Family)
}

package gang

import (
	"cmp"
	"time"

	"k8s.io/apimachinery/pkg/types"
	corev1helpers "k8s.io/component-helpers/scheduling/corev1"
	fwk "k8s.io/kube-scheduler/framework"

	"github.com/muster-sched/muster/pkg/gang"
	"github.com/muster-sched/muster/pkg/queue"
)

// Less orders the whole scheduling queue. Two pods in no gang compare
// exactly as kube-scheduler's PrioritySort compares them: priority, then
// queue timestamp. A gang member stands in the order by its gang's creation
// time and key, so that the members of a gang are adjacent and placed one
// right after another, in their gang's member order (gang.MemberBefore,
// not the time each was queued). Between gangs of equal priority, when a queue policy
// is on: the higher queue priority, the queue least into its share, the
// members a gang needs to start, and the lowest projected dominant share
// (DRF) go first. Shares are read from the last accounting snapshot.
//
// What Less reads of a member is kept between comparisons (see orders)
// while it holds: the scheduling queue compares the pod it sifts about
// twenty times per pop, and most gangs do not change between pops.
func (pl *Gang) Less(a, b fwk.QueuedPodInfo) bool {
	podA, podB := a.GetPodInfo().GetPod(), b.GetPodInfo().GetPod()
	if pa, pb := corev1helpers.PodPriority(podA), corev1helpers.PodPriority(podB); pa != pb {
		return pa > pb
	}
	pl.orders.lock()
	defer pl.orders.unlock()
	var scratchA, scratchB order
	oa, ob := pl.orders.entry(podA, &scratchA), pl.orders.entry(podB, &scratchB)
	switch {
	case !oa.inGang && !ob.inGang:
		return a.GetTimestamp().Before(b.GetTimestamp()) // PrioritySort
	case oa.inGang && ob.inGang && oa.key == ob.key:
		return gang.MemberBefore(podA, podB)
	}
	var qs *queue.State
	if pl.queues != nil {
		qs = pl.queues()
	}
	// Queues order two members; their statuses are read only then.
	byQueue := oa.inGang && ob.inGang && qs != nil
	var snap *queue.Snapshot
	if byQueue {
		snap = qs.Last()
	}
	if oa.inGang {
		pl.refreshOrder(oa, podA.UID, byQueue, qs, snap)
	}
	if ob.inGang {
		pl.refreshOrder(ob, podB.UID, byQueue, qs, snap)
	}
	// A gang being placed goes first: its plan holds for the snapshot it
	// was made on, and each pod placed in between can spoil it.
	if !oa.pos.Plan.IsZero() || !ob.pos.Plan.IsZero() {
		now := pl.now()
		if pa, pb := oa.pos.Placing(now), ob.pos.Placing(now); pa != pb {
			return pa
		}
	}
	if byQueue && snap != nil {
		if less, decided := queue.Order(oa.queue, ob.queue, oa.projection, ob.projection); decided {
			return less
		}
	}
	ta, tb := orderTime(a, oa), orderTime(b, ob)
	if !ta.Equal(tb) {
		return ta.Before(tb)
	}
	if c := compareKeys(oa, ob); c != 0 {
		return c < 0
	}
	return a.GetTimestamp().Before(b.GetTimestamp())
}

// refreshOrder brings o, the entry of member uid, up to date: its position
// in its gang, and withStatus (queues order it: qs on, snap their last
// snapshot) its queue and projection.
func (pl *Gang) refreshOrder(o *order, uid types.UID, withStatus bool, qs *queue.State, snap *queue.Snapshot) {
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
			o.queue = snap.Queues[queue.QueueOf(o.pos.Status)]
		}
	}
	if !o.projected || !qs.Current(o.projection) {
		o.projection, o.projected = qs.Project(&o.pos), true
	}
}

// orderTime is the time a pod is ordered by: its gang's creation, or for a
// pod in no gang (or a gang not known yet) the time it was queued.
func orderTime(q fwk.QueuedPodInfo, o *order) time.Time {
	if !o.inGang || o.pos.Created.IsZero() {
		return q.GetTimestamp()
	}
	return o.pos.Created
}

// compareKeys orders gangs created at the same time by key, a pod in no
// gang first: −1, 0 or 1.
func compareKeys(oa, ob *order) int {
	if oa.inGang != ob.inGang {
		if ob.inGang {
			return -1
		}
		return 1
	}
	a, b := oa.key, ob.key
	if c := cmp.Compare(a.Namespace, b.Namespace); c != 0 {
		return c
	}
	if c := cmp.Compare(a.Name, b.Name); c != 0 {
		return c
	}
	return cmp.Compare(a.Family, b.Family)
}

package gang

import (
	"cmp"
	"time"

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
func (pl *Gang) Less(a, b fwk.QueuedPodInfo) bool {
	podA, podB := a.GetPodInfo().GetPod(), b.GetPodInfo().GetPod()
	if pa, pb := corev1helpers.PodPriority(podA), corev1helpers.PodPriority(podB); pa != pb {
		return pa > pb
	}
	ka, oka := keyOf(podA)
	kb, okb := keyOf(podB)
	switch {
	case !oka && !okb:
		return a.GetTimestamp().Before(b.GetTimestamp()) // PrioritySort
	case oka && okb && ka == kb:
		return gang.MemberBefore(podA, podB)
	}
	// Each side's gang is read once, under one lock; its status only
	// when queues order the two.
	now := pl.now()
	byQueue := oka && okb && pl.batch.Queues() != nil
	var posa, posb gang.Position
	if oka {
		posa = pl.manager.Position(ka, podA.UID, now, byQueue)
	}
	if okb {
		posb = pl.manager.Position(kb, podB.UID, now, byQueue)
	}
	// A gang being placed goes first: its plan holds for the snapshot it
	// was made on, and each pod placed in between can spoil it.
	if posa.Placing != posb.Placing {
		return posa.Placing
	}
	if byQueue {
		if less, decided := pl.queueOrder(&posa, &posb); decided {
			return less
		}
	}
	ta, tb := orderTime(a, &posa, oka), orderTime(b, &posb, okb)
	if !ta.Equal(tb) {
		return ta.Before(tb)
	}
	if c := compareKeys(ka, oka, kb, okb); c != 0 {
		return c < 0
	}
	return a.GetTimestamp().Before(b.GetTimestamp())
}

// orderTime is the time a pod is ordered by: its gang's creation, or for a
// pod in no gang (or a gang not known yet) the time it was queued.
func orderTime(q fwk.QueuedPodInfo, pos *gang.Position, inGang bool) time.Time {
	if !inGang || pos.Created.IsZero() {
		return q.GetTimestamp()
	}
	return pos.Created
}

// compareKeys orders gangs created at the same time by key, a pod in no
// gang first: −1, 0 or 1.
func compareKeys(a gang.Key, inA bool, b gang.Key, inB bool) int {
	if inA != inB {
		if inB {
			return -1
		}
		return 1
	}
	if c := cmp.Compare(a.Namespace, b.Namespace); c != 0 {
		return c
	}
	if c := cmp.Compare(a.Name, b.Name); c != 0 {
		return c
	}
	return cmp.Compare(a.Family, b.Family)
}

// queueOrder compares members of two gangs by their queues and gangs;
// decided is false when they tie. The gangs'
// queues and positions come from the gang state, which knows a pod from
// its PreEnqueue on; queue figures from the last accounting snapshot.
func (pl *Gang) queueOrder(posa, posb *gang.Position) (less, decided bool) {
	qs := pl.batch.Queues()
	if qs == nil {
		return false, false
	}
	snap := qs.Last()
	if snap == nil {
		return false, false
	}
	if qa, qb := queue.QueueOf(posa.Status), queue.QueueOf(posb.Status); qa != qb {
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
	sharea, starta := projectedShare(qs, posa)
	shareb, startb := projectedShare(qs, posb)
	if starta != startb {
		return starta, true
	}
	if sharea != shareb {
		return sharea < shareb, true
	}
	return false, false
}

// projectedShare is the dominant share the pod's gang will have once the
// pod is placed (DRF), and whether the pod is one of the members the gang
// still needs to start. A gang's starting members all stand at the share
// it will have when ready, so they stay together; each member beyond
// stands one more task further. The projection counts what the gang is
// allocated plus the members ahead of the pod, so it does not move while
// the gang's members are placed one by one — the scheduling queue orders
// a pod once, when it is added.
func projectedShare(qs *queue.State, pos *gang.Position) (float64, bool) {
	if !pos.Pending {
		return qs.ProjectedShare(pos.Status.Allocated, nil, 0), !pos.Status.Ready()
	}
	start := int32(pos.Rank) < pos.Need
	n := pos.Rank + 1
	if start {
		n = int(pos.Need)
	}
	return qs.ProjectedShare(pos.Status.Allocated, pos.Requests, n), start
}

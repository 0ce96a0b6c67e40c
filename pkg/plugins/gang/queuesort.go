package gang

import (
	"cmp"
	"time"

	corev1helpers "k8s.io/component-helpers/scheduling/corev1"
	fwk "k8s.io/kube-scheduler/framework"

	"github.com/muster-sched/muster/pkg/gang"
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
		if less, decided := pl.batch.Queues().Order(&posa, &posb); decided {
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

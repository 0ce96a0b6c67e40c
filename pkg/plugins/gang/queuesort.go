package gang

import (
	"time"

	corev1helpers "k8s.io/component-helpers/scheduling/corev1"
	fwk "k8s.io/kube-scheduler/framework"
)

// Less orders the whole scheduling queue. Two pods in no gang compare
// exactly as kube-scheduler's PrioritySort compares them: priority, then
// queue timestamp. A gang member stands in the order by its gang's creation
// time and key, so that the members of a gang are adjacent and placed one
// right after another.
func (pl *Gang) Less(a, b fwk.QueuedPodInfo) bool {
	pa := corev1helpers.PodPriority(a.GetPodInfo().GetPod())
	pb := corev1helpers.PodPriority(b.GetPodInfo().GetPod())
	if pa != pb {
		return pa > pb
	}
	ta, ka := pl.orderKey(a)
	tb, kb := pl.orderKey(b)
	if !ta.Equal(tb) {
		return ta.Before(tb)
	}
	if ka != kb {
		return ka < kb
	}
	return a.GetTimestamp().Before(b.GetTimestamp())
}

// orderKey is the time and gang key a pod is ordered by.
func (pl *Gang) orderKey(q fwk.QueuedPodInfo) (time.Time, string) {
	key, ok := keyOf(q.GetPodInfo().GetPod())
	if !ok {
		return q.GetTimestamp(), ""
	}
	created := pl.manager.CreationTime(key)
	if created.IsZero() {
		created = q.GetTimestamp()
	}
	return created, key.String()
}

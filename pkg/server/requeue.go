package server

import (
	"context"
	"slices"

	v1 "k8s.io/api/core/v1"
	utilfeature "k8s.io/apiserver/pkg/util/feature"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/klog/v2"
	"k8s.io/kubernetes/pkg/features"
	"k8s.io/kubernetes/pkg/scheduler"
	internalqueue "k8s.io/kubernetes/pkg/scheduler/backend/queue"
	"k8s.io/kubernetes/pkg/scheduler/framework"
)

// requeueGuard puts back a pod that kube-scheduler 1.37.2's queue drops
// (kubernetes#139186, fixed upstream by #139450 after 1.37.2): a pod
// requeued by a failed binding cycle (a gang member rejected at Permit,
// for one) can be popped by the scheduling loop before the queue has
// marked it done, and is then discarded as "tracked in multiple places".
// It waits unscheduled until something updates it, which may be never.
//
// Once the wrapped call returns, the queue has marked the pod done, and a
// pop that raced it has discarded it already. A pod that is then in no
// queue, not being scheduled, not assumed and still unbound in the
// informer was dropped: it is added again. Pods of upstream PodGroups
// are left alone where the queue takes them as pod group members (gate
// GenericWorkload on): upstream requeues those safely.
type requeueGuard struct {
	internalqueue.SchedulingQueue
	assumed func(*v1.Pod) bool
	latest  func(*v1.Pod) *v1.Pod
	// groups says the queue takes pods of upstream PodGroups as pod group
	// members (gate GenericWorkload), which it requeues safely.
	groups bool
}

func guardRequeues(sched *scheduler.Scheduler, pods corelisters.PodLister) {
	sched.SchedulingQueue = &requeueGuard{
		SchedulingQueue: sched.SchedulingQueue,
		groups:          utilfeature.DefaultFeatureGate.Enabled(features.GenericWorkload),
		assumed: func(p *v1.Pod) bool {
			ok, err := sched.Cache.IsAssumedPod(p)
			return ok || err != nil
		},
		latest: func(p *v1.Pod) *v1.Pod {
			got, err := pods.Pods(p.Namespace).Get(p.Name)
			if err != nil {
				return nil
			}
			return got
		},
	}
}

func (q *requeueGuard) AddUnschedulablePodIfNotPresent(logger klog.Logger, pInfo *framework.QueuedPodInfo, cycle int64) error {
	pod := pInfo.Pod // pInfo is the queue's once requeued
	err := q.SchedulingQueue.AddUnschedulablePodIfNotPresent(logger, pInfo, cycle)
	if err != nil || q.groups && pod.Spec.SchedulingGroup != nil {
		return err
	}
	if q.tracked(pod) || q.pending(pod) == nil {
		return nil
	}
	// Popped, tried and requeued, assumed or bound while we looked: the
	// checks again, in the order a pod moves through them.
	if q.tracked(pod) {
		return nil
	}
	cur := q.pending(pod)
	if cur == nil {
		return nil
	}
	logger.V(2).Info("Requeueing a pod the scheduling queue dropped", "pod", klog.KObj(pod))
	q.Add(klog.NewContext(context.Background(), logger), cur)
	return nil
}

// tracked says the scheduler holds the pod: queued, in flight or assumed.
func (q *requeueGuard) tracked(pod *v1.Pod) bool {
	return q.queued(pod) || q.inFlight(pod) || q.assumed(pod)
}

// pending is the informer's copy of the pod while it is unbound and not
// being deleted, else nil.
func (q *requeueGuard) pending(pod *v1.Pod) *v1.Pod {
	cur := q.latest(pod)
	if cur == nil || cur.UID != pod.UID || cur.Spec.NodeName != "" || cur.DeletionTimestamp != nil {
		return nil
	}
	return cur
}

func (q *requeueGuard) queued(pod *v1.Pod) bool {
	_, ok := q.GetPod(pod.Name, pod.Namespace, nil)
	return ok
}

func (q *requeueGuard) inFlight(pod *v1.Pod) bool {
	return slices.ContainsFunc(q.InFlightPods(), func(p *v1.Pod) bool { return p.UID == pod.UID })
}

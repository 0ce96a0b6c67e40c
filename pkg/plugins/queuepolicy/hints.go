package queuepolicy

import (
	"context"

	v1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/util"

	"github.com/muster-sched/muster/pkg/queue"
	"github.com/muster-sched/muster/pkg/requests"
)

const (
	queues        fwk.EventResource = "queues.v1alpha1.scheduling.muster.dev"
	volcanoQueues fwk.EventResource = "queues.v1beta1.scheduling.volcano.sh"
)

// EventsToRegister: a queue changed (opened, capacity raised, weights),
// room freed by a pod leaving or a queue's request shrinking, a node added. (A new pod of the same queue
// needs no event: the scheduler does not publish unscheduled pods' adds,
// and each pod counts itself in its queue's request at PreEnqueue.)
func (pl *Plugin) EventsToRegister(_ context.Context) ([]fwk.ClusterEventWithHint, error) {
	events := []fwk.ClusterEventWithHint{
		{Event: fwk.ClusterEvent{Resource: queues, ActionType: fwk.Add | fwk.Update}, QueueingHintFn: queueSpecChanged},
		{Event: fwk.ClusterEvent{Resource: fwk.Pod, ActionType: fwk.Delete}, QueueingHintFn: pl.boundPodLeft},
		{Event: fwk.ClusterEvent{Resource: fwk.Node, ActionType: fwk.Add | fwk.UpdateNodeAllocatable}},
	}
	if pl.volcanoQueues {
		events = append(events, fwk.ClusterEventWithHint{Event: fwk.ClusterEvent{Resource: volcanoQueues, ActionType: fwk.Add | fwk.Update}, QueueingHintFn: queueSpecChanged})
	}
	return events, nil
}

// queueSpecChanged skips status-only updates: the status controller writes
// queue figures every second, and they change no decision.
func queueSpecChanged(_ klog.Logger, _ *v1.Pod, oldObj, newObj any) (fwk.QueueingHint, error) {
	if oldObj == nil || queue.SpecChanged(oldObj, newObj) {
		return fwk.Queue, nil
	}
	return fwk.QueueSkip, nil
}

// boundPodLeft queues when a bound pod left (room freed, its queue's
// allocation shrank) or a pending pod of some queue was deleted (its
// queue's request shrank, so others may deserve more).
func (pl *Plugin) boundPodLeft(_ klog.Logger, _ *v1.Pod, oldObj, _ any) (fwk.QueueingHint, error) {
	deleted, _, err := util.As[*v1.Pod](oldObj, nil)
	if err != nil || deleted.Spec.NodeName != "" {
		return fwk.Queue, nil
	}
	if _, managed := pl.gangs.KeyOf(deleted); managed {
		return fwk.Queue, nil
	}
	return fwk.QueueSkip, nil
}

func podRequests(pod *v1.Pod) v1.ResourceList {
	return requests.Of(pod)
}

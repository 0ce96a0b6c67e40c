package gangscheduling

import (
	"context"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/util"

	"github.com/muster-sched/muster/pkg/gang"
)

// Custom-resource events, named as the scheduler's dynamic informers want.
const (
	musterPodGroups           fwk.EventResource = "podgroups.v1alpha1.scheduling.muster.dev"
	schedulerPluginsPodGroups fwk.EventResource = "podgroups.v1alpha1.scheduling.x-k8s.io"
)

// EventsToRegister lists the events that can make a rejected member
// schedulable, each with a hint that skips events that cannot.
func (pl *Plugin) EventsToRegister(_ context.Context) ([]fwk.ClusterEventWithHint, error) {
	events := []fwk.ClusterEventWithHint{
		// A new member can make the gang valid; a bound sibling can make it
		// ready for members waiting behind a plan.
		{Event: fwk.ClusterEvent{Resource: fwk.Pod, ActionType: fwk.Add | fwk.UpdatePodLabel}, QueueingHintFn: pl.isSibling},
		// A pod leaving a node frees room.
		{Event: fwk.ClusterEvent{Resource: fwk.Pod, ActionType: fwk.Delete}, QueueingHintFn: freesRoom},
		{Event: fwk.ClusterEvent{Resource: fwk.Node, ActionType: fwk.Add | fwk.UpdateNodeAllocatable | fwk.UpdateNodeLabel | fwk.UpdateNodeTaint | fwk.UpdateNodeCondition}},
		{Event: fwk.ClusterEvent{Resource: musterPodGroups, ActionType: fwk.Add | fwk.Update}, QueueingHintFn: pl.namesGang(gang.FamilyMuster)},
	}
	if pl.manager.SchedulerPluginsInstalled() {
		events = append(events, fwk.ClusterEventWithHint{
			Event: fwk.ClusterEvent{Resource: schedulerPluginsPodGroups, ActionType: fwk.Add | fwk.Update}, QueueingHintFn: pl.namesGang(gang.FamilySchedulerPlugins),
		})
	}
	return events, nil
}

func (pl *Plugin) isSibling(logger klog.Logger, pod *v1.Pod, _, newObj any) (fwk.QueueingHint, error) {
	other, ok := newObj.(*v1.Pod)
	if !ok {
		return fwk.Queue, nil
	}
	a, ok := pl.keyOf(pod)
	if b, okb := pl.keyOf(other); ok && okb && a == b {
		logger.V(5).Info("Sibling changed: requeue", "pod", klog.KObj(pod), "sibling", klog.KObj(other))
		return fwk.Queue, nil
	}
	return fwk.QueueSkip, nil
}

// freesRoom queues a member when a bound pod goes away.
func freesRoom(_ klog.Logger, _ *v1.Pod, oldObj, _ any) (fwk.QueueingHint, error) {
	deleted, _, err := util.As[*v1.Pod](oldObj, nil)
	if err == nil && deleted.Spec.NodeName == "" {
		return fwk.QueueSkip, nil
	}
	return fwk.Queue, nil
}

// namesGang returns a hint that queues pod when its gang's PodGroup is
// created or its spec changes: the gang's requirements changed, so its last
// failure says nothing about the next try. Status updates (written by
// Muster itself) are skipped.
func (pl *Plugin) namesGang(family gang.Family) fwk.QueueingHintFn {
	return func(_ klog.Logger, pod *v1.Pod, oldObj, newObj any) (fwk.QueueingHint, error) {
		key, ok := pl.keyOf(pod)
		if !ok || key.Family != family {
			return fwk.QueueSkip, nil
		}
		obj, err := meta.Accessor(newObj)
		if err != nil {
			return fwk.Queue, nil
		}
		if old, err := meta.Accessor(oldObj); err == nil && oldObj != nil && old.GetGeneration() == obj.GetGeneration() {
			return fwk.QueueSkip, nil
		}
		if obj.GetNamespace() == key.Namespace && obj.GetName() == key.Name {
			return fwk.Queue, nil
		}
		return fwk.QueueSkip, nil
	}
}

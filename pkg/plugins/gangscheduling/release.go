package gangscheduling

import (
	"context"
	"fmt"

	v1 "k8s.io/api/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"

	"github.com/muster-sched/muster/pkg/gang"
)

// Members waiting at Permit hold their nodes until the gang is ready or
// its timeout ends. What makes waiting pointless releases them at once,
// as Unreserve does: their gang turned invalid (its PodGroup deleted, a
// member relabelled away), a waiting pod left its gang, or a waiting
// member's node was deleted (it would be bound to a node that is gone).

// watchWaiting registers the releases with the gang state and the node
// informer; they run on the informers' goroutines until the process ends.
func (pl *Plugin) watchWaiting(ctx context.Context) error {
	logger := klog.FromContext(ctx)
	pl.manager.OnRelease(func(key gang.Key) { pl.releaseIfInvalid(logger, key) })
	_, err := pl.handle.SharedInformerFactory().Core().V1().Nodes().Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		DeleteFunc: func(obj any) {
			if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
				obj = d.Obj
			}
			if n, ok := obj.(*v1.Node); ok {
				pl.releaseOnNode(logger, n.Name)
			}
		},
	})
	return err
}

// releaseIfInvalid rejects the waiting members of gang key that left it,
// and all of them if it is invalid. The gang's status is read only when
// one of its members waits: most releases (a member finished) stop at the
// look over the waiting pods.
func (pl *Plugin) releaseIfInvalid(logger klog.Logger, key gang.Key) {
	var invalid *string
	pl.handle.IterateOverWaitingPods(func(wp fwk.WaitingPod) {
		pod := wp.GetPod()
		k, ok := pl.keyOf(pod) // the labels it waits with
		if !ok || k != key {
			return
		}
		if invalid == nil {
			s := pl.manager.Status(key)
			invalid = &s.Invalid
		}
		why := *invalid
		if why == "" && !pl.manager.HasMember(key, pod.UID) {
			why = fmt.Sprintf("member %s left the gang", pod.Name)
		}
		if why != "" {
			logger.V(3).Info("Releasing waiting member", "pod", klog.KObj(pod), "gang", key, "reason", why)
			pl.reject(logger, wp, gangMessage(key, why))
		}
	})
}

// releaseOnNode rejects the gang members waiting at Permit on node, which
// was deleted; Unreserve then releases their siblings.
func (pl *Plugin) releaseOnNode(logger klog.Logger, node string) {
	pl.handle.IterateOverWaitingPods(func(wp fwk.WaitingPod) {
		pod := wp.GetPod()
		if pod.Spec.NodeName != node {
			return
		}
		if key, ok := pl.keyOf(pod); ok {
			why := fmt.Sprintf("node %s of member %s was deleted", node, pod.Name)
			logger.V(3).Info("Releasing waiting member", "pod", klog.KObj(pod), "gang", key, "reason", why)
			pl.reject(logger, wp, gangMessage(key, why))
		}
	})
}

package gangscheduling

import (
	"context"
	"fmt"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"

	"github.com/muster-sched/muster/pkg/gang"
)

// Reserve records the member as placed.
func (pl *Plugin) Reserve(_ context.Context, _ fwk.CycleState, pod *v1.Pod, node string) *fwk.Status {
	if key, ok := pl.keyOf(pod); ok {
		pl.manager.Reserve(key, pod.UID, node, pl.now())
	}
	return nil
}

// Unreserve undoes Reserve: the member failed after it was placed (its
// Permit timed out or was rejected, or binding failed). Its waiting
// siblings are released at once, and the gang will be planned afresh.
func (pl *Plugin) Unreserve(ctx context.Context, _ fwk.CycleState, pod *v1.Pod, _ string) {
	key, ok := pl.keyOf(pod)
	if !ok {
		return
	}
	pl.manager.Unreserve(key, pod.UID)
	pl.releaseWaiting(ctx, key, fmt.Sprintf("member %s was unreserved", pod.Name))
}

// Permit lets a member bind once its gang is ready, and lets every waiting
// sibling go with it. Until then the member waits, bounded by the gang's
// scheduleTimeoutSeconds.
func (pl *Plugin) Permit(ctx context.Context, _ fwk.CycleState, pod *v1.Pod, _ string) (*fwk.Status, time.Duration) {
	key, ok := pl.keyOf(pod)
	if !ok {
		return nil, 0
	}
	s := pl.manager.Status(key)
	if s.Invalid != "" {
		return fwk.NewStatus(fwk.UnschedulableAndUnresolvable, gangMessage(key, s.Invalid)), 0
	}
	if s.Ready() {
		pl.allowWaiting(ctx, key)
		return nil, 0
	}
	timeout := s.Spec.Timeout
	if timeout == 0 {
		timeout = pl.timeout
	}
	klog.FromContext(ctx).V(4).Info("Member waits for its gang", "pod", klog.KObj(pod), "gang", key, "placed", s.Placed, "minMember", s.Spec.MinMember)
	return fwk.NewStatus(fwk.Wait), timeout
}

func (pl *Plugin) allowWaiting(ctx context.Context, key gang.Key) {
	pl.handle.IterateOverWaitingPods(func(wp fwk.WaitingPod) {
		if k, ok := pl.keyOf(wp.GetPod()); ok && k == key {
			klog.FromContext(ctx).V(4).Info("Gang ready: member allowed", "pod", klog.KObj(wp.GetPod()), "gang", key)
			wp.Allow(Name)
		}
	})
}

// releaseWaiting rejects the members of the gang that wait at Permit and
// says how many there were.
func (pl *Plugin) releaseWaiting(ctx context.Context, key gang.Key, why string) int {
	released := 0
	pl.handle.IterateOverWaitingPods(func(wp fwk.WaitingPod) {
		if k, ok := pl.keyOf(wp.GetPod()); ok && k == key {
			klog.FromContext(ctx).V(3).Info("Releasing waiting member", "pod", klog.KObj(wp.GetPod()), "gang", key, "reason", why)
			wp.Reject(Name, gangMessage(key, why))
			released++
		}
	})
	return released
}

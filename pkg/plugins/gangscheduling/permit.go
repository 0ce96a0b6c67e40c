package gangscheduling

import (
	"context"
	"fmt"
	"time"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"

	"github.com/muster-sched/muster/pkg/gang"
)

// Reserve records the member as placed. A trial placement reserves its
// members' devices and volumes only: it places no member.
func (pl *Plugin) Reserve(_ context.Context, state fwk.CycleState, pod *v1.Pod, node string) *fwk.Status {
	if gang.IsTrial(state) {
		return nil
	}
	if key, ok := pl.keyOf(pod); ok {
		pl.manager.Reserve(key, pod.UID, node, pl.now())
	}
	return nil
}

// Unreserve undoes Reserve: the member failed after it was placed (its
// Permit timed out or was rejected, or binding failed). Its waiting
// siblings are released at once, and the gang will be planned afresh.
// The end of a trial placement undoes nothing of Muster's (see Reserve).
func (pl *Plugin) Unreserve(ctx context.Context, state fwk.CycleState, pod *v1.Pod, _ string) {
	if gang.IsTrial(state) {
		return
	}
	pl.binds.Release(pod.UID) // whatever the pod's gang is now
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

// PreBindPreFlight runs in the binding cycle before kube-scheduler writes
// the pod's NominatedNodeName and waits at Permit. A member that waits
// there for its gang takes a slot for that write first (see batch.Binds),
// so that thousands of them do not hold up every other pod's binding;
// PreBind then has work for it. A member that does not wait (an extra of
// a gang that runs) binds as any pod does. A member nominated to the node
// already (by reclaim) has nothing to write until it binds.
func (pl *Plugin) PreBindPreFlight(ctx context.Context, _ fwk.CycleState, pod *v1.Pod, node string) (*fwk.PreBindPreFlightResult, *fwk.Status) {
	if s := pl.checkNode(pod, node); s != nil {
		return nil, s
	}
	if pl.handle.GetWaitingPod(pod.UID) == nil || !pl.boundTogether(pod) {
		return nil, fwk.NewStatus(fwk.Skip)
	}
	if pod.Status.NominatedNodeName == node {
		return &fwk.PreBindPreFlightResult{AllowParallel: true}, nil
	}
	if err := pl.binds.Nominating(ctx, pod.UID); err != nil {
		return nil, fwk.AsStatus(err)
	}
	return &fwk.PreBindPreFlightResult{AllowParallel: true}, nil
}

// PreBind lets such a member bind once it holds a slot again: the members
// of a big gang, allowed together, bind a few at a time, and the binding
// of other pods goes on between theirs. The slot is given back at PostBind
// or Unreserve. Where the gate NominatedNodeNameForExpectation is off,
// PreBindPreFlight does not run and PreBind runs for every pod: it checks
// for itself.
func (pl *Plugin) PreBind(ctx context.Context, _ fwk.CycleState, pod *v1.Pod, node string) *fwk.Status {
	if !pl.boundTogether(pod) {
		return nil
	}
	if s := pl.checkNode(pod, node); s != nil {
		return s
	}
	if err := pl.binds.Binding(ctx, pod.UID); err != nil {
		return fwk.AsStatus(err)
	}
	return nil
}

// checkNode fails the binding of a member bound together with its gang
// to a node that was deleted. The scheduler's snapshot can hold a node a
// moment after the node informer saw it go (and releaseOnNode released
// the members waiting there), so a plan made on it may name the node, and
// a binding to a node that is gone is accepted by the API.
func (pl *Plugin) checkNode(pod *v1.Pod, node string) *fwk.Status {
	if _, err := pl.handle.SharedInformerFactory().Core().V1().Nodes().Lister().Get(node); !apierrors.IsNotFound(err) || !pl.boundTogether(pod) {
		return nil
	}
	return fwk.NewStatus(fwk.Unschedulable, fmt.Sprintf("node %s was deleted", node))
}

// boundTogether reports whether pod is a member of a gang that starts
// with more than one member: its members are allowed at Permit together.
// A gang of one (a pod with a queue alone) binds as any pod does.
func (pl *Plugin) boundTogether(pod *v1.Pod) bool {
	key, ok := pl.keyOf(pod)
	if !ok {
		return false
	}
	spec := pl.manager.Status(key).Spec
	return spec.MinMember > 1 || len(spec.MinTaskMember) > 0
}

// PostBind gives back the member's binding slot.
func (pl *Plugin) PostBind(_ context.Context, _ fwk.CycleState, pod *v1.Pod, _ string) {
	pl.binds.Release(pod.UID)
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
			logger := klog.FromContext(ctx)
			logger.V(3).Info("Releasing waiting member", "pod", klog.KObj(wp.GetPod()), "gang", key, "reason", why)
			pl.reject(logger, wp, gangMessage(key, why))
			released++
		}
	})
	return released
}

package placement

import (
	"context"
	"maps"

	v1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework"
	schedutil "k8s.io/kubernetes/pkg/scheduler/util"

	"github.com/muster-sched/muster/pkg/gang"
)

// trial is one run of Place: the nodes it changed, the pods it added to
// them, and the members whose devices and volumes it reserved.
//
// A member with resource claims or PersistentVolumeClaims is reserved
// once its node is chosen, as its real cycle would be: the profile's
// Reserve plugins run with its cycle state, which holds what its Filter
// chose on that node. In-tree, only DynamicResources and VolumeBinding
// reserve, in memory (DRA's in-flight allocations, VolumeBinding's assume
// cache), so the members placed after it see those devices and volumes
// taken. Place unreserves them all, in reverse order, before it returns:
// nothing outlives the trial. Muster's own Reserve plugins stand aside in
// a trial's cycle state (gang.IsTrial).
type trial struct {
	pl *Placer
	t  Trial
	// overlay holds copies of the nodes that pods were removed from or
	// added to.
	overlay map[string]fwk.NodeInfo
	// added are the pods added to overlay nodes, in order: the planned
	// members, then the members placed.
	added []addedPod
	// reserved are the members reserved, in order.
	reserved []reservation
}

type addedPod struct {
	info fwk.PodInfo
	node string
}

type reservation struct {
	state fwk.CycleState
	pod   *v1.Pod
	node  string
}

// nodeCopy returns the trial's copy of node, made on first use; false if
// the node is not in the snapshot.
func (tr *trial) nodeCopy(node string) (fwk.NodeInfo, bool) {
	if o, ok := tr.overlay[node]; ok {
		return o, true
	}
	n, err := tr.pl.Handle.SnapshotSharedLister().NodeInfos().Get(node)
	if err != nil {
		return nil, false
	}
	tr.overlay[node] = n.Snapshot()
	return tr.overlay[node], true
}

// removeVictims takes the trial's removed pods off their nodes. Their
// devices and volumes stay taken: DynamicResources and VolumeBinding have
// no PreFilter extensions, and kube-scheduler's preemption does not free
// a victim's devices either.
func (tr *trial) removeVictims(logger klog.Logger) {
	for _, r := range tr.t.Removed {
		n, ok := tr.nodeCopy(r.Node)
		if !ok {
			continue
		}
		if err := n.RemovePod(logger, r.Pod); err != nil {
			// Not on the node in this snapshot: the gang state and the
			// scheduler's cache may disagree for a moment. Nothing to free.
			logger.V(4).Info("Trial placement: victim not on its node", "pod", klog.KObj(r.Pod), "node", r.Node)
		}
	}
}

// addPlanned adds the members planned by an earlier step to their nodes.
// Those with devices or volumes are placed again on their node first
// (PreFilter, Filter there, Reserve), so that what they were given is
// taken again; a message says when one no longer fits there.
func (tr *trial) addPlanned(ctx context.Context) (string, error) {
	for i, p := range tr.t.Planned {
		n, ok := tr.nodeCopy(p.Node)
		if !ok {
			continue // the node is gone: the members planned next see it gone too
		}
		info := p.Info
		if info == nil {
			var err error
			if info, err = framework.NewPodInfo(p.Pod); err != nil {
				return "", err
			}
		}
		if tr.pl.reserves(p.Pod) {
			placed := tr.t.Placed - int32(len(tr.t.Planned)) + int32(i)
			if why, err := tr.replay(ctx, p.Pod, n); err != nil {
				return "", err
			} else if why != "" {
				return placeableAs(placed, tr.t.MinMember, p.Pod, "no longer fits its planned node "+p.Node+": "+why), nil
			}
		}
		tr.add(n, info)
	}
	return "", nil
}

// replay places a planned member on its node n again and reserves it
// there; it returns why it does not fit.
func (tr *trial) replay(ctx context.Context, pod *v1.Pod, n fwk.NodeInfo) (string, error) {
	state, result, rejected, err := tr.newState(ctx, pod)
	if err != nil {
		return "", err
	} else if rejected != nil {
		return why(rejected), nil
	}
	if err := tr.addPods(ctx, state, pod, 0); err != nil {
		return "", err
	}
	if result != nil && result.NodeNames != nil && !result.NodeNames.Has(n.Node().Name) {
		return "node is not eligible", nil
	}
	if s := tr.pl.Framework.RunFilterPluginsWithNominatedPods(ctx, state, pod, n); !s.IsSuccess() {
		if !s.IsRejected() {
			return "", s.AsError()
		}
		return why(s), nil
	}
	return tr.reserve(ctx, state, pod, n.Node().Name)
}

// newState makes a trial cycle state for pod: PreFilter, then the removed
// pods taken off. A PreFilter that rejects the pod is returned as
// rejected.
func (tr *trial) newState(ctx context.Context, pod *v1.Pod) (fwk.CycleState, *fwk.PreFilterResult, *fwk.Status, error) {
	state := framework.NewCycleState()
	gang.MarkTrial(state)
	result, status, _ := tr.pl.Framework.RunPreFilterPlugins(ctx, state, pod)
	if !status.IsSuccess() && !status.IsSkip() {
		if status.IsRejected() {
			return nil, nil, status, nil
		}
		return nil, nil, nil, status.AsError()
	}
	for _, r := range tr.t.Removed {
		if n, ok := tr.overlay[r.Node]; ok {
			info, err := framework.NewPodInfo(r.Pod)
			if err != nil {
				return nil, nil, nil, err
			}
			if s := tr.pl.Framework.RunPreFilterExtensionRemovePod(ctx, state, pod, info, n); !s.IsSuccess() {
				return nil, nil, nil, s.AsError()
			}
		}
	}
	return state, result, nil, nil
}

// addPods tells pod's PreFilter state of the pods added since from.
func (tr *trial) addPods(ctx context.Context, state fwk.CycleState, pod *v1.Pod, from int) error {
	for _, p := range tr.added[from:] {
		if s := tr.pl.Framework.RunPreFilterExtensionAddPod(ctx, state, pod, p.info, tr.overlay[p.node]); !s.IsSuccess() {
			return s.AsError()
		}
	}
	return nil
}

// add puts a pod on the trial's copy of its node.
func (tr *trial) add(n fwk.NodeInfo, info fwk.PodInfo) {
	n.AddPodInfo(info)
	tr.added = append(tr.added, addedPod{info: info, node: n.Node().Name})
}

// reserve runs the Reserve plugins for pod on node. A plugin that rejects
// it says why it does not fit; one that fails is an error (the real cycle
// would retry the pod after a backoff). Either way, what the failed
// Reserve did for pod is undone at once, as kube-scheduler does.
func (tr *trial) reserve(ctx context.Context, state fwk.CycleState, pod *v1.Pod, node string) (string, error) {
	s := tr.pl.Framework.RunReservePluginsReserve(ctx, state, pod, node)
	if !s.IsSuccess() {
		tr.pl.Framework.RunReservePluginsUnreserve(context.WithoutCancel(ctx), state, pod, node)
		if s.IsRejected() {
			return why(s), nil
		}
		return "", s.AsError()
	}
	tr.reserved = append(tr.reserved, reservation{state: state, pod: pod, node: node})
	return "", nil
}

// why is what a status that rejects a pod says, never "".
func why(s *fwk.Status) string {
	if m := s.Message(); m != "" {
		return m
	}
	return "rejected by " + s.Plugin()
}

// unreserve undoes every reservation of the trial, last first. It runs
// even when ctx is done: the plugins only revert their memory.
func (tr *trial) unreserve(ctx context.Context) {
	ctx = context.WithoutCancel(ctx)
	for i := len(tr.reserved) - 1; i >= 0; i-- {
		r := tr.reserved[i]
		tr.pl.Framework.RunReservePluginsUnreserve(ctx, r.state, r.pod, r.node)
	}
	tr.reserved = nil
}

// reserves reports whether placing p takes devices or volumes that the
// Reserve plugins track (see Takes). Such a member gets a cycle state of
// its own and is reserved on its node.
func (pl *Placer) reserves(p *v1.Pod) bool {
	var classes fwk.DeviceClassResolver
	if dra := pl.Handle.SharedDRAManager(); dra != nil {
		classes = dra.DeviceClassResolver()
	}
	devices, volumes := Takes(p, classes)
	return devices || volumes
}

// Takes reports whether placing p takes devices (it has resource claims,
// or requests an extended resource that a DeviceClass of classes
// provides: DRA makes a claim for it) or volumes (PersistentVolumeClaims
// or generic ephemeral volumes): what DynamicResources and VolumeBinding
// reserve, and what a gang's plan can run out of. classes is nil where
// DRA is off.
func Takes(p *v1.Pod, classes fwk.DeviceClassResolver) (devices, volumes bool) {
	return len(p.Spec.ResourceClaims) > 0 || requestsDeviceClass(p, classes), hasClaimVolume(p)
}

// requestsDeviceClass reports whether p requests an extended resource
// that a DeviceClass provides (feature DRAExtendedResource).
func requestsDeviceClass(p *v1.Pod, classes fwk.DeviceClassResolver) bool {
	if classes == nil {
		return false
	}
	mapped := func(requests v1.ResourceList) bool {
		for name, q := range requests {
			if !q.IsZero() && schedutil.IsDRAExtendedResourceName(name) && classes.GetDeviceClass(name) != nil {
				return true
			}
		}
		return false
	}
	if p.Spec.Resources != nil && mapped(p.Spec.Resources.Requests) {
		return true
	}
	for _, cs := range [][]v1.Container{p.Spec.InitContainers, p.Spec.Containers} {
		for i := range cs {
			if mapped(cs[i].Resources.Requests) {
				return true
			}
		}
	}
	return false
}

// samePreFilter reports whether b's PreFilter state equals a's: the same
// namespace, labels and spec, and no claim (resource claims, whose names
// are in each pod's status and whose allocation each member reserves;
// PersistentVolumeClaims, whose volumes each member reserves; generic
// ephemeral volumes, whose claims take the pod's name). Members that
// differ in a label or their hostname (an indexed Job's) do not share.
func samePreFilter(a, b *v1.Pod) bool {
	return a.Namespace == b.Namespace && len(a.Spec.ResourceClaims) == 0 && !hasClaimVolume(a) &&
		maps.Equal(a.Labels, b.Labels) && apiequality.Semantic.DeepEqual(a.Spec, b.Spec)
}

// hasClaimVolume reports whether p has a PersistentVolumeClaim or generic
// ephemeral volume: what VolumeBinding binds and reserves.
func hasClaimVolume(p *v1.Pod) bool {
	for _, v := range p.Spec.Volumes {
		if v.PersistentVolumeClaim != nil || v.Ephemeral != nil {
			return true
		}
	}
	return false
}

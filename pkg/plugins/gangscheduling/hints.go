package gangscheduling

import (
	"context"
	"sync"

	v1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	storagev1 "k8s.io/api/storage/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/component-helpers/storage/ephemeral"
	"k8s.io/dynamic-resource-allocation/resourceclaim"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/util"
	"k8s.io/utils/ptr"

	"github.com/muster-sched/muster/pkg/gang"
	"github.com/muster-sched/muster/pkg/placement"
)

// Custom-resource events, named as the scheduler's dynamic informers want.
const (
	musterPodGroups           fwk.EventResource = "podgroups.v1alpha1.scheduling.muster.dev"
	schedulerPluginsPodGroups fwk.EventResource = "podgroups.v1alpha1.scheduling.x-k8s.io"
	volcanoPodGroups          fwk.EventResource = "podgroups.v1beta1.scheduling.volcano.sh"
)

// EventsToRegister lists the events that can make a rejected member
// schedulable, each with a hint that skips events that cannot.
func (pl *Plugin) EventsToRegister(_ context.Context) ([]fwk.ClusterEventWithHint, error) {
	events := []fwk.ClusterEventWithHint{
		// A new member can make the gang valid; a bound sibling can make it
		// ready for members waiting behind a plan.
		{Event: fwk.ClusterEvent{Resource: fwk.Pod, ActionType: fwk.Add | fwk.UpdatePodLabel}, QueueingHintFn: pl.isSibling},
		// A pod leaving a node frees room.
		{Event: fwk.ClusterEvent{Resource: fwk.Pod, ActionType: fwk.Delete}, QueueingHintFn: pl.freesRoom},
		{Event: fwk.ClusterEvent{Resource: fwk.Node, ActionType: fwk.Add | fwk.UpdateNodeAllocatable | fwk.UpdateNodeLabel | fwk.UpdateNodeTaint | fwk.UpdateNodeCondition}, QueueingHintFn: pl.unlessRefused},
		{Event: fwk.ClusterEvent{Resource: musterPodGroups, ActionType: fwk.Add | fwk.Update}, QueueingHintFn: pl.namesGang(gang.FamilyMuster)},
	}
	// Devices and volumes freed or published, for gangs that take some.
	events = append(events, newHolders(pl.manager, pl.deviceClasses()).events()...)
	if pl.manager.SchedulerPluginsInstalled() {
		events = append(events, fwk.ClusterEventWithHint{
			Event: fwk.ClusterEvent{Resource: schedulerPluginsPodGroups, ActionType: fwk.Add | fwk.Update}, QueueingHintFn: pl.namesGang(gang.FamilySchedulerPlugins),
		})
	}
	if pl.manager.VolcanoInstalled() {
		events = append(events, fwk.ClusterEventWithHint{
			Event: fwk.ClusterEvent{Resource: volcanoPodGroups, ActionType: fwk.Add | fwk.Update}, QueueingHintFn: pl.namesGang(gang.FamilyVolcano),
		})
	}
	return events, nil
}

// isSibling queues a member when a pod of its gang is added or relabelled.
// The pod's key is read first: it is in no gang for most events, and the
// hint runs once per waiting member.
func (pl *Plugin) isSibling(logger klog.Logger, pod *v1.Pod, _, newObj any) (fwk.QueueingHint, error) {
	other, ok := newObj.(*v1.Pod)
	if !ok {
		return fwk.Queue, nil
	}
	b, okb := pl.keyOf(other)
	if !okb {
		return fwk.QueueSkip, nil
	}
	if a, ok := pl.keyOf(pod); ok && a == b {
		logger.V(5).Info("Sibling changed: requeue", "pod", klog.KObj(pod), "sibling", klog.KObj(other))
		return fwk.Queue, nil
	}
	return fwk.QueueSkip, nil
}

// freesRoom queues a member when a bound pod goes away, unless its gang
// waits to be valid (see unlessRefused).
func (pl *Plugin) freesRoom(logger klog.Logger, pod *v1.Pod, oldObj, newObj any) (fwk.QueueingHint, error) {
	deleted, _, err := util.As[*v1.Pod](oldObj, nil)
	if err == nil && deleted.Spec.NodeName == "" {
		return fwk.QueueSkip, nil
	}
	return pl.unlessRefused(logger, pod, oldObj, newObj)
}

// unlessRefused queues a member for an event that frees or adds room,
// unless its gang was refused at PreEnqueue as invalid: room does not make
// it valid, and the gang state wakes its members when it turns valid
// (gang.Manager.OnWake). The members of a gang that can never be valid
// (20,000 pods, min-available 20,001) are then not moved and refused
// again on every pod deletion and node update.
func (pl *Plugin) unlessRefused(_ klog.Logger, pod *v1.Pod, _, _ any) (fwk.QueueingHint, error) {
	if key, ok := pl.keyOf(pod); ok && pl.manager.Refused(key) {
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
		if oldObj != nil && !gang.SpecChanged(oldObj, newObj) {
			return fwk.QueueSkip, nil
		}
		if obj.GetNamespace() == key.Namespace && obj.GetName() == key.Name {
			return fwk.Queue, nil
		}
		return fwk.QueueSkip, nil
	}
}

// deviceClasses resolves extended resources to the DeviceClasses that
// provide them; nil where DRA is off.
func (pl *Plugin) deviceClasses() fwk.DeviceClassResolver {
	if pl.handle == nil {
		return nil
	}
	if dra := pl.handle.SharedDRAManager(); dra != nil {
		return dra.DeviceClassResolver()
	}
	return nil
}

// A gang's plan places its members seeing the devices and volumes taken by
// those placed before (package placement), so a gang can be refused in
// PreFilter for want of devices or volumes; only Gang rejected it, so only
// Gang's events retry it. These are the events that can give it some, each
// hinted twice: the event must be one that can (a device or volume freed or
// published, a member's own claim created…), and the member's gang must
// have a pending member that takes devices, or volumes (placement.Takes),
// so that gangs that take neither are never retried on them.

// events lists the device and volume events, as kube-scheduler's
// DynamicResources, VolumeBinding and NodeVolumeLimits register them.
func (h *holders) events() []fwk.ClusterEventWithHint {
	return []fwk.ClusterEventWithHint{
		{Event: fwk.ClusterEvent{Resource: fwk.ResourceClaim, ActionType: fwk.Add | fwk.Update | fwk.Delete}, QueueingHintFn: h.afterClaimChange},
		// The tracker's slices carry DeviceTaintRules' taints without a new
		// generation: any change may free devices.
		{Event: fwk.ClusterEvent{Resource: fwk.ResourceSlice, ActionType: fwk.Add | fwk.Update}, QueueingHintFn: h.forDevices(always)},
		{Event: fwk.ClusterEvent{Resource: fwk.DeviceClass, ActionType: fwk.Add | fwk.Update}, QueueingHintFn: h.forDevices(specChanged)},
		{Event: fwk.ClusterEvent{Resource: fwk.PersistentVolume, ActionType: fwk.Add | fwk.Update}, QueueingHintFn: h.forVolumes(volumeFree)},
		{Event: fwk.ClusterEvent{Resource: fwk.PersistentVolumeClaim, ActionType: fwk.Add | fwk.Update}, QueueingHintFn: h.ownVolumeClaim},
		{Event: fwk.ClusterEvent{Resource: fwk.StorageClass, ActionType: fwk.Add | fwk.Update}, QueueingHintFn: h.forVolumes(topologyChanged)},
		{Event: fwk.ClusterEvent{Resource: fwk.CSINode, ActionType: fwk.Add | fwk.Update}, QueueingHintFn: h.forVolumes(csiNodeChanged)},
		{Event: fwk.ClusterEvent{Resource: fwk.CSIDriver, ActionType: fwk.Update}, QueueingHintFn: h.forVolumes(capacityUntracked)},
		{Event: fwk.ClusterEvent{Resource: fwk.CSIStorageCapacity, ActionType: fwk.Add | fwk.Update}, QueueingHintFn: h.forVolumes(capacityRose)},
		// A detached volume frees one of its node's attachments.
		{Event: fwk.ClusterEvent{Resource: fwk.VolumeAttachment, ActionType: fwk.Delete}, QueueingHintFn: h.forVolumes(always)},
	}
}

// helps reports whether an event can give a gang the devices or volumes it
// waits for; an error (objects of the wrong type) queues the member.
type helps func(oldObj, newObj any) (bool, error)

// forDevices is the hint for an event that helps a gang taking devices.
func (h *holders) forDevices(event helps) fwk.QueueingHintFn {
	return h.hint(event, (*holders).takesDevices)
}

// forVolumes is the hint for an event that helps a gang taking volumes.
func (h *holders) forVolumes(event helps) fwk.QueueingHintFn {
	return h.hint(event, (*holders).takesVolumes)
}

func (h *holders) hint(event helps, takes func(*holders, *v1.Pod) bool) fwk.QueueingHintFn {
	return func(logger klog.Logger, pod *v1.Pod, oldObj, newObj any) (fwk.QueueingHint, error) {
		if ok, err := event(oldObj, newObj); err != nil {
			return fwk.Queue, err
		} else if !ok || !takes(h, pod) {
			return fwk.QueueSkip, nil
		}
		logger.V(5).Info("Devices or volumes may be free for the gang: requeue", "pod", klog.KObj(pod))
		return fwk.Queue, nil
	}
}

// afterClaimChange queues a member when a claim's devices are freed (the
// claim deallocated, or deleted while allocated) and its gang takes
// devices, or when the member's own claim is created or its status
// changes (as DynamicResources does).
func (h *holders) afterClaimChange(logger klog.Logger, pod *v1.Pod, oldObj, newObj any) (fwk.QueueingHint, error) {
	if _, unknown := oldObj.(cache.DeletedFinalStateUnknown); unknown && newObj == nil {
		return h.forDevices(always)(logger, pod, oldObj, newObj)
	}
	old, claim, err := util.As[*resourceapi.ResourceClaim](oldObj, newObj)
	if err != nil {
		return fwk.Queue, err
	}
	freed := old != nil && old.Status.Allocation != nil && (claim == nil || claim.Status.Allocation == nil)
	if freed {
		return h.forDevices(always)(logger, pod, oldObj, newObj)
	}
	if _, member := h.manager.KeyOf(pod); !member || claim == nil || !ownsClaim(pod, claim) {
		return fwk.QueueSkip, nil
	}
	if old != nil && apiequality.Semantic.DeepEqual(&old.Status, &claim.Status) {
		return fwk.QueueSkip, nil
	}
	logger.V(5).Info("Member's claim created or changed: requeue", "pod", klog.KObj(pod), "claim", klog.KObj(claim))
	return fwk.Queue, nil
}

// ownsClaim reports whether claim is one of pod's resource claims.
func ownsClaim(pod *v1.Pod, claim *resourceapi.ResourceClaim) bool {
	if pod.Namespace != claim.Namespace {
		return false
	}
	for i := range pod.Spec.ResourceClaims {
		if name, _, err := resourceclaim.Name(pod, &pod.Spec.ResourceClaims[i]); err == nil && name != nil && *name == claim.Name {
			return true
		}
	}
	return false
}

// ownVolumeClaim queues a member when one of its own volume claims is
// created or changes (bound, resized…), as VolumeBinding does: a member
// whose claim is missing or unbound (Immediate binding) fails its gang's
// plan, and its own retry plans the gang again.
func (h *holders) ownVolumeClaim(logger klog.Logger, pod *v1.Pod, oldObj, newObj any) (fwk.QueueingHint, error) {
	_, pvc, err := util.As[*v1.PersistentVolumeClaim](oldObj, newObj)
	if err != nil {
		return fwk.Queue, err
	}
	if _, member := h.manager.KeyOf(pod); !member || pvc.Namespace != pod.Namespace {
		return fwk.QueueSkip, nil
	}
	for i := range pod.Spec.Volumes {
		v := &pod.Spec.Volumes[i]
		if v.PersistentVolumeClaim != nil && v.PersistentVolumeClaim.ClaimName == pvc.Name ||
			v.Ephemeral != nil && ephemeral.VolumeClaimName(pod, v) == pvc.Name {
			logger.V(5).Info("Member's volume claim created or changed: requeue", "pod", klog.KObj(pod), "pvc", klog.KObj(pvc))
			return fwk.Queue, nil
		}
	}
	return fwk.QueueSkip, nil
}

func always(_, _ any) (bool, error) { return true, nil }

// specChanged: an object created, or its spec changed (a new generation).
func specChanged(oldObj, newObj any) (bool, error) {
	if oldObj == nil {
		return true, nil
	}
	old, obj, err := util.As[metav1.Object](oldObj, newObj)
	if err != nil {
		return true, err
	}
	return old.GetGeneration() != obj.GetGeneration(), nil
}

// volumeFree: a volume created, or changed while no claim holds it (its
// claimRef cleared by an admin, or naming a claim not bound yet). A
// volume being bound changes with a claim's UID in its claimRef: that
// takes a volume, never frees one.
func volumeFree(oldObj, newObj any) (bool, error) {
	old, pv, err := util.As[*v1.PersistentVolume](oldObj, newObj)
	if err != nil {
		return true, err
	}
	return old == nil || pv.Spec.ClaimRef == nil || pv.Spec.ClaimRef.UID == "", nil
}

// topologyChanged: a StorageClass created, or its allowed topologies
// changed (its binding mode cannot).
func topologyChanged(oldObj, newObj any) (bool, error) {
	old, sc, err := util.As[*storagev1.StorageClass](oldObj, newObj)
	if err != nil {
		return true, err
	}
	return old == nil || !apiequality.Semantic.DeepEqual(old.AllowedTopologies, sc.AllowedTopologies), nil
}

// csiNodeChanged: a CSINode created, its migrated plugins changed (how
// in-tree volumes are counted), or a driver's attach limit raised.
func csiNodeChanged(oldObj, newObj any) (bool, error) {
	old, n, err := util.As[*storagev1.CSINode](oldObj, newObj)
	if err != nil {
		return true, err
	}
	if old == nil || old.Annotations[v1.MigratedPluginsAnnotationKey] != n.Annotations[v1.MigratedPluginsAnnotationKey] {
		return true, nil
	}
	limits := make(map[string]int32, len(old.Spec.Drivers))
	for _, d := range old.Spec.Drivers {
		limits[d.Name] = attachLimit(d)
	}
	for _, d := range n.Spec.Drivers {
		if was, ok := limits[d.Name]; !ok || attachLimit(d) > was {
			return true, nil
		}
	}
	return false, nil
}

// attachLimit is how many volumes of the driver the node attaches; 0 when
// it says none.
func attachLimit(d storagev1.CSINodeDriver) int32 {
	if d.Allocatable == nil || d.Allocatable.Count == nil {
		return 0
	}
	return *d.Allocatable.Count
}

// capacityUntracked: a CSIDriver no longer publishes its storage capacity,
// so the scheduler stops checking it.
func capacityUntracked(oldObj, newObj any) (bool, error) {
	old, d, err := util.As[*storagev1.CSIDriver](oldObj, newObj)
	if err != nil || old == nil {
		return true, err
	}
	return ptr.Deref(old.Spec.StorageCapacity, false) && !ptr.Deref(d.Spec.StorageCapacity, false), nil
}

// capacityRose: storage capacity published, or the largest volume it can
// provision grown.
func capacityRose(oldObj, newObj any) (bool, error) {
	old, c, err := util.As[*storagev1.CSIStorageCapacity](oldObj, newObj)
	if err != nil || old == nil {
		return true, err
	}
	was, now := volumeLimit(old), volumeLimit(c)
	return now != nil && (was == nil || now.Cmp(*was) > 0), nil
}

// volumeLimit is the largest volume the capacity allows, as VolumeBinding
// reads it.
func volumeLimit(c *storagev1.CSIStorageCapacity) *resource.Quantity {
	if c.MaximumVolumeSize != nil {
		return c.MaximumVolumeSize
	}
	return c.Capacity
}

// holders says whether a member's gang takes devices or volumes: the
// member itself, else a pending member (placement.Takes). A hint is asked
// once per waiting member, so the answer for the other members is kept per
// gang until the gang changes (its gang.Stamp goes stale): a gang of
// thousands is read once per change, not once per member and event. A
// DeviceClass that comes to provide an extended resource does not change
// the gang: the members requesting it are asked afresh, and queued.
type holders struct {
	manager *gang.Manager
	classes fwk.DeviceClassResolver

	mu    sync.Mutex
	gangs map[gang.Key]held
	// sweepAt is the size at which gangs drops its stale entries.
	sweepAt int
}

type held struct {
	stamp            *gang.Stamp
	devices, volumes bool
}

func newHolders(manager *gang.Manager, classes fwk.DeviceClassResolver) *holders {
	return &holders{manager: manager, classes: classes, gangs: map[gang.Key]held{}}
}

// takesDevices reports whether pod's gang takes devices; false for a pod
// in no gang, which Gang rejects only for the room gangs' plans promise.
func (h *holders) takesDevices(pod *v1.Pod) bool {
	key, ok := h.manager.KeyOf(pod)
	if !ok {
		return false
	}
	if devices, _ := placement.Takes(pod, h.classes); devices {
		return true
	}
	return h.gang(key, pod).devices
}

// takesVolumes reports whether pod's gang takes volumes, as takesDevices.
func (h *holders) takesVolumes(pod *v1.Pod) bool {
	key, ok := h.manager.KeyOf(pod)
	if !ok {
		return false
	}
	if _, volumes := placement.Takes(pod, h.classes); volumes {
		return true
	}
	return h.gang(key, pod).volumes
}

// gang is what the pending members of pod's gang, key, take.
func (h *holders) gang(key gang.Key, pod *v1.Pod) held {
	h.mu.Lock()
	e, ok := h.gangs[key]
	h.mu.Unlock()
	if ok && e.stamp.Current() {
		return e
	}
	// The stamp before the members: a change while they are read stales
	// it, and the next hint reads them again.
	e = held{stamp: h.manager.Position(key, pod.UID, false).Stamp}
	for _, p := range h.manager.PendingMembers(key) {
		devices, volumes := placement.Takes(p, h.classes)
		e.devices, e.volumes = e.devices || devices, e.volumes || volumes
		if e.devices && e.volumes {
			break
		}
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if len(h.gangs) >= h.sweepAt {
		for k, old := range h.gangs {
			if !old.stamp.Current() {
				delete(h.gangs, k)
			}
		}
		h.sweepAt = max(64, 2*len(h.gangs))
	}
	h.gangs[key] = e
	return e
}

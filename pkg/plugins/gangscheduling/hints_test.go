package gangscheduling

import (
	"context"
	"testing"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	kubefake "k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"
	"k8s.io/klog/v2/ktesting"
	fwk "k8s.io/kube-scheduler/framework"
	st "k8s.io/kubernetes/pkg/scheduler/testing"
	"k8s.io/utils/ptr"

	"github.com/muster-sched/muster/apis/scheduling/v1alpha1"
	"github.com/muster-sched/muster/pkg/gang"
)

// extendedGPU is an extended resource that the DeviceClass gpu provides.
const extendedGPU v1.ResourceName = "example.com/gpu"

// classes is a DeviceClassResolver over a fixed mapping.
type classes map[v1.ResourceName]*resourceapi.DeviceClass

func (c classes) GetDeviceClass(name v1.ResourceName) *resourceapi.DeviceClass { return c[name] }

// hintGangs are gangs of two pending members in namespace ns, one of which
// takes devices or volumes (but plain's), and a pod in no gang.
var hintGangs = struct {
	plain, plainOther, gpu, gpuDriver, ext, extDriver, disk, diskDriver, scratch, lone, loneGPU *v1.Pod
}{
	plain:      hintMember("plain", "plain-0").Obj(),
	plainOther: hintMember("plain", "plain-1").Obj(),
	gpu: hintMember("gpu", "gpu-0").
		PodResourceClaims(v1.PodResourceClaim{Name: "gpu", ResourceClaimName: ptr.To("gpu-0-gpu")}).Obj(),
	gpuDriver:  hintMember("gpu", "gpu-driver").Obj(),
	ext:        hintMember("ext", "ext-0").Req(map[v1.ResourceName]string{extendedGPU: "1"}).Obj(),
	extDriver:  hintMember("ext", "ext-driver").Obj(),
	disk:       hintMember("disk", "disk-0").PVC("disk-0-data").Obj(),
	diskDriver: hintMember("disk", "disk-driver").Obj(),
	scratch: hintMember("scratch", "scratch-0").Volume(v1.Volume{Name: "tmp", VolumeSource: v1.VolumeSource{
		Ephemeral: &v1.EphemeralVolumeSource{VolumeClaimTemplate: &v1.PersistentVolumeClaimTemplate{}},
	}}).Obj(),
	lone: st.MakePod().Namespace("ns").Name("lone").UID("lone").PVC("lone-data").Obj(),
	loneGPU: st.MakePod().Namespace("ns").Name("lone-gpu").UID("lone-gpu").
		PodResourceClaims(v1.PodResourceClaim{Name: "gpu", ResourceClaimName: ptr.To("lone-gpu")}).Obj(),
}

func hintMember(group, name string) *st.PodWrapper {
	return st.MakePod().Namespace("ns").Name(name).UID(name).
		Labels(map[string]string{v1alpha1.LabelPodGroup: group, v1alpha1.LabelMinAvailable: "2"})
}

// hintFixture is the device and volume hints over the gang state of
// hintGangs, with a DeviceClass providing extendedGPU.
func hintFixture(t *testing.T) (context.Context, *kubefake.Clientset, *gang.Manager, *holders) {
	t.Helper()
	_, ctx := ktesting.NewTestContext(t)
	g := hintGangs
	var objs []runtime.Object
	for _, p := range []*v1.Pod{g.plain, g.plainOther, g.gpu, g.gpuDriver, g.ext, g.extDriver, g.disk, g.diskDriver, g.scratch, g.lone, g.loneGPU} {
		objs = append(objs, p.DeepCopy())
	}
	kube, manager, _, _ := orderFixture(ctx, t, objs, 0)
	gpu := &resourceapi.DeviceClass{ObjectMeta: metav1.ObjectMeta{Name: "gpu"}}
	return ctx, kube, manager, newHolders(manager, classes{extendedGPU: gpu})
}

// hintFor returns the hint registered for the event.
func hintFor(t *testing.T, events []fwk.ClusterEventWithHint, event fwk.ClusterEvent) fwk.QueueingHintFn {
	t.Helper()
	for _, e := range events {
		if e.Event.Resource == event.Resource && e.Event.ActionType&event.ActionType == event.ActionType {
			return e.QueueingHintFn
		}
	}
	t.Fatalf("no hint registered for %s", event.Label())
	return nil
}

// TestEventsToRegisterDevicesAndVolumes: Gang registers, beside its own,
// the events that can give a gang refused by its plan the devices or
// volumes it waits for, each with a hint.
func TestEventsToRegisterDevicesAndVolumes(t *testing.T) {
	_, _, manager, _ := hintFixture(t)
	events, err := (&Plugin{manager: manager}).EventsToRegister(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, e := range events {
		if e.QueueingHintFn == nil {
			t.Errorf("%s is registered without a hint", e.Event.Label())
			continue
		}
		got = append(got, e.Event.Label())
	}
	want := []string{
		fwk.ClusterEvent{Resource: fwk.Pod, ActionType: fwk.Add | fwk.UpdatePodLabel}.Label(),
		fwk.ClusterEvent{Resource: fwk.Pod, ActionType: fwk.Delete}.Label(),
		fwk.ClusterEvent{Resource: fwk.Node, ActionType: fwk.Add | fwk.UpdateNodeAllocatable | fwk.UpdateNodeLabel | fwk.UpdateNodeTaint | fwk.UpdateNodeCondition}.Label(),
		fwk.ClusterEvent{Resource: musterPodGroups, ActionType: fwk.Add | fwk.Update}.Label(),
		fwk.ClusterEvent{Resource: fwk.ResourceClaim, ActionType: fwk.Add | fwk.Update | fwk.Delete}.Label(),
		fwk.ClusterEvent{Resource: fwk.ResourceSlice, ActionType: fwk.Add | fwk.Update}.Label(),
		fwk.ClusterEvent{Resource: fwk.DeviceClass, ActionType: fwk.Add | fwk.Update}.Label(),
		fwk.ClusterEvent{Resource: fwk.PersistentVolume, ActionType: fwk.Add | fwk.Update}.Label(),
		fwk.ClusterEvent{Resource: fwk.PersistentVolumeClaim, ActionType: fwk.Add | fwk.Update}.Label(),
		fwk.ClusterEvent{Resource: fwk.StorageClass, ActionType: fwk.Add | fwk.Update}.Label(),
		fwk.ClusterEvent{Resource: fwk.CSINode, ActionType: fwk.Add | fwk.Update}.Label(),
		fwk.ClusterEvent{Resource: fwk.CSIDriver, ActionType: fwk.Update}.Label(),
		fwk.ClusterEvent{Resource: fwk.CSIStorageCapacity, ActionType: fwk.Add | fwk.Update}.Label(),
		fwk.ClusterEvent{Resource: fwk.VolumeAttachment, ActionType: fwk.Delete}.Label(),
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("events with hints (-want +got):\n%s", diff)
	}
}

// TestDeviceHints: a member is retried on a device event only when the
// event can give devices (freed, published, a class changed, or its own
// claim created) and its gang has a member that takes devices.
func TestDeviceHints(t *testing.T) {
	_, _, _, h := hintFixture(t)
	g := hintGangs
	events := h.events()
	claimEvent := fwk.ClusterEvent{Resource: fwk.ResourceClaim, ActionType: fwk.Update}
	claimNamed := func(name string) *st.ResourceClaimWrapper {
		return st.MakeResourceClaim().Namespace("ns").Name(name).UID(name).Request("gpu")
	}
	claim := claimNamed("other-gpu")
	allocated := claimNamed("other-gpu").Allocation(&resourceapi.AllocationResult{}).Obj()
	own := claimNamed("gpu-0-gpu")
	slice := st.MakeResourceSlice("n1", "gpu.example.com").Obj()
	class := &resourceapi.DeviceClass{ObjectMeta: metav1.ObjectMeta{Name: "gpu", Generation: 1}}
	respecced := class.DeepCopy()
	respecced.Generation = 2
	relabelled := class.DeepCopy()
	relabelled.Labels = map[string]string{"team": "a"}
	tests := []struct {
		name           string
		event          fwk.ClusterEvent
		pod            *v1.Pod
		oldObj, newObj any
		want           fwk.QueueingHint
	}{
		{name: "claim deallocated, a member taking devices", event: claimEvent, pod: g.gpu, oldObj: allocated, newObj: claim.Obj(), want: fwk.Queue},
		{name: "claim deallocated, its sibling", event: claimEvent, pod: g.gpuDriver, oldObj: allocated, newObj: claim.Obj(), want: fwk.Queue},
		{name: "claim deallocated, a member requesting a DRA extended resource", event: claimEvent, pod: g.extDriver, oldObj: allocated, newObj: claim.Obj(), want: fwk.Queue},
		{name: "claim deallocated, a plain gang", event: claimEvent, pod: g.plain, oldObj: allocated, newObj: claim.Obj(), want: fwk.QueueSkip},
		{name: "claim deallocated, a gang of volumes", event: claimEvent, pod: g.disk, oldObj: allocated, newObj: claim.Obj(), want: fwk.QueueSkip},
		{name: "claim allocated to another pod", event: claimEvent, pod: g.gpuDriver, oldObj: claim.Obj(), newObj: allocated, want: fwk.QueueSkip},
		{name: "allocated claim deleted", event: claimEvent, pod: g.gpuDriver, oldObj: allocated, want: fwk.Queue},
		{name: "claim deleted unallocated", event: claimEvent, pod: g.gpuDriver, oldObj: claim.Obj(), want: fwk.QueueSkip},
		{name: "claim deleted, final state unknown", event: claimEvent, pod: g.gpuDriver, oldObj: cache.DeletedFinalStateUnknown{Key: "ns/other-gpu", Obj: claim.Obj()}, want: fwk.Queue},
		{name: "claim deleted, final state unknown, a plain gang", event: claimEvent, pod: g.plain, oldObj: cache.DeletedFinalStateUnknown{Key: "ns/other-gpu", Obj: claim.Obj()}, want: fwk.QueueSkip},
		{name: "own claim created", event: claimEvent, pod: g.gpu, newObj: own.Obj(), want: fwk.Queue},
		{name: "a sibling's claim created", event: claimEvent, pod: g.gpuDriver, newObj: own.Obj(), want: fwk.QueueSkip},
		{name: "own claim's status changed", event: claimEvent, pod: g.gpu, oldObj: own.Obj(), newObj: claimNamed("gpu-0-gpu").ReservedForPod("gpu-0", "gpu-0").Obj(), want: fwk.Queue},
		{name: "own claim's metadata changed", event: claimEvent, pod: g.gpu, oldObj: own.Obj(), newObj: claimNamed("gpu-0-gpu").Annotations(map[string]string{"a": "b"}).Obj(), want: fwk.QueueSkip},
		{name: "own claim created, a pod in no gang", event: claimEvent, pod: g.loneGPU, newObj: claimNamed("lone-gpu").Obj(), want: fwk.QueueSkip},
		{name: "another claim created", event: claimEvent, pod: g.gpu, newObj: claim.Obj(), want: fwk.QueueSkip},

		{name: "slice published", event: fwk.ClusterEvent{Resource: fwk.ResourceSlice, ActionType: fwk.Add}, pod: g.gpuDriver, newObj: slice, want: fwk.Queue},
		{name: "slice changed", event: fwk.ClusterEvent{Resource: fwk.ResourceSlice, ActionType: fwk.Update}, pod: g.gpu, oldObj: slice, newObj: slice, want: fwk.Queue},
		{name: "slice published, a plain gang", event: fwk.ClusterEvent{Resource: fwk.ResourceSlice, ActionType: fwk.Add}, pod: g.plain, newObj: slice, want: fwk.QueueSkip},
		{name: "slice published, a pod in no gang", event: fwk.ClusterEvent{Resource: fwk.ResourceSlice, ActionType: fwk.Add}, pod: g.loneGPU, newObj: slice, want: fwk.QueueSkip},

		{name: "class created", event: fwk.ClusterEvent{Resource: fwk.DeviceClass, ActionType: fwk.Add}, pod: g.gpuDriver, newObj: class, want: fwk.Queue},
		{name: "class respecified", event: fwk.ClusterEvent{Resource: fwk.DeviceClass, ActionType: fwk.Update}, pod: g.ext, oldObj: class, newObj: respecced, want: fwk.Queue},
		{name: "class relabelled", event: fwk.ClusterEvent{Resource: fwk.DeviceClass, ActionType: fwk.Update}, pod: g.gpu, oldObj: class, newObj: relabelled, want: fwk.QueueSkip},
		{name: "class created, a plain gang", event: fwk.ClusterEvent{Resource: fwk.DeviceClass, ActionType: fwk.Add}, pod: g.plain, newObj: class, want: fwk.QueueSkip},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			logger, _ := ktesting.NewTestContext(t)
			got, err := hintFor(t, events, tt.event)(logger, tt.pod, tt.oldObj, tt.newObj)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("hint (-want +got):\n%s", diff)
			}
		})
	}
}

// TestVolumeHints: a member is retried on a volume event only when the
// event can give volumes (a volume free to bind, its own claim created,
// room for more volumes) and its gang has a member that takes volumes.
func TestVolumeHints(t *testing.T) {
	_, _, _, h := hintFixture(t)
	g := hintGangs
	events := h.events()
	pvEvent := fwk.ClusterEvent{Resource: fwk.PersistentVolume, ActionType: fwk.Update}
	pv := st.MakePersistentVolume().Name("pv").StorageClassName("local").Obj()
	bound, prebound, released := pv.DeepCopy(), pv.DeepCopy(), pv.DeepCopy()
	bound.Spec.ClaimRef = &v1.ObjectReference{Namespace: "x", Name: "data", UID: "x-data"}
	prebound.Spec.ClaimRef = &v1.ObjectReference{Namespace: "ns", Name: "disk-0-data"}
	released.Status.Phase = v1.VolumeReleased
	released.Spec.ClaimRef = bound.Spec.ClaimRef
	pvcEvent := fwk.ClusterEvent{Resource: fwk.PersistentVolumeClaim, ActionType: fwk.Add}
	pvc := func(ns, name string) *v1.PersistentVolumeClaim {
		return st.MakePersistentVolumeClaim().Namespace(ns).Name(name).Obj()
	}
	scEvent := fwk.ClusterEvent{Resource: fwk.StorageClass, ActionType: fwk.Update}
	sc := st.MakeStorageClass().Name("local").Obj()
	zoned := st.MakeStorageClass().Name("local").AllowedTopologies([]v1.TopologySelectorTerm{{
		MatchLabelExpressions: []v1.TopologySelectorLabelRequirement{{Key: v1.LabelTopologyZone, Values: []string{"a"}}},
	}}).Obj()
	relabelled := st.MakeStorageClass().Name("local").Label("team", "a").Obj()
	csiNodeEvent := fwk.ClusterEvent{Resource: fwk.CSINode, ActionType: fwk.Update}
	csiNode := func(limit int32, migrated string) *storagev1.CSINode {
		n := &storagev1.CSINode{ObjectMeta: metav1.ObjectMeta{Name: "n1", Annotations: map[string]string{v1.MigratedPluginsAnnotationKey: migrated}}}
		n.Spec.Drivers = []storagev1.CSINodeDriver{{Name: "disk.example.com", Allocatable: &storagev1.VolumeNodeResources{Count: ptr.To(limit)}}}
		return n
	}
	driverEvent := fwk.ClusterEvent{Resource: fwk.CSIDriver, ActionType: fwk.Update}
	driver := func(capacity bool) *storagev1.CSIDriver {
		return &storagev1.CSIDriver{ObjectMeta: metav1.ObjectMeta{Name: "disk.example.com"}, Spec: storagev1.CSIDriverSpec{StorageCapacity: ptr.To(capacity)}}
	}
	capacityEvent := fwk.ClusterEvent{Resource: fwk.CSIStorageCapacity, ActionType: fwk.Update}
	capacity := func(q string) *storagev1.CSIStorageCapacity {
		return &storagev1.CSIStorageCapacity{ObjectMeta: metav1.ObjectMeta{Namespace: "kube-system", Name: "c"}, StorageClassName: "local", Capacity: ptr.To(resource.MustParse(q))}
	}
	attachment := &storagev1.VolumeAttachment{ObjectMeta: metav1.ObjectMeta{Name: "va"}}
	tests := []struct {
		name           string
		event          fwk.ClusterEvent
		pod            *v1.Pod
		oldObj, newObj any
		want           fwk.QueueingHint
	}{
		{name: "volume created, a member taking volumes", event: pvEvent, pod: g.disk, newObj: pv, want: fwk.Queue},
		{name: "volume created, its sibling", event: pvEvent, pod: g.diskDriver, newObj: pv, want: fwk.Queue},
		{name: "volume created, a member with an ephemeral volume", event: pvEvent, pod: g.scratch, newObj: pv, want: fwk.Queue},
		{name: "volume created, a plain gang", event: pvEvent, pod: g.plain, newObj: pv, want: fwk.QueueSkip},
		{name: "volume created, a gang of devices", event: pvEvent, pod: g.gpu, newObj: pv, want: fwk.QueueSkip},
		{name: "volume created, a pod in no gang", event: pvEvent, pod: g.lone, newObj: pv, want: fwk.QueueSkip},
		{name: "volume bound", event: pvEvent, pod: g.diskDriver, oldObj: pv, newObj: bound, want: fwk.QueueSkip},
		{name: "volume released", event: pvEvent, pod: g.diskDriver, oldObj: bound, newObj: released, want: fwk.QueueSkip},
		{name: "released volume's claimRef cleared", event: pvEvent, pod: g.diskDriver, oldObj: released, newObj: pv, want: fwk.Queue},
		{name: "volume pre-bound to a member's claim", event: pvEvent, pod: g.diskDriver, oldObj: pv, newObj: prebound, want: fwk.Queue},

		{name: "own claim created", event: pvcEvent, pod: g.disk, newObj: pvc("ns", "disk-0-data"), want: fwk.Queue},
		{name: "own ephemeral claim created", event: pvcEvent, pod: g.scratch, newObj: pvc("ns", "scratch-0-tmp"), want: fwk.Queue},
		{name: "own claim bound", event: pvcEvent, pod: g.disk, oldObj: pvc("ns", "disk-0-data"), newObj: st.MakePersistentVolumeClaim().Namespace("ns").Name("disk-0-data").VolumeName("pv").Obj(), want: fwk.Queue},
		{name: "a sibling's claim created", event: pvcEvent, pod: g.diskDriver, newObj: pvc("ns", "disk-0-data"), want: fwk.QueueSkip},
		{name: "own claim created, a pod in no gang", event: pvcEvent, pod: g.lone, newObj: pvc("ns", "lone-data"), want: fwk.QueueSkip},
		{name: "a claim of that name in another namespace", event: pvcEvent, pod: g.disk, newObj: pvc("other", "disk-0-data"), want: fwk.QueueSkip},

		{name: "class created", event: scEvent, pod: g.diskDriver, newObj: sc, want: fwk.Queue},
		{name: "class's topologies changed", event: scEvent, pod: g.disk, oldObj: sc, newObj: zoned, want: fwk.Queue},
		{name: "class relabelled", event: scEvent, pod: g.disk, oldObj: sc, newObj: relabelled, want: fwk.QueueSkip},
		{name: "class created, a plain gang", event: scEvent, pod: g.plainOther, newObj: sc, want: fwk.QueueSkip},

		{name: "CSINode created", event: csiNodeEvent, pod: g.disk, newObj: csiNode(8, ""), want: fwk.Queue},
		{name: "attach limit raised", event: csiNodeEvent, pod: g.diskDriver, oldObj: csiNode(8, ""), newObj: csiNode(16, ""), want: fwk.Queue},
		{name: "attach limit lowered", event: csiNodeEvent, pod: g.disk, oldObj: csiNode(8, ""), newObj: csiNode(4, ""), want: fwk.QueueSkip},
		{name: "migrated plugins changed", event: csiNodeEvent, pod: g.disk, oldObj: csiNode(8, ""), newObj: csiNode(8, "kubernetes.io/aws-ebs"), want: fwk.Queue},
		{name: "attach limit raised, a gang of devices", event: csiNodeEvent, pod: g.gpuDriver, oldObj: csiNode(8, ""), newObj: csiNode(16, ""), want: fwk.QueueSkip},

		{name: "driver's capacity no longer tracked", event: driverEvent, pod: g.disk, oldObj: driver(true), newObj: driver(false), want: fwk.Queue},
		{name: "driver's capacity tracked", event: driverEvent, pod: g.disk, oldObj: driver(false), newObj: driver(true), want: fwk.QueueSkip},

		{name: "capacity published", event: capacityEvent, pod: g.diskDriver, newObj: capacity("10Gi"), want: fwk.Queue},
		{name: "capacity grown", event: capacityEvent, pod: g.disk, oldObj: capacity("10Gi"), newObj: capacity("20Gi"), want: fwk.Queue},
		{name: "capacity shrunk", event: capacityEvent, pod: g.disk, oldObj: capacity("10Gi"), newObj: capacity("5Gi"), want: fwk.QueueSkip},
		{name: "capacity published, a plain gang", event: capacityEvent, pod: g.plain, newObj: capacity("10Gi"), want: fwk.QueueSkip},

		{name: "volume detached", event: fwk.ClusterEvent{Resource: fwk.VolumeAttachment, ActionType: fwk.Delete}, pod: g.diskDriver, oldObj: attachment, want: fwk.Queue},
		{name: "volume detached, a plain gang", event: fwk.ClusterEvent{Resource: fwk.VolumeAttachment, ActionType: fwk.Delete}, pod: g.plain, oldObj: attachment, want: fwk.QueueSkip},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			logger, _ := ktesting.NewTestContext(t)
			got, err := hintFor(t, events, tt.event)(logger, tt.pod, tt.oldObj, tt.newObj)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("hint (-want +got):\n%s", diff)
			}
		})
	}
}

// TestDeviceHintFollowsGang: what the hints keep of a gang holds only
// until the gang changes. A plain gang is skipped on a published slice
// until a member with a claim joins it, then retried, and skipped again
// once that member is bound (no pending member takes devices).
func TestDeviceHintFollowsGang(t *testing.T) {
	ctx, kube, manager, h := hintFixture(t)
	hint := hintFor(t, h.events(), fwk.ClusterEvent{Resource: fwk.ResourceSlice, ActionType: fwk.Add})
	slice := st.MakeResourceSlice("n1", "gpu.example.com").Obj()
	logger, _ := ktesting.NewTestContext(t)
	check := func(step string, want fwk.QueueingHint) {
		t.Helper()
		got, err := hint(logger, hintGangs.plain, nil, slice)
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("%s: hint (-want +got):\n%s", step, diff)
		}
	}
	check("a plain gang", fwk.QueueSkip)

	key, _ := manager.KeyOf(hintGangs.plain)
	gpu := hintMember("plain", "plain-gpu").
		PodResourceClaims(v1.PodResourceClaim{Name: "gpu", ResourceClaimName: ptr.To("plain-gpu-gpu")}).Obj()
	if _, err := kube.CoreV1().Pods("ns").Create(ctx, gpu, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitUntil(ctx, t, "the gang state to see the new member", func() bool { return manager.HasMember(key, gpu.UID) })
	check("a member with a claim joined", fwk.Queue)

	gpu.Spec.NodeName = "n1"
	if _, err := kube.CoreV1().Pods("ns").Update(ctx, gpu, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitUntil(ctx, t, "the gang state to see the member bound", func() bool { return manager.IsAllocated(key, gpu.UID) })
	check("the member with a claim bound", fwk.QueueSkip)
}

// TestRoomHintsSkipRefusedGangs: room freed (a bound pod deleted) or a
// node added requeues a member of a valid gang, not one of a gang refused
// at PreEnqueue as invalid: room cannot make it valid, and the gang state
// wakes its members when it turns valid.
func TestRoomHintsSkipRefusedGangs(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	short := st.MakePod().Namespace("ns").Name("short-0").UID("short-0").
		Labels(map[string]string{v1alpha1.LabelPodGroup: "short", v1alpha1.LabelMinAvailable: "3"}).Obj()
	valid := hintGangs.plain.DeepCopy()
	_, manager, _, _ := orderFixture(ctx, t, []runtime.Object{short.DeepCopy(), valid.DeepCopy(), hintGangs.plainOther.DeepCopy()}, 0)
	pl := &Plugin{manager: manager}
	for _, p := range []*v1.Pod{short, valid} {
		if _, invalid, _ := manager.Observe(p); (invalid != "") != (p == short) {
			t.Fatalf("Observe(%s): invalid %q", p.Name, invalid)
		}
	}
	events, err := pl.EventsToRegister(ctx)
	if err != nil {
		t.Fatal(err)
	}
	bound := st.MakePod().Namespace("ns").Name("web").Node("n").Obj()
	node := st.MakeNode().Name("n").Obj()
	tests := []struct {
		name           string
		event          fwk.ClusterEvent
		oldObj, newObj any
		pod            *v1.Pod
		want           fwk.QueueingHint
	}{
		{"bound pod deleted, valid gang", fwk.ClusterEvent{Resource: fwk.Pod, ActionType: fwk.Delete}, bound, nil, valid, fwk.Queue},
		{"bound pod deleted, refused gang", fwk.ClusterEvent{Resource: fwk.Pod, ActionType: fwk.Delete}, bound, nil, short, fwk.QueueSkip},
		{"node added, valid gang", fwk.ClusterEvent{Resource: fwk.Node, ActionType: fwk.Add}, nil, node, valid, fwk.Queue},
		{"node added, refused gang", fwk.ClusterEvent{Resource: fwk.Node, ActionType: fwk.Add}, nil, node, short, fwk.QueueSkip},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := hintFor(t, events, tc.event)(klog.FromContext(ctx), tc.pod, tc.oldObj, tc.newObj)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("hint (-want +got):\n%s", diff)
			}
		})
	}
}

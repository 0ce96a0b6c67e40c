package placement

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	utilfeature "k8s.io/apiserver/pkg/util/feature"
	"k8s.io/client-go/informers"
	clientsetfake "k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/cache"
	"k8s.io/dynamic-resource-allocation/deviceclass/extendedresourcecache"
	resourceslicetracker "k8s.io/dynamic-resource-allocation/resourceslice/tracker"
	"k8s.io/klog/v2"
	"k8s.io/klog/v2/ktesting"
	fwk "k8s.io/kube-scheduler/framework"
	internalcache "k8s.io/kubernetes/pkg/scheduler/backend/cache"
	internalqueue "k8s.io/kubernetes/pkg/scheduler/backend/queue"
	"k8s.io/kubernetes/pkg/scheduler/framework/plugins/defaultbinder"
	"k8s.io/kubernetes/pkg/scheduler/framework/plugins/dynamicresources"
	"k8s.io/kubernetes/pkg/scheduler/framework/plugins/feature"
	"k8s.io/kubernetes/pkg/scheduler/framework/plugins/queuesort"
	"k8s.io/kubernetes/pkg/scheduler/framework/plugins/volumebinding"
	frameworkruntime "k8s.io/kubernetes/pkg/scheduler/framework/runtime"
	"k8s.io/kubernetes/pkg/scheduler/metrics"
	st "k8s.io/kubernetes/pkg/scheduler/testing"
	tf "k8s.io/kubernetes/pkg/scheduler/testing/framework"
	"k8s.io/kubernetes/pkg/scheduler/util/assumecache"
	"k8s.io/utils/ptr"

	"github.com/muster-sched/muster/pkg/gang"
)

// deviceCluster is nodes n-0, n-1, … each publishing devices of the
// driver and holding local volumes of storage class "local"
// (WaitForFirstConsumer), with DynamicResources and VolumeBinding in the
// profile, as kube-scheduler sets them up.
type deviceCluster struct {
	pl  *Placer
	dra fwk.SharedDRAManager
}

const testDriver = "gpu.example.com"

func newDeviceCluster(t *testing.T, nodes, devicesPerNode, volumesPerNode int, objs ...runtime.Object) *deviceCluster {
	t.Helper()
	metrics.Register()
	_, ctx := ktesting.NewTestContext(t)
	ctx, cancel := context.WithCancel(ctx)
	var nodeObjs []*v1.Node
	objs = append(objs,
		&resourceapi.DeviceClass{ObjectMeta: metav1.ObjectMeta{Name: "gpu"}, Spec: resourceapi.DeviceClassSpec{ExtendedResourceName: ptr.To(string(gpuResource))}},
		&storagev1.StorageClass{ObjectMeta: metav1.ObjectMeta{Name: "local"}, Provisioner: "kubernetes.io/no-provisioner",
			VolumeBindingMode: ptr.To(storagev1.VolumeBindingWaitForFirstConsumer)})
	for i := range nodes {
		name := fmt.Sprintf("n-%d", i)
		node := st.MakeNode().Name(name).Label(v1.LabelHostname, name).
			Capacity(map[v1.ResourceName]string{v1.ResourceCPU: "8", v1.ResourcePods: "10"}).Obj()
		nodeObjs = append(nodeObjs, node)
		objs = append(objs, node, resourceSlice(name, devicesPerNode))
		for j := range volumesPerNode {
			objs = append(objs, localVolume(fmt.Sprintf("pv-%s-%d", name, j), name))
		}
	}
	client := clientsetfake.NewClientset(objs...)
	informerFactory := informers.NewSharedInformerFactory(client, 0)
	t.Cleanup(func() {
		cancel() // before Shutdown, which waits for the informers to stop
		informerFactory.Shutdown()
	})
	tracker, err := resourceslicetracker.StartTracker(ctx, resourceslicetracker.Options{
		SliceInformer: informerFactory.Resource().V1().ResourceSlices(),
		KubeClient:    client,
	})
	if err != nil {
		t.Fatal(err)
	}
	claims := assumecache.NewAssumeCache(klog.FromContext(ctx), informerFactory.Resource().V1().ResourceClaims().Informer(), "ResourceClaim", "", nil)
	synced := claims.AddEventHandler(cache.ResourceEventHandlerFuncs{})
	dra := dynamicresources.NewDRAManager(ctx, claims, tracker, informerFactory)
	// As kube-scheduler's event handlers: device classes name the extended
	// resources they provide.
	classes, err := informerFactory.Resource().V1().DeviceClasses().Informer().AddEventHandler(
		dra.DeviceClassResolver().(*extendedresourcecache.ExtendedResourceCache))
	if err != nil {
		t.Fatal(err)
	}
	fts := feature.NewSchedulerFeaturesFromGates(utilfeature.DefaultFeatureGate)
	fw, err := tf.NewFramework(ctx, []tf.RegisterPluginFunc{
		tf.RegisterQueueSortPlugin(queuesort.Name, queuesort.New),
		tf.RegisterBindPlugin(defaultbinder.Name, defaultbinder.New),
		tf.RegisterPluginAsExtensions(volumebinding.Name, frameworkruntime.FactoryAdapter(fts, volumebinding.New), "PreFilter", "Filter", "Reserve"),
		tf.RegisterPluginAsExtensions(dynamicresources.Name, frameworkruntime.FactoryAdapter(fts, dynamicresources.New), "PreFilter", "Filter", "Reserve"),
	}, "",
		frameworkruntime.WithClientSet(client),
		frameworkruntime.WithSnapshotSharedLister(internalcache.NewSnapshot(nil, nodeObjs)),
		frameworkruntime.WithInformerFactory(informerFactory),
		frameworkruntime.WithSharedDRAManager(dra),
		frameworkruntime.WithPodNominator(internalqueue.NewSchedulingQueue(nil, informerFactory)),
	)
	if err != nil {
		t.Fatal(err)
	}
	informerFactory.Start(ctx.Done())
	informerFactory.WaitForCacheSync(ctx.Done())
	cache.WaitFor(ctx, "event handlers", synced.HasSyncedChecker(), classes.HasSyncedChecker())
	return &deviceCluster{pl: &Placer{Handle: fw, Framework: fw}, dra: dra}
}

// inFlight lists the devices allocated in memory only: none, once a
// trial ends.
func (c *deviceCluster) inFlight(t *testing.T) []string {
	t.Helper()
	devices, err := c.dra.ResourceClaims().ListAllAllocatedDevices()
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for d := range devices {
		out = append(out, d.String())
	}
	return out
}

func resourceSlice(node string, devices int) *resourceapi.ResourceSlice {
	s := &resourceapi.ResourceSlice{
		ObjectMeta: metav1.ObjectMeta{Name: node + "-" + testDriver},
		Spec: resourceapi.ResourceSliceSpec{
			Driver:   testDriver,
			NodeName: ptr.To(node),
			Pool:     resourceapi.ResourcePool{Name: node, ResourceSliceCount: 1},
		},
	}
	for i := range devices {
		s.Spec.Devices = append(s.Spec.Devices, resourceapi.Device{Name: fmt.Sprintf("gpu-%d", i)})
	}
	return s
}

func localVolume(name, node string) *v1.PersistentVolume {
	return &v1.PersistentVolume{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: v1.PersistentVolumeSpec{
			Capacity:                      v1.ResourceList{v1.ResourceStorage: resource.MustParse("1Gi")},
			AccessModes:                   []v1.PersistentVolumeAccessMode{v1.ReadWriteOnce},
			StorageClassName:              "local",
			PersistentVolumeReclaimPolicy: v1.PersistentVolumeReclaimRetain,
			PersistentVolumeSource:        v1.PersistentVolumeSource{Local: &v1.LocalVolumeSource{Path: "/mnt/" + name}},
			NodeAffinity: &v1.VolumeNodeAffinity{Required: &v1.NodeSelector{NodeSelectorTerms: []v1.NodeSelectorTerm{{
				MatchExpressions: []v1.NodeSelectorRequirement{{Key: v1.LabelHostname, Operator: v1.NodeSelectorOpIn, Values: []string{node}}},
			}}}},
		},
		Status: v1.PersistentVolumeStatus{Phase: v1.VolumeAvailable},
	}
}

// deviceMember is a member with its own claim to one device: the pod and
// the claim.
func deviceMember(name string) (*v1.Pod, *resourceapi.ResourceClaim) {
	claim := &resourceapi.ResourceClaim{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name + "-gpu", UID: types.UID(name + "-gpu")},
		Spec: resourceapi.ResourceClaimSpec{Devices: resourceapi.DeviceClaim{Requests: []resourceapi.DeviceRequest{{
			Name: "gpu", Exactly: &resourceapi.ExactDeviceRequest{DeviceClassName: "gpu", AllocationMode: resourceapi.DeviceAllocationModeExactCount, Count: 1},
		}}}},
	}
	pod := st.MakePod().Namespace("ns").Name(name).UID(name).Label("gang", "g").Obj()
	pod.Spec.ResourceClaims = []v1.PodResourceClaim{{Name: "gpu", ResourceClaimName: ptr.To(claim.Name)}}
	return pod, claim
}

// gpuResource is the extended resource that device class "gpu" provides.
const gpuResource v1.ResourceName = "example.com/gpu"

// resourceMember is a member asking one gpuResource, as a pod of a
// device plugin's resource would: every such member is the same pod but
// for its name (no claim of its own; DRA makes one in its cycle).
func resourceMember(name string) *v1.Pod {
	return st.MakePod().Namespace("ns").Name(name).UID(name).Label("gang", "g").
		Req(map[v1.ResourceName]string{gpuResource: "1"}).Obj()
}

// volumeMember is a member with its own unbound claim to a local volume.
func volumeMember(name string) (*v1.Pod, *v1.PersistentVolumeClaim) {
	pvc := &v1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name + "-data", UID: types.UID(name + "-data")},
		Spec: v1.PersistentVolumeClaimSpec{
			StorageClassName: ptr.To("local"),
			AccessModes:      []v1.PersistentVolumeAccessMode{v1.ReadWriteOnce},
			Resources:        v1.VolumeResourceRequirements{Requests: v1.ResourceList{v1.ResourceStorage: resource.MustParse("1Gi")}},
		},
		Status: v1.PersistentVolumeClaimStatus{Phase: v1.ClaimPending},
	}
	pod := st.MakePod().Namespace("ns").Name(name).UID(name).Label("gang", "g").PVC(pvc.Name).Obj()
	return pod, pvc
}

// TestPlaceDevicesAndVolumes: each member is planned onto a device or a
// volume that no member before it took (DRA's in-flight allocations and
// VolumeBinding's assume cache carry them), members planned by an
// earlier step are placed again on their node, and nothing stays
// reserved once the trial ends. Without a score plugin, ties go to n-0:
// a member that did not see the devices taken before it would be planned
// there with them.
func TestPlaceDevicesAndVolumes(t *testing.T) {
	type kind int
	const (
		device kind = iota
		volume
		extended
	)
	tests := []struct {
		name             string
		devices, volumes int // per node, on 2 nodes
		planned          map[string]string
		members          []kind
		wantPlan         map[types.UID]string
		wantMsg          string
	}{
		{
			name: "4 device members on 2×2 devices", devices: 2,
			members:  []kind{device, device, device, device},
			wantPlan: map[types.UID]string{"m-0": "n-0", "m-1": "n-0", "m-2": "n-1", "m-3": "n-1"},
		},
		{
			name: "5 device members on 2×2 devices", devices: 2,
			members: []kind{device, device, device, device, device},
			wantMsg: "placeable 4/5: member m-4 fits no node: 2 cannot allocate all claims",
		},
		{
			name: "4 identical members of a DRA extended resource on 2×2 devices", devices: 2,
			members:  []kind{extended, extended, extended, extended},
			wantPlan: map[types.UID]string{"m-0": "n-0", "m-1": "n-0", "m-2": "n-1", "m-3": "n-1"},
		},
		{
			name: "5 identical members of a DRA extended resource on 2×2 devices", devices: 2,
			members: []kind{extended, extended, extended, extended, extended},
			wantMsg: "placeable 4/5: member m-4 fits no node: 2 cannot allocate all claims",
		},
		{
			name: "2 volume members on 2×1 volumes", volumes: 1,
			members:  []kind{volume, volume},
			wantPlan: map[types.UID]string{"m-0": "n-0", "m-1": "n-1"},
		},
		{
			name: "3 volume members on 2×1 volumes", volumes: 1,
			members: []kind{volume, volume, volume},
			wantMsg: "placeable 2/3: member m-2 fits no node: 2 node(s) didn't find available persistent volumes to bind",
		},
		{
			name: "devices and volumes mixed", devices: 1, volumes: 1,
			members:  []kind{device, volume, device, volume},
			wantPlan: map[types.UID]string{"m-0": "n-0", "m-1": "n-0", "m-2": "n-1", "m-3": "n-1"},
		},
		{
			name: "a device member planned by an earlier step", devices: 2,
			planned:  map[string]string{"m-0": "n-0"},
			members:  []kind{device, device, device, device},
			wantPlan: map[types.UID]string{"m-1": "n-0", "m-2": "n-1", "m-3": "n-1"},
		},
		{
			name: "device members planned by an earlier step that no longer fit", devices: 2,
			planned: map[string]string{"m-0": "n-0", "m-1": "n-0", "m-2": "n-0"},
			members: []kind{device, device, device, device},
			wantMsg: "placeable 2/4: member m-2 no longer fits its planned node n-0: cannot allocate all claims",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var objs []runtime.Object
			var pods []*v1.Pod
			for i, k := range tt.members {
				name := fmt.Sprintf("m-%d", i)
				switch k {
				case device:
					pod, claim := deviceMember(name)
					pods, objs = append(pods, pod), append(objs, claim)
				case volume:
					pod, pvc := volumeMember(name)
					pods, objs = append(pods, pod), append(objs, pvc)
				case extended:
					pods = append(pods, resourceMember(name))
				}
			}
			c := newDeviceCluster(t, 2, tt.devices, tt.volumes, objs...)
			var planned []PodOnNode
			var members []*v1.Pod
			for _, p := range pods {
				if node, ok := tt.planned[p.Name]; ok {
					planned = append(planned, PodOnNode{Pod: p, Node: node})
				} else {
					members = append(members, p)
				}
			}
			trial := Trial{Members: members, Planned: planned, Placed: int32(len(planned)), MinMember: int32(len(pods))}
			// Twice: the first trial must leave nothing reserved behind it.
			for range 2 {
				plan, msg, err := c.pl.Place(context.Background(), trial)
				if err != nil {
					t.Fatal(err)
				}
				if !strings.HasPrefix(msg, tt.wantMsg) || (msg == "") != (tt.wantMsg == "") {
					t.Errorf("message %q, want %q", msg, tt.wantMsg)
				}
				if diff := cmp.Diff(tt.wantPlan, plan.Nodes()); diff != "" {
					t.Errorf("plan (-want +got):\n%s", diff)
				}
				if in := c.inFlight(t); len(in) > 0 {
					t.Errorf("devices still allocated after the trial: %v", in)
				}
			}
		})
	}
}

// reserveLog is a Reserve plugin that logs its calls, and fails or
// rejects the pods named in fail.
type reserveLog struct {
	log  []string
	fail map[string]*fwk.Status
}

func (r *reserveLog) Name() string { return "ReserveLog" }

func (r *reserveLog) Reserve(_ context.Context, state fwk.CycleState, pod *v1.Pod, node string) *fwk.Status {
	r.log = append(r.log, fmt.Sprintf("reserve %s %s trial=%t", pod.Name, node, gang.IsTrial(state)))
	return r.fail[pod.Name]
}

func (r *reserveLog) Unreserve(_ context.Context, _ fwk.CycleState, pod *v1.Pod, node string) {
	r.log = append(r.log, fmt.Sprintf("unreserve %s %s", pod.Name, node))
}

var _ fwk.ReservePlugin = &reserveLog{}

// TestPlaceReserves: only members with claims are reserved, in order,
// with their trial cycle state; all are unreserved when the trial ends,
// last first, whether it succeeds or not; a member whose Reserve fails is
// unreserved at once.
func TestPlaceReserves(t *testing.T) {
	metrics.Register()
	withClaim := func(name string) *v1.Pod {
		p := st.MakePod().Namespace("ns").Name(name).UID(name).Obj()
		p.Spec.ResourceClaims = []v1.PodResourceClaim{{Name: "c", ResourceClaimName: ptr.To(name)}}
		return p
	}
	plain := func(name string) *v1.Pod { return st.MakePod().Namespace("ns").Name(name).UID(name).Obj() }
	tests := []struct {
		name    string
		planned []PodOnNode
		members []*v1.Pod
		fail    map[string]*fwk.Status
		wantLog []string
		wantMsg string
		wantErr bool
	}{
		{
			name:    "members with claims, and one without",
			members: []*v1.Pod{withClaim("a"), plain("b"), withClaim("c")},
			wantLog: []string{"reserve a n-0 trial=true", "reserve c n-0 trial=true", "unreserve c n-0", "unreserve a n-0"},
		},
		{
			name:    "a member planned by an earlier step is reserved first",
			planned: []PodOnNode{{Pod: withClaim("a"), Node: "n-1"}, {Pod: plain("b"), Node: "n-1"}},
			members: []*v1.Pod{withClaim("c")},
			wantLog: []string{"reserve a n-1 trial=true", "reserve c n-0 trial=true", "unreserve c n-0", "unreserve a n-1"},
		},
		{
			name:    "a Reserve that fails",
			members: []*v1.Pod{withClaim("a"), withClaim("b"), withClaim("c")},
			fail:    map[string]*fwk.Status{"b": fwk.AsStatus(fmt.Errorf("broken"))},
			wantLog: []string{"reserve a n-0 trial=true", "reserve b n-0 trial=true", "unreserve b n-0", "unreserve a n-0"},
			wantErr: true,
		},
		{
			name:    "a Reserve that rejects",
			members: []*v1.Pod{withClaim("a"), withClaim("b")},
			fail:    map[string]*fwk.Status{"b": fwk.NewStatus(fwk.Unschedulable, "taken")},
			wantLog: []string{"reserve a n-0 trial=true", "reserve b n-0 trial=true", "unreserve b n-0", "unreserve a n-0"},
			wantMsg: "placeable 1/2: member b cannot be reserved on node n-0: taken",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, ctx := ktesting.NewTestContext(t)
			nodes := []*v1.Node{st.MakeNode().Name("n-0").Obj(), st.MakeNode().Name("n-1").Obj()}
			rl := &reserveLog{fail: tt.fail}
			informerFactory := informers.NewSharedInformerFactory(clientsetfake.NewClientset(), 0)
			fw, err := tf.NewFramework(ctx, []tf.RegisterPluginFunc{
				tf.RegisterQueueSortPlugin(queuesort.Name, queuesort.New),
				tf.RegisterBindPlugin(defaultbinder.Name, defaultbinder.New),
				tf.RegisterReservePlugin(rl.Name(), func(context.Context, runtime.Object, fwk.Handle) (fwk.Plugin, error) { return rl, nil }),
			}, "",
				frameworkruntime.WithSnapshotSharedLister(internalcache.NewSnapshot(nil, nodes)),
				frameworkruntime.WithInformerFactory(informerFactory),
				frameworkruntime.WithPodNominator(internalqueue.NewSchedulingQueue(nil, informerFactory)),
			)
			if err != nil {
				t.Fatal(err)
			}
			pl := &Placer{Handle: fw, Framework: fw}
			_, msg, err := pl.Place(ctx, Trial{Members: tt.members, Planned: tt.planned,
				Placed: int32(len(tt.planned)), MinMember: int32(len(tt.planned) + len(tt.members))})
			if (err != nil) != tt.wantErr {
				t.Errorf("error %v, want one: %t", err, tt.wantErr)
			}
			if msg != tt.wantMsg {
				t.Errorf("message %q, want %q", msg, tt.wantMsg)
			}
			if diff := cmp.Diff(tt.wantLog, rl.log); diff != "" {
				t.Errorf("Reserve calls (-want +got):\n%s", diff)
			}
		})
	}
}

package integration

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/informers"
	"k8s.io/kubernetes/pkg/controller/volume/persistentvolume"
	"k8s.io/utils/ptr"
)

// Devices and local volumes for the cases of devices_test.go. Cluster-wide
// objects are named after the case's namespace and removed when it ends;
// so are the finalizers that no controller of this control plane would
// remove (claims' and volumes' protection).

const deviceDriver = "gpu.muster.test"

// deviceClass creates a DeviceClass for every device and returns its name.
func (e *env) deviceClass() string {
	e.t.Helper()
	name := "gpu-" + e.ns
	_, err := cluster.Client.ResourceV1().DeviceClasses().Create(e.ctx, &resourceapi.DeviceClass{
		ObjectMeta: metav1.ObjectMeta{Name: name},
	}, metav1.CreateOptions{})
	if err != nil {
		e.t.Fatal(err)
	}
	e.t.Cleanup(func() {
		_ = cluster.Client.ResourceV1().DeviceClasses().Delete(context.Background(), name, metav1.DeleteOptions{})
	})
	return name
}

// devices publishes count devices on each node, in a pool named after
// the node, as a DRA driver's kubelet plugin would.
func (e *env) devices(count int, nodes ...string) {
	e.t.Helper()
	for _, node := range nodes {
		slice := &resourceapi.ResourceSlice{
			ObjectMeta: metav1.ObjectMeta{Name: e.ns + "-" + node},
			Spec: resourceapi.ResourceSliceSpec{
				Driver:   deviceDriver,
				NodeName: ptr.To(node),
				Pool:     resourceapi.ResourcePool{Name: node, ResourceSliceCount: 1},
			},
		}
		for i := range count {
			slice.Spec.Devices = append(slice.Spec.Devices, resourceapi.Device{Name: fmt.Sprintf("gpu-%d", i)})
		}
		if _, err := cluster.Client.ResourceV1().ResourceSlices().Create(e.ctx, slice, metav1.CreateOptions{}); err != nil {
			e.t.Fatal(err)
		}
		e.t.Cleanup(func() {
			_ = cluster.Client.ResourceV1().ResourceSlices().Delete(context.Background(), slice.Name, metav1.DeleteOptions{})
		})
	}
}

// addDevice publishes one more device in node's slice (made by devices),
// as a driver does when a device comes up.
func (e *env) addDevice(node string) {
	e.t.Helper()
	slices := cluster.Client.ResourceV1().ResourceSlices()
	slice, err := slices.Get(e.ctx, e.ns+"-"+node, metav1.GetOptions{})
	if err != nil {
		e.t.Fatal(err)
	}
	slice.Spec.Devices = append(slice.Spec.Devices, resourceapi.Device{Name: fmt.Sprintf("gpu-%d", len(slice.Spec.Devices))})
	if _, err := slices.Update(e.ctx, slice, metav1.UpdateOptions{}); err != nil {
		e.t.Fatal(err)
	}
}

// withDevice gives pod a claim of its own, created here, to one device of
// the class.
func (e *env) withDevice(pod *v1.Pod, class string) *v1.Pod {
	e.t.Helper()
	claim := &resourceapi.ResourceClaim{
		ObjectMeta: metav1.ObjectMeta{Name: pod.Name + "-gpu", Namespace: e.ns},
		Spec: resourceapi.ResourceClaimSpec{Devices: resourceapi.DeviceClaim{Requests: []resourceapi.DeviceRequest{{
			Name: "gpu",
			Exactly: &resourceapi.ExactDeviceRequest{
				DeviceClassName: class, AllocationMode: resourceapi.DeviceAllocationModeExactCount, Count: 1,
			},
		}}}},
	}
	if _, err := cluster.Client.ResourceV1().ResourceClaims(e.ns).Create(e.ctx, claim, metav1.CreateOptions{}); err != nil {
		e.t.Fatal(err)
	}
	e.t.Cleanup(func() {
		claims := cluster.Client.ResourceV1().ResourceClaims(e.ns)
		_, _ = claims.Patch(context.Background(), claim.Name, types.MergePatchType, []byte(`{"metadata":{"finalizers":null}}`), metav1.PatchOptions{})
		_ = claims.Delete(context.Background(), claim.Name, metav1.DeleteOptions{})
	})
	pod.Spec.ResourceClaims = append(pod.Spec.ResourceClaims, v1.PodResourceClaim{Name: "gpu", ResourceClaimName: ptr.To(claim.Name)})
	pod.Spec.Containers[0].Resources.Claims = append(pod.Spec.Containers[0].Resources.Claims, v1.ResourceClaim{Name: "gpu"})
	return pod
}

// allocatedDevice returns the pool and device allocated to the claim of
// pod made by withDevice ("" if none).
func (e *env) allocatedDevice(pod string) (pool, device string) {
	e.t.Helper()
	claim, err := cluster.Client.ResourceV1().ResourceClaims(e.ns).Get(e.ctx, pod+"-gpu", metav1.GetOptions{})
	if err != nil {
		e.t.Fatal(err)
	}
	if a := claim.Status.Allocation; a != nil && len(a.Devices.Results) == 1 {
		return a.Devices.Results[0].Pool, a.Devices.Results[0].Device
	}
	return "", ""
}

// localStorage creates a StorageClass that binds when a pod is scheduled
// (WaitForFirstConsumer) and provisions nothing, and one local
// PersistentVolume of it on each node; it returns the class's name.
func (e *env) localStorage(nodes ...string) string {
	e.t.Helper()
	class := "local-" + e.ns
	_, err := cluster.Client.StorageV1().StorageClasses().Create(e.ctx, &storagev1.StorageClass{
		ObjectMeta:        metav1.ObjectMeta{Name: class},
		Provisioner:       "kubernetes.io/no-provisioner",
		VolumeBindingMode: ptr.To(storagev1.VolumeBindingWaitForFirstConsumer),
	}, metav1.CreateOptions{})
	if err != nil {
		e.t.Fatal(err)
	}
	e.t.Cleanup(func() {
		_ = cluster.Client.StorageV1().StorageClasses().Delete(context.Background(), class, metav1.DeleteOptions{})
	})
	for _, node := range nodes {
		e.localVolume(class, node)
	}
	return class
}

// localVolume creates a local PersistentVolume of the class on node.
func (e *env) localVolume(class, node string) {
	e.t.Helper()
	pv := &v1.PersistentVolume{
		ObjectMeta: metav1.ObjectMeta{Name: e.ns + "-" + node},
		Spec: v1.PersistentVolumeSpec{
			Capacity:                      v1.ResourceList{v1.ResourceStorage: resource.MustParse("1Gi")},
			AccessModes:                   []v1.PersistentVolumeAccessMode{v1.ReadWriteOnce},
			StorageClassName:              class,
			PersistentVolumeReclaimPolicy: v1.PersistentVolumeReclaimRetain,
			PersistentVolumeSource:        v1.PersistentVolumeSource{Local: &v1.LocalVolumeSource{Path: "/mnt/disk"}},
			NodeAffinity: &v1.VolumeNodeAffinity{Required: &v1.NodeSelector{NodeSelectorTerms: []v1.NodeSelectorTerm{{
				MatchExpressions: []v1.NodeSelectorRequirement{{Key: v1.LabelHostname, Operator: v1.NodeSelectorOpIn, Values: []string{node}}},
			}}}},
		},
	}
	if _, err := cluster.Client.CoreV1().PersistentVolumes().Create(e.ctx, pv, metav1.CreateOptions{}); err != nil {
		e.t.Fatal(err)
	}
	e.t.Cleanup(func() {
		pvs := cluster.Client.CoreV1().PersistentVolumes()
		_, _ = pvs.Patch(context.Background(), pv.Name, types.MergePatchType, []byte(`{"metadata":{"finalizers":null}}`), metav1.PatchOptions{})
		_ = pvs.Delete(context.Background(), pv.Name, metav1.DeleteOptions{})
	})
}

// withVolume gives pod a claim of its own, created here and unbound, to a
// volume of the class.
func (e *env) withVolume(pod *v1.Pod, class string) *v1.Pod {
	e.t.Helper()
	pvc := &v1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{Name: pod.Name + "-data", Namespace: e.ns},
		Spec: v1.PersistentVolumeClaimSpec{
			StorageClassName: ptr.To(class),
			AccessModes:      []v1.PersistentVolumeAccessMode{v1.ReadWriteOnce},
			Resources:        v1.VolumeResourceRequirements{Requests: v1.ResourceList{v1.ResourceStorage: resource.MustParse("1Gi")}},
		},
	}
	if _, err := cluster.Client.CoreV1().PersistentVolumeClaims(e.ns).Create(e.ctx, pvc, metav1.CreateOptions{}); err != nil {
		e.t.Fatal(err)
	}
	e.t.Cleanup(func() {
		pvcs := cluster.Client.CoreV1().PersistentVolumeClaims(e.ns)
		_, _ = pvcs.Patch(context.Background(), pvc.Name, types.MergePatchType, []byte(`{"metadata":{"finalizers":null}}`), metav1.PatchOptions{})
		_ = pvcs.Delete(context.Background(), pvc.Name, metav1.DeleteOptions{})
	})
	pod.Spec.Volumes = append(pod.Spec.Volumes, v1.Volume{Name: "data", VolumeSource: v1.VolumeSource{
		PersistentVolumeClaim: &v1.PersistentVolumeClaimVolumeSource{ClaimName: pvc.Name},
	}})
	return pod
}

// boundVolume returns the volume the PersistentVolumeClaim of pod made by
// withVolume is bound to ("" if none).
func (e *env) boundVolume(pod string) string {
	e.t.Helper()
	pvc, err := cluster.Client.CoreV1().PersistentVolumeClaims(e.ns).Get(e.ctx, pod+"-data", metav1.GetOptions{})
	if err != nil {
		e.t.Fatal(err)
	}
	if pvc.Status.Phase != v1.ClaimBound {
		return ""
	}
	return pvc.Spec.VolumeName
}

// waitVolumesChosen waits at most d until each pod's claim (made by
// withVolume) is named by a volume's claimRef: the scheduler's
// VolumeBinding writes it in PreBind, which a gang's members reach only
// once all of them are placed.
func (e *env) waitVolumesChosen(d time.Duration, pods ...string) {
	e.t.Helper()
	chosen := map[string]string{}
	err := wait.PollUntilContextTimeout(e.ctx, 20*time.Millisecond, d, true, func(ctx context.Context) (bool, error) {
		pvs, err := cluster.Client.CoreV1().PersistentVolumes().List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, nil // the deadline, or a failed List: try again until it
		}
		for _, pv := range pvs.Items {
			if ref := pv.Spec.ClaimRef; ref != nil && ref.Namespace == e.ns {
				chosen[strings.TrimSuffix(ref.Name, "-data")] = pv.Name
			}
		}
		for _, p := range pods {
			if chosen[p] == "" {
				return false, nil
			}
		}
		return true, nil
	})
	if err != nil {
		e.t.Fatalf("volumes not chosen for all of %v within %v (chosen: %v)", pods, d, chosen)
	}
}

// noFailedScheduling checks that no pod of the case failed a scheduling
// cycle for a reason containing why: a gang planned right binds without
// a member failing its real cycle for want of a device or a volume (and
// its gang being released and planned again).
func (e *env) noFailedScheduling(why string) {
	e.t.Helper()
	events, err := cluster.Client.EventsV1().Events(e.ns).List(e.ctx, metav1.ListOptions{})
	if err != nil {
		e.t.Fatal(err)
	}
	for _, ev := range events.Items {
		if ev.Reason == "FailedScheduling" && strings.Contains(ev.Note, why) {
			e.t.Errorf("pod %s failed a scheduling cycle: %s", ev.Regarding.Name, ev.Note)
		}
	}
}

// startPVController runs kube-controller-manager's PersistentVolume
// controller until the case ends: the scheduler's volume binding assumes a
// claim's volume, writes the volume's claimRef in PreBind and waits there
// for this controller to bind the claim.
func (e *env) startPVController() {
	e.t.Helper()
	ctx, cancel := context.WithCancel(e.ctx)
	factory := informers.NewSharedInformerFactory(cluster.Client, 0)
	ctrl, err := persistentvolume.NewController(ctx, persistentvolume.ControllerParameters{
		KubeClient: cluster.Client,
		// Resyncs retry API conflicts (kubernetes#85320), as upstream's
		// volume scheduling tests do.
		SyncPeriod:     2 * time.Second,
		VolumeInformer: factory.Core().V1().PersistentVolumes(),
		ClaimInformer:  factory.Core().V1().PersistentVolumeClaims(),
		ClassInformer:  factory.Storage().V1().StorageClasses(),
		PodInformer:    factory.Core().V1().Pods(),
		NodeInformer:   factory.Core().V1().Nodes(),
	})
	if err != nil {
		cancel()
		e.t.Fatal(err)
	}
	var wg sync.WaitGroup
	factory.Start(ctx.Done())
	wg.Go(func() { ctrl.Run(ctx) })
	e.t.Cleanup(func() {
		cancel()
		wg.Wait()
		factory.Shutdown()
	})
}

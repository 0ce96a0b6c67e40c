package deploy

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/klog/v2/ktesting"
	vcv1beta1 "volcano.sh/apis/pkg/apis/scheduling/v1beta1"
	vcclient "volcano.sh/apis/pkg/client/clientset/versioned"

	"github.com/muster-sched/muster/manifests/volcano"
	"github.com/muster-sched/muster/pkg/simulator"
)

var pytorchJobs = schema.GroupVersionResource{Group: "kubeflow.org", Version: "v1", Resource: "pytorchjobs"}

// TestTrainingOperatorVolcano runs Kubeflow's training-operator (v1.9.3)
// in volcano mode beside muster-scheduler with config/volcano.yaml, as a
// cluster that swapped Volcano's scheduler for Muster would. The operator
// creates a Volcano PodGroup per PyTorchJob, and creates the job's pods,
// annotated with it and for the scheduler `volcano`, only once the
// scheduler has moved the PodGroup from Pending to Inqueue (Volcano's
// enqueue): before any pod exists. On two nodes of 8 cpu:
//   - a job of 4 × 1 cpu goes Inqueue, binds whole and its PodGroup runs;
//   - a job of 4 × 4.5 cpu, more than the cluster has, stays Pending beside
//     it, with an Unschedulable condition that says why, so the operator
//     creates none of its pods, though each would fit alone;
//   - a job of 3 × 5 cpu is admitted (15 of 16 cpu) but cannot be placed
//     whole (one member per node): none of its pods binds, and its PodGroup
//     says why in an Unschedulable condition.
func TestTrainingOperatorVolcano(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	op := findTrainingOperator(t)
	installCRDs(t, ctx, volcano.FS)
	installCRDs(t, ctx, op.crdFile(t, "kubeflow.org_pytorchjobs.yaml"))
	r := installChart(t, ctx, "muster", "muster-volcano", "--set", "mode=replace-default,volcanoProfile=true")
	token := serviceAccountToken(t, ctx, r.namespace, r.fullname())
	config, err := os.ReadFile(filepath.Join(repoRoot, "config", "volcano.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	s := startSchedulerProcess(t, "muster-scheduler", processSpec{
		args:       r.container(t).Args,
		config:     config,
		kubeconfig: tokenKubeconfig(t, r.namespace+"-volcano.kubeconfig", token),
	})
	if _, err := s.waitLog(ctx, leaseAcquired("kube-system/kube-scheduler"), 30*time.Second); err != nil {
		t.Fatal(err)
	}
	w := newWorkload(t, ctx, "work-pytorch", "volcano", 2, simulator.NodeShape{CPU: "8", Memory: "32Gi"})
	t.Cleanup(func() { deleteServices(w.ns) })
	pods := watchJobPods(t, ctx, w.ns)
	o := startTrainingOperator(t, ctx, op, "kubeflow")
	j := newPyTorchWorkload(t, w, pods)

	// too-big first: a PodGroup that cannot be admitted must not hold
	// back the one behind it, as in vc-scheduler's enqueue.
	j.create("too-big", 3, "4500m")
	j.create("fits", 3, "1")
	j.waitCreated("fits", 4, 60*time.Second)
	j.waitBound("fits", 4, 30*time.Second)
	if pg := j.podGroup("fits"); pg.Spec.MinMember != 4 {
		t.Errorf("PodGroup fits: minMember %d, want the job's 4 replicas", pg.Spec.MinMember)
	}
	for _, p := range j.pods("fits") {
		if p.Spec.SchedulerName != "volcano" || p.Annotations[vcv1beta1.KubeGroupNameAnnotationKey] != "fits" {
			t.Errorf("pod %s: schedulerName %q, annotation %s=%q; want volcano and the job's PodGroup",
				p.Name, p.Spec.SchedulerName, vcv1beta1.KubeGroupNameAnnotationKey, p.Annotations[vcv1beta1.KubeGroupNameAnnotationKey])
		}
	}
	j.waitPhase("fits", 30*time.Second, vcv1beta1.PodGroupRunning)
	// Muster has admitted fits, created after it: too-big, whose minResources
	// exceed the cluster, was looked at and left Pending.
	j.waitPhase("too-big", 30*time.Second, vcv1beta1.PodGroupPending)
	j.waitUnschedulable("too-big", 30*time.Second, "cpu", "18")
	j.delete("fits")

	j.create("split", 2, "5")
	j.waitCreated("split", 3, 60*time.Second)
	j.waitUnschedulable("split", 30*time.Second, "Insufficient cpu")
	if phase := j.podGroup("split").Status.Phase; phase != vcv1beta1.PodGroupInqueue {
		t.Errorf("PodGroup split: phase %s, want Inqueue: admitted, not placed\n%s", phase, j.describe("split"))
	}

	s.stop()
	// Nothing changes from here: the scheduler is gone.
	if n := pods.bound("split"); n != 0 {
		t.Errorf("%d of 3 pods of job split bound, want none: the job cannot fit whole\n%s", n, j.describe("split"))
	}
	if n := pods.created("too-big"); n != 0 || j.podGroup("too-big").Status.Phase != vcv1beta1.PodGroupPending {
		t.Errorf("job too-big, larger than the cluster, has %d pods, want none and its PodGroup Pending\n%s", n, j.describe("too-big"))
	}
	for _, p := range []*schedulerProcess{s, o} {
		if lines := p.forbidden(); len(lines) > 0 {
			t.Errorf("RBAC refused the %s:\n%s", p.name, strings.Join(lines, "\n"))
		}
	}
}

// deleteServices deletes the Services of ns, as the garbage collector
// would once their job is gone.
func deleteServices(ns string) {
	ctx := context.Background()
	svcs, err := cluster.Client.CoreV1().Services(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		return
	}
	for _, s := range svcs.Items {
		_ = cluster.Client.CoreV1().Services(ns).Delete(ctx, s.Name, metav1.DeleteOptions{})
	}
}

// pytorchWorkload makes PyTorchJobs in a workload's namespace and watches
// their pods (labelled with jobLabel); a job's PodGroup has its name.
type pytorchWorkload struct {
	volcanoJobs
	dyn dynamic.Interface
}

func newPyTorchWorkload(t *testing.T, w *workload, pods *jobPods) pytorchWorkload {
	t.Helper()
	dyn, err := dynamic.NewForConfig(cluster.JSONConfig())
	if err != nil {
		t.Fatal(err)
	}
	vc, err := vcclient.NewForConfig(cluster.JSONConfig())
	if err != nil {
		t.Fatal(err)
	}
	return pytorchWorkload{dyn: dyn, volcanoJobs: volcanoJobs{
		workload: w, jobPods: pods, vc: vc, creator: "operator",
		podGroupName: func(_ context.Context, job string) (string, error) { return job, nil },
	}}
}

// create creates a PyTorchJob of one master and workers, each requesting
// cpu, running until deleted.
func (j pytorchWorkload) create(name string, workers int64, cpu string) {
	j.t.Helper()
	replica := func(n int64) map[string]any {
		return map[string]any{
			"replicas":      n,
			"restartPolicy": "Never",
			"template": map[string]any{
				"metadata": map[string]any{"labels": map[string]any{jobLabel: name}},
				"spec": map[string]any{"containers": []any{map[string]any{
					"name": "pytorch", "image": "registry.k8s.io/pause:3.10",
					"resources": map[string]any{"requests": map[string]any{"cpu": cpu, "memory": "256Mi"}},
				}}},
			},
		}
	}
	job := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "kubeflow.org/v1",
		"kind":       "PyTorchJob",
		"metadata":   map[string]any{"name": name, "namespace": j.ns},
		"spec": map[string]any{"pytorchReplicaSpecs": map[string]any{
			"Master": replica(1),
			"Worker": replica(workers),
		}},
	}}
	if _, err := j.dyn.Resource(pytorchJobs).Namespace(j.ns).Create(j.ctx, job, metav1.CreateOptions{}); err != nil {
		j.t.Fatal(err)
	}
}

// delete deletes a PyTorchJob and what it owns (deleteOwned).
func (j pytorchWorkload) delete(name string) {
	j.t.Helper()
	if err := j.dyn.Resource(pytorchJobs).Namespace(j.ns).Delete(j.ctx, name, metav1.DeleteOptions{}); err != nil {
		j.t.Fatal(err)
	}
	j.deleteOwned(name, name)
}

// waitPhase waits until the job's PodGroup is in one of phases, and
// returns it.
func (j pytorchWorkload) waitPhase(job string, timeout time.Duration, phases ...vcv1beta1.PodGroupPhase) vcv1beta1.PodGroupPhase {
	j.t.Helper()
	var phase vcv1beta1.PodGroupPhase
	j.waitPodGroup(job, timeout, fmt.Sprintf("in one of phases %q", phases), func(pg *vcv1beta1.PodGroup) bool {
		phase = pg.Status.Phase
		return slices.Contains(phases, phase)
	})
	return phase
}

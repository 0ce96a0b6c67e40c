package deploy

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/klog/v2/ktesting"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/yaml"
	batchv1alpha1 "volcano.sh/apis/pkg/apis/batch/v1alpha1"
	vcv1beta1 "volcano.sh/apis/pkg/apis/scheduling/v1beta1"
	vcclient "volcano.sh/apis/pkg/client/clientset/versioned"

	"github.com/muster-sched/muster/manifests/volcano"
	"github.com/muster-sched/muster/pkg/simulator"
)

// TestVolcanoJob runs Volcano's own controllers (vc-controller-manager
// v1.10.0: its Job, PodGroup and Queue controllers) beside muster-scheduler
// with config/volcano.yaml, as a cluster that swapped vc-scheduler for
// Muster would. The Job controller creates a PodGroup per batch.volcano.sh
// Job, and the Job's pods only once the scheduler has moved the PodGroup
// from Pending to Inqueue. No admission webhook runs: each Job has what
// Volcano's mutating webhook would add. On two nodes of 8 cpu:
//   - a Job of a master and 3 workers of 1 cpu goes Inqueue, the controller
//     creates its 4 pods, they bind, its PodGroup runs and the Job runs;
//   - a Job of 4 × 4.5 cpu, more than the cluster has, stays Pending beside
//     it, with an Unschedulable condition that says why, and no pod;
//   - a Job of 3 × 5 cpu is admitted (15 of 16 cpu) but cannot be placed
//     whole (one member per node): none of its pods binds, and its PodGroup
//     says why in an Unschedulable condition.
func TestVolcanoJob(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	vc := findVolcanoControllers(t)
	installCRDs(t, ctx, volcano.FS)
	installCRDs(t, ctx, vc.crdFile("batch.volcano.sh_jobs.yaml"))
	installCRDs(t, ctx, vc.crdFile("bus.volcano.sh_commands.yaml"))
	r := installChart(t, ctx, "muster", "muster-vcjob", "--set", "mode=replace-default,volcanoProfile=true")
	token := serviceAccountToken(t, ctx, r.namespace, r.fullname())
	config, err := os.ReadFile(filepath.Join(repoRoot, "config", "volcano.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	s := startSchedulerProcess(t, "muster-scheduler", processSpec{
		args:       r.container(t).Args,
		config:     config,
		kubeconfig: tokenKubeconfig(t, r.namespace+"-vcjob.kubeconfig", token),
	})
	if _, err := s.waitLog(ctx, leaseAcquired("kube-system/kube-scheduler"), 30*time.Second); err != nil {
		t.Fatal(err)
	}
	w := newWorkload(t, ctx, "work-vcjob", "volcano", 2, simulator.NodeShape{CPU: "8", Memory: "32Gi"})
	pods := watchJobPods(t, ctx, w.ns)
	j := newVCJobWorkload(t, w, pods)
	j.ensureDefaultQueue()
	c := startVolcanoControllers(t, ctx, vc, "volcano-system")

	// too-big first: a PodGroup that cannot be admitted must not hold
	// back the one behind it, as in vc-scheduler's enqueue.
	j.create("too-big", "4500m", 1, 3)
	j.create("fits", "1", 1, 3)
	j.waitCreated("fits", 4, 60*time.Second)
	j.waitBound("fits", 4, 30*time.Second)
	pg := j.podGroup("fits")
	if pg.Spec.MinMember != 4 || pg.Spec.MinTaskMember["master"] != 1 || pg.Spec.MinTaskMember["worker"] != 3 {
		t.Errorf("PodGroup of Job fits: minMember %d, minTaskMember %v; want the Job's 4, master 1 and worker 3",
			pg.Spec.MinMember, pg.Spec.MinTaskMember)
	}
	for _, p := range j.pods("fits") {
		if p.Spec.SchedulerName != "volcano" || p.Annotations[vcv1beta1.KubeGroupNameAnnotationKey] != pg.Name {
			t.Errorf("pod %s: schedulerName %q, annotation %s=%q; want volcano and the Job's PodGroup %s",
				p.Name, p.Spec.SchedulerName, vcv1beta1.KubeGroupNameAnnotationKey, p.Annotations[vcv1beta1.KubeGroupNameAnnotationKey], pg.Name)
		}
	}
	j.waitPodGroup("fits", 30*time.Second, "Running with 4 running", func(pg *vcv1beta1.PodGroup) bool {
		return pg.Status.Phase == vcv1beta1.PodGroupRunning && pg.Status.Running == 4
	})
	j.waitJob("fits", 30*time.Second, "Running with 4 running", func(job *batchv1alpha1.Job) bool {
		return job.Status.State.Phase == batchv1alpha1.Running && job.Status.Running == 4
	})
	// Muster has admitted fits, created after it: too-big, whose minResources
	// exceed the cluster, was looked at and left Pending.
	j.waitPodGroup("too-big", 30*time.Second, "Pending", func(pg *vcv1beta1.PodGroup) bool {
		return pg.Status.Phase == vcv1beta1.PodGroupPending
	})
	j.waitUnschedulable("too-big", 30*time.Second, "cpu", "18")
	j.delete("fits")

	j.create("split", "5", 1, 2)
	j.waitCreated("split", 3, 60*time.Second)
	j.waitUnschedulable("split", 30*time.Second, "Insufficient cpu")
	if phase := j.podGroup("split").Status.Phase; phase != vcv1beta1.PodGroupInqueue {
		t.Errorf("PodGroup of Job split: phase %s, want Inqueue: admitted, not placed\n%s", phase, j.describe("split"))
	}

	s.stop()
	// Nothing changes from here: the scheduler is gone.
	if n := pods.bound("split"); n != 0 {
		t.Errorf("%d of 3 pods of Job split bound, want none: the Job cannot fit whole\n%s", n, j.describe("split"))
	}
	if n := pods.created("too-big"); n != 0 || j.podGroup("too-big").Status.Phase != vcv1beta1.PodGroupPending {
		t.Errorf("Job too-big, larger than the cluster, has %d pods, want none and its PodGroup Pending\n%s", n, j.describe("too-big"))
	}
	if phase := j.job("split").Status.State.Phase; phase != batchv1alpha1.Pending {
		t.Errorf("Job split: phase %s, want Pending: none of its pods runs", phase)
	}
	for _, p := range []*schedulerProcess{s, c} {
		if lines := p.forbidden(); len(lines) > 0 {
			t.Errorf("RBAC refused the %s:\n%s", p.name, strings.Join(lines, "\n"))
		}
	}
}

// vcJobWorkload makes Volcano Jobs in a workload's namespace and watches
// their pods (labelled with jobLabel).
type vcJobWorkload struct {
	volcanoJobs
}

// newVCJobWorkload returns the workload; once the test ends it deletes
// the Jobs and Volcano PodGroups of the namespace, as the garbage
// collector would (none runs here): an Inqueue PodGroup holds room in its
// queue.
func newVCJobWorkload(t *testing.T, w *workload, pods *jobPods) vcJobWorkload {
	t.Helper()
	vc, err := vcclient.NewForConfig(cluster.JSONConfig())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx := context.Background()
		_ = vc.BatchV1alpha1().Jobs(w.ns).DeleteCollection(ctx, metav1.DeleteOptions{}, metav1.ListOptions{})
		_ = vc.SchedulingV1beta1().PodGroups(w.ns).DeleteCollection(ctx, metav1.DeleteOptions{}, metav1.ListOptions{})
	})
	jobs := volcanoJobs{workload: w, jobPods: pods, vc: vc, creator: "controller"}
	// The controller names a Job's PodGroup <job>-<job's UID>.
	jobs.podGroupName = func(ctx context.Context, job string) (string, error) {
		vj, err := vc.BatchV1alpha1().Jobs(w.ns).Get(ctx, job, metav1.GetOptions{})
		if err != nil {
			return "", err
		}
		return job + "-" + string(vj.UID), nil
	}
	jobs.describeJob = func(ctx context.Context, job string) string {
		vj, err := vc.BatchV1alpha1().Jobs(w.ns).Get(ctx, job, metav1.GetOptions{})
		if err != nil {
			return fmt.Sprintf("Job: %v\n", err)
		}
		status, _ := yaml.Marshal(vj.Status)
		return fmt.Sprintf("Job status:\n%s", status)
	}
	return vcJobWorkload{jobs}
}

// ensureDefaultQueue creates Volcano's Queue default, as vc-scheduler does
// when it starts (Muster creates only its own Queue default): the Job
// controller syncs no Job whose Volcano Queue it cannot find. One created
// here is deleted when the test ends.
func (j vcJobWorkload) ensureDefaultQueue() {
	j.t.Helper()
	queues := j.vc.SchedulingV1beta1().Queues()
	q := &vcv1beta1.Queue{
		ObjectMeta: metav1.ObjectMeta{Name: "default"},
		Spec:       vcv1beta1.QueueSpec{Weight: 1, Reclaimable: ptr.To(true)},
	}
	_, err := queues.Create(j.ctx, q, metav1.CreateOptions{})
	if apierrors.IsAlreadyExists(err) {
		return
	}
	if err != nil {
		j.t.Fatal(err)
	}
	j.t.Cleanup(func() { _ = queues.Delete(context.Background(), q.Name, metav1.DeleteOptions{}) })
}

// create creates a Volcano Job of a master and workers, each requesting
// cpu, running until deleted, in Volcano's Queue default. It carries what
// Volcano's mutating webhook would add (v1.10.0, pkg/webhooks/admission/
// jobs/mutate): the queue, the scheduler, maxRetry 3, and per task its
// name, minAvailable (its replicas) and maxRetry 3; minAvailable, the sum.
func (j vcJobWorkload) create(name, cpu string, masters, workers int32) {
	j.t.Helper()
	task := func(role string, n int32) batchv1alpha1.TaskSpec {
		return batchv1alpha1.TaskSpec{
			Name:         role,
			Replicas:     n,
			MinAvailable: ptr.To(n),
			MaxRetry:     3,
			Template: v1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{jobLabel: name}},
				Spec: v1.PodSpec{
					RestartPolicy: v1.RestartPolicyNever,
					Containers: []v1.Container{{
						Name: role, Image: "registry.k8s.io/pause:3.10",
						Resources: v1.ResourceRequirements{Requests: v1.ResourceList{
							v1.ResourceCPU: resource.MustParse(cpu), v1.ResourceMemory: resource.MustParse("256Mi"),
						}},
					}},
				},
			},
		}
	}
	job := &batchv1alpha1.Job{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: j.ns},
		Spec: batchv1alpha1.JobSpec{
			SchedulerName: "volcano",
			Queue:         "default",
			MinAvailable:  masters + workers,
			MaxRetry:      3,
			Tasks:         []batchv1alpha1.TaskSpec{task("master", masters), task("worker", workers)},
		},
	}
	if _, err := j.vc.BatchV1alpha1().Jobs(j.ns).Create(j.ctx, job, metav1.CreateOptions{}); err != nil {
		j.t.Fatal(err)
	}
}

// delete deletes a Job and what it owns (deleteOwned).
func (j vcJobWorkload) delete(name string) {
	j.t.Helper()
	pgName := j.podGroup(name).Name
	if err := j.vc.BatchV1alpha1().Jobs(j.ns).Delete(j.ctx, name, metav1.DeleteOptions{}); err != nil {
		j.t.Fatal(err)
	}
	j.deleteOwned(pgName, name)
}

func (j vcJobWorkload) job(name string) *batchv1alpha1.Job {
	j.t.Helper()
	job, err := j.vc.BatchV1alpha1().Jobs(j.ns).Get(j.ctx, name, metav1.GetOptions{})
	if err != nil {
		j.t.Fatal(err)
	}
	return job
}

// waitJob waits until the Job is as want says.
func (j vcJobWorkload) waitJob(name string, timeout time.Duration, want string, ok func(*batchv1alpha1.Job) bool) {
	j.t.Helper()
	err := wait.PollUntilContextTimeout(j.ctx, 100*time.Millisecond, timeout, true, func(ctx context.Context) (bool, error) {
		job, err := j.vc.BatchV1alpha1().Jobs(j.ns).Get(ctx, name, metav1.GetOptions{})
		return err == nil && ok(job), nil
	})
	if err != nil {
		j.t.Fatalf("Job %s is not %s: %v\n%s", name, want, err, j.describe(name))
	}
}

package deploy

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	v1 "k8s.io/api/core/v1"
	schedulingv1alpha3 "k8s.io/api/scheduling/v1alpha3"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/tools/cache"
	jobcontroller "k8s.io/kubernetes/pkg/controller/job"
	"k8s.io/kubernetes/test/utils/ktesting"
	"k8s.io/utils/ptr"

	"github.com/muster-sched/muster/pkg/simulator"
)

// TestJobControllerGang runs kube-controller-manager's own Job controller
// (GenericWorkload and WorkloadWithJob on, as the suite's apiserver has
// them) beside the chart's scheduler: the controller creates the Workload
// and the PodGroup of each indexed Job with a gang policy and points the
// pods at it, and Muster schedules them as a gang. The first Job fits and
// binds whole; the second cannot fit beside it and binds nothing until
// the first one's pods finish, then binds whole within 2 s.
func TestJobControllerGang(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	r := installChart(t, ctx, "muster", "muster-job", "--set", "mode=replace-default")
	p := startReplica(t, ctx, r, "replica-0")
	if _, err := p.waitLog(ctx, leaseAcquired("kube-system/kube-scheduler"), 30*time.Second); err != nil {
		t.Fatal(err)
	}
	// Two nodes of 4 cpu.
	w := newWorkload(t, ctx, "work-job", "default-scheduler", 2, simulator.NodeShape{CPU: "4", Memory: "16Gi"})
	t.Cleanup(func() { releaseJobPods(w.ns) })
	startJobController(t, ctx)
	pods := watchJobPods(t, ctx, w.ns)

	// 4 × 1 cpu for 5 s: fits.
	createGangJob(t, ctx, w.ns, "first", 4, "1", 5*time.Second)
	if err := pods.waitFor(ctx, 30*time.Second, func() bool { return pods.bound("first") == 4 }); err != nil {
		t.Fatalf("Job first: %d of 4 pods bound: %v", pods.bound("first"), err)
	}
	if pg, err := cluster.Client.SchedulingV1beta1().PodGroups(w.ns).List(ctx, metav1.ListOptions{}); err != nil || len(pg.Items) != 1 {
		t.Fatalf("want the Job controller's PodGroup of Job first, got %v (%v)", pg, err)
	}
	// 4 × 2 cpu cannot fit beside it (4 cpu free).
	createGangJob(t, ctx, w.ns, "second", 4, "2", time.Hour)
	if err := pods.waitFor(ctx, 30*time.Second, func() bool { return pods.created("second") == 4 }); err != nil {
		t.Fatalf("Job second: %d of 4 pods created: %v", pods.created("second"), err)
	}
	if err := pods.waitFor(ctx, 30*time.Second, func() bool { return pods.finished("first") == 4 }); err != nil {
		t.Fatalf("Job first: %d of 4 pods finished: %v", pods.finished("first"), err)
	}
	if n := pods.boundBefore("second", pods.lastFinished("first")); n != 0 {
		t.Fatalf("%d pods of Job second bound before Job first's pods finished: a partial gang", n)
	}
	if err := pods.waitFor(ctx, 30*time.Second, func() bool { return pods.bound("second") == 4 }); err != nil {
		t.Fatalf("Job second: %d of 4 pods bound after Job first finished: %v", pods.bound("second"), err)
	}
	latency := pods.lastBound("second").Sub(pods.lastFinished("first"))
	t.Logf("Job second bound whole %v after Job first's last pod finished", latency.Round(time.Millisecond))
	if latency > 2*time.Second {
		t.Errorf("Job second bound %v after room freed, want within 2s", latency)
	}
}

// startJobController runs the Job controller until the test ends, as
// kube-controller-manager starts it.
func startJobController(t *testing.T, ctx context.Context) {
	t.Helper()
	ctx, cancel := context.WithCancel(ctx)
	f := informers.NewSharedInformerFactory(cluster.Client, 0)
	jc, err := jobcontroller.NewController(ctx, cluster.Client, f.Core().V1().Pods(), f.Batch().V1().Jobs(),
		f.Scheduling().V1beta1().Workloads(), f.Scheduling().V1beta1().PodGroups())
	if err != nil {
		t.Fatal(err)
	}
	f.Start(ctx.Done())
	var wg sync.WaitGroup
	wg.Go(func() { jc.Run(ctx, 2) })
	t.Cleanup(func() {
		cancel()
		wg.Wait()
		f.Shutdown()
	})
}

// releaseJobPods removes the Job controller's finalizer from the pods of
// ns, once the controller has stopped, so that deleting them (as the
// workload's clean-up does) removes them: the suite's later cases must
// not count their resources.
func releaseJobPods(ns string) {
	ctx := context.Background()
	pods, err := cluster.Client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		return
	}
	for _, p := range pods.Items {
		if len(p.Finalizers) > 0 {
			_, _ = cluster.Client.CoreV1().Pods(ns).Patch(ctx, p.Name, types.MergePatchType, []byte(`{"metadata":{"finalizers":null}}`), metav1.PatchOptions{})
		}
	}
}

// createGangJob creates an indexed Job of n pods requesting cpu that run
// for runTime, with the gang policy (minCount: its parallelism).
func createGangJob(t *testing.T, ctx context.Context, ns, name string, n int32, cpu string, runTime time.Duration) {
	t.Helper()
	job := &batchv1.Job{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec: batchv1.JobSpec{
			Parallelism:    ptr.To(n),
			Completions:    ptr.To(n),
			CompletionMode: ptr.To(batchv1.IndexedCompletion),
			Scheduling: &batchv1.JobSchedulingConfiguration{SchedulingPolicy: &schedulingv1alpha3.WorkloadPodGroupSchedulingPolicy{
				Gang: &schedulingv1alpha3.WorkloadPodGroupGangSchedulingPolicy{},
			}},
			Template: v1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{
					Labels:      map[string]string{jobLabel: name},
					Annotations: map[string]string{simulator.AnnotationRunTime: runTime.String()},
				},
				Spec: v1.PodSpec{
					RestartPolicy: v1.RestartPolicyNever,
					Containers: []v1.Container{{
						Name: "c", Image: "registry.k8s.io/pause:3.10",
						Resources: v1.ResourceRequirements{Requests: v1.ResourceList{v1.ResourceCPU: resource.MustParse(cpu)}},
					}},
				},
			},
		},
	}
	if _, err := cluster.Client.BatchV1().Jobs(ns).Create(ctx, job, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		// No garbage collector runs: delete the Job in the background
		// (the default propagation would wait for it forever).
		_ = cluster.Client.BatchV1().Jobs(ns).Delete(context.Background(), name,
			metav1.DeleteOptions{PropagationPolicy: ptr.To(metav1.DeletePropagationBackground)})
	})
}

// jobLabel marks the test's pods with their Job.
const jobLabel = "test.muster.dev/job"

// jobPods records, as one watch sees them, when each Job's pods were
// created, bound and finished.
type jobPods struct {
	mu       sync.Mutex
	changed  chan struct{}
	pods     map[string]*podTimes // by name
	podsJobs map[string]string
}

type podTimes struct{ bound, finished time.Time }

func watchJobPods(t *testing.T, ctx context.Context, ns string) *jobPods {
	t.Helper()
	j := &jobPods{changed: make(chan struct{}), pods: map[string]*podTimes{}, podsJobs: map[string]string{}}
	f := informers.NewSharedInformerFactoryWithOptions(cluster.Client, 0, informers.WithNamespace(ns))
	inf := f.Core().V1().Pods().Informer()
	observe := func(obj any) {
		if p, ok := obj.(*v1.Pod); ok {
			j.observe(p)
		}
	}
	if _, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{AddFunc: observe, UpdateFunc: func(_, o any) { observe(o) }}); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(ctx)
	f.Start(ctx.Done())
	t.Cleanup(func() {
		cancel()
		f.Shutdown()
	})
	return j
}

func (j *jobPods) observe(p *v1.Pod) {
	job := p.Labels[jobLabel]
	if job == "" {
		return
	}
	now := time.Now()
	j.mu.Lock()
	defer j.mu.Unlock()
	pt := j.pods[p.Name]
	if pt == nil {
		pt = &podTimes{}
		j.pods[p.Name], j.podsJobs[p.Name] = pt, job
	}
	if p.Spec.NodeName != "" && pt.bound.IsZero() {
		pt.bound = now
	}
	if (p.Status.Phase == v1.PodSucceeded || p.Status.Phase == v1.PodFailed) && pt.finished.IsZero() {
		pt.finished = now
	}
	close(j.changed)
	j.changed = make(chan struct{})
}

// count counts the pods of job for which ok holds.
func (j *jobPods) count(job string, ok func(*podTimes) bool) int {
	j.mu.Lock()
	defer j.mu.Unlock()
	n := 0
	for name, pt := range j.pods {
		if j.podsJobs[name] == job && ok(pt) {
			n++
		}
	}
	return n
}

func (j *jobPods) created(job string) int {
	return j.count(job, func(*podTimes) bool { return true })
}

func (j *jobPods) bound(job string) int {
	return j.count(job, func(pt *podTimes) bool { return !pt.bound.IsZero() })
}

func (j *jobPods) finished(job string) int {
	return j.count(job, func(pt *podTimes) bool { return !pt.finished.IsZero() })
}

func (j *jobPods) boundBefore(job string, t time.Time) int {
	return j.count(job, func(pt *podTimes) bool { return !pt.bound.IsZero() && pt.bound.Before(t) })
}

// last is the latest time the pods of job reached, as at reads it.
func (j *jobPods) last(job string, at func(*podTimes) time.Time) time.Time {
	j.mu.Lock()
	defer j.mu.Unlock()
	var last time.Time
	for name, pt := range j.pods {
		if j.podsJobs[name] == job && at(pt).After(last) {
			last = at(pt)
		}
	}
	return last
}

func (j *jobPods) lastBound(job string) time.Time {
	return j.last(job, func(pt *podTimes) time.Time { return pt.bound })
}

func (j *jobPods) lastFinished(job string) time.Time {
	return j.last(job, func(pt *podTimes) time.Time { return pt.finished })
}

// waitFor waits until cond holds, checking it on every pod change.
func (j *jobPods) waitFor(ctx context.Context, timeout time.Duration, cond func() bool) error {
	deadline := time.After(timeout)
	for {
		j.mu.Lock()
		changed := j.changed
		j.mu.Unlock()
		if cond() {
			return nil
		}
		select {
		case <-changed:
		case <-deadline:
			return fmt.Errorf("not within %v", timeout)
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

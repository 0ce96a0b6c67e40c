package deploy

import (
	"context"
	"fmt"
	"strings"
	"time"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/yaml"
	vcv1beta1 "volcano.sh/apis/pkg/apis/scheduling/v1beta1"
	vcclient "volcano.sh/apis/pkg/client/clientset/versioned"
)

// volcanoJobs is what the tests of a controller that creates a job's pods
// once its Volcano PodGroup is Inqueue share: the workload, the watch of
// the jobs' pods (labelled with jobLabel), and the jobs' PodGroups.
type volcanoJobs struct {
	*workload
	jobPods *jobPods
	vc      vcclient.Interface
	// creator names what creates the pods, for messages.
	creator string
	// podGroupName names a job's PodGroup.
	podGroupName func(ctx context.Context, job string) (string, error)
	// describeJob says what the job itself is like, for a failure; "" when
	// there is nothing more than its PodGroup and pods.
	describeJob func(ctx context.Context, job string) string
}

// pods lists the pods of a job.
func (j volcanoJobs) pods(job string) []v1.Pod {
	j.t.Helper()
	list, err := cluster.Client.CoreV1().Pods(j.ns).List(j.ctx, metav1.ListOptions{LabelSelector: jobLabel + "=" + job})
	if err != nil {
		j.t.Fatal(err)
	}
	return list.Items
}

// podGroup gets the PodGroup of a job.
func (j volcanoJobs) podGroup(job string) *vcv1beta1.PodGroup {
	j.t.Helper()
	pg, err := j.getPodGroup(j.ctx, job)
	if err != nil {
		j.t.Fatalf("the Volcano PodGroup of job %s: %v", job, err)
	}
	return pg
}

func (j volcanoJobs) getPodGroup(ctx context.Context, job string) (*vcv1beta1.PodGroup, error) {
	name, err := j.podGroupName(ctx, job)
	if err != nil {
		return nil, err
	}
	return j.vc.SchedulingV1beta1().PodGroups(j.ns).Get(ctx, name, metav1.GetOptions{})
}

// describe says what the job, its PodGroup and pods are like, for a
// failure.
func (j volcanoJobs) describe(job string) string {
	ctx := context.Background()
	var b strings.Builder
	if j.describeJob != nil {
		b.WriteString(j.describeJob(ctx, job))
	}
	if pg, err := j.getPodGroup(ctx, job); err != nil {
		fmt.Fprintf(&b, "PodGroup: %v\n", err)
	} else {
		spec, _ := yaml.Marshal(pg.Spec)
		status, _ := yaml.Marshal(pg.Status)
		fmt.Fprintf(&b, "PodGroup %s spec:\n%sPodGroup status:\n%s", pg.Name, spec, status)
	}
	for _, p := range j.pods(job) {
		fmt.Fprintf(&b, "pod %s: scheduler %q, group %q, node %q, phase %s\n", p.Name, p.Spec.SchedulerName,
			p.Annotations[vcv1beta1.KubeGroupNameAnnotationKey], p.Spec.NodeName, p.Status.Phase)
	}
	return b.String()
}

// waitBound waits until n pods of the job are bound.
func (j volcanoJobs) waitBound(job string, n int, timeout time.Duration) {
	j.t.Helper()
	if err := j.jobPods.waitFor(j.ctx, timeout, func() bool { return j.jobPods.bound(job) == n }); err != nil {
		j.t.Fatalf("job %s: %d of %d pods bound: %v\n%s", job, j.jobPods.bound(job), n, err, j.describe(job))
	}
}

// waitCreated waits until n pods of the job were created.
func (j volcanoJobs) waitCreated(job string, n int, timeout time.Duration) {
	j.t.Helper()
	if err := j.jobPods.waitFor(j.ctx, timeout, func() bool { return j.jobPods.created(job) == n }); err != nil {
		j.t.Fatalf("job %s: the %s created %d of %d pods: %v; it creates them once the scheduler has "+
			"moved the job's PodGroup from Pending to Inqueue, before any pod exists\n%s", job, j.creator, j.jobPods.created(job), n, err, j.describe(job))
	}
}

// waitPodGroup waits until the job's PodGroup is as want says.
func (j volcanoJobs) waitPodGroup(job string, timeout time.Duration, want string, ok func(*vcv1beta1.PodGroup) bool) {
	j.t.Helper()
	err := wait.PollUntilContextTimeout(j.ctx, 100*time.Millisecond, timeout, true, func(ctx context.Context) (bool, error) {
		pg, err := j.getPodGroup(ctx, job)
		return err == nil && ok(pg), nil
	})
	if err != nil {
		j.t.Fatalf("job %s: its PodGroup is not %s: %v\n%s", job, want, err, j.describe(job))
	}
}

// waitUnschedulable waits until the job's PodGroup has the condition
// vc-scheduler writes for a gang it cannot enqueue or place: Unschedulable,
// True, reason NotEnoughResources, with a message containing each of words.
func (j volcanoJobs) waitUnschedulable(job string, timeout time.Duration, words ...string) {
	j.t.Helper()
	j.waitPodGroup(job, timeout, fmt.Sprintf("Unschedulable saying %q", words), func(pg *vcv1beta1.PodGroup) bool {
		for _, c := range pg.Status.Conditions {
			if c.Type == vcv1beta1.PodGroupUnschedulableType && c.Status == v1.ConditionTrue &&
				c.Reason == vcv1beta1.NotEnoughResourcesReason && containsAll(c.Message, words) {
				return true
			}
		}
		return false
	})
}

// deleteOwned deletes what the deleted job owned, its PodGroup group and
// its pods, as the garbage collector would (none runs here), until they
// stay gone: a sync of the job's controller under way when the job went
// may create them again, and an enqueued PodGroup holds room in its queue.
func (j volcanoJobs) deleteOwned(group, job string) {
	j.t.Helper()
	podGroups, pods := j.vc.SchedulingV1beta1().PodGroups(j.ns), cluster.Client.CoreV1().Pods(j.ns)
	selector := metav1.ListOptions{LabelSelector: jobLabel + "=" + job}
	gone := 0
	err := wait.PollUntilContextTimeout(j.ctx, 500*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		_, err := podGroups.Get(ctx, group, metav1.GetOptions{})
		left, listErr := pods.List(ctx, selector)
		if listErr != nil {
			return false, listErr
		}
		if apierrors.IsNotFound(err) && len(left.Items) == 0 {
			gone++
			return gone == 2, nil
		}
		gone = 0
		if err := podGroups.Delete(ctx, group, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
			return false, err
		}
		return false, pods.DeleteCollection(ctx, metav1.DeleteOptions{GracePeriodSeconds: new(int64)}, selector)
	})
	if err != nil {
		j.t.Fatalf("job %s: its PodGroup or pods left 30s after their deletion: %v", job, err)
	}
}

func containsAll(s string, words []string) bool {
	for _, w := range words {
		if !strings.Contains(s, w) {
			return false
		}
	}
	return true
}

package deploy

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	schedulingv1 "k8s.io/api/scheduling/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/klog/v2/ktesting"
	podutil "k8s.io/kubernetes/pkg/api/v1/pod"

	"github.com/muster-sched/muster/apis/scheduling/v1alpha1"
	"github.com/muster-sched/muster/pkg/simulator"
)

// TestReclaimFailover kills the leader (SIGKILL) right after its first
// eviction for a gang of higher priority, while the victims take 20 s to
// stop: the follower takes over, knows from the victims' marks that the
// room is coming, and evicts nothing more; the gang binds once they are
// gone. Evictions equal the minimal set (the victim gang's members above
// its minimum), and no gang is left below its minimum. (A leader that did
// not know would find the gang still not fitting, the victims being on
// their nodes, and evict the rest of the victim gang.)
func TestReclaimFailover(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	r := installChart(t, ctx, "muster", "muster-reclaim-failover",
		"--set", "mode=replace-default",
		// At the chart's default (1.2 × allocatable) a full cluster admits
		// no new gang, and a gang its queue does not admit preempts whole
		// gangs only.
		"--set", "plugins.queue.overcommitFactor=2",
		"--set", fmt.Sprintf("leaderElection.leaseDuration=%v,leaderElection.renewDeadline=%v,leaderElection.retryPeriod=%v", leaseDuration, renewDeadline, retryPeriod),
	)
	leaseLog := leaseAcquired("kube-system/kube-scheduler")
	w := newWorkload(t, ctx, "work-reclaim-failover", "default-scheduler", 2, simulator.NodeShape{CPU: "4", Memory: "16Gi"})
	high := &schedulingv1.PriorityClass{ObjectMeta: metav1.ObjectMeta{Name: "failover-high"}, Value: 1000}
	if _, err := cluster.Client.SchedulingV1().PriorityClasses().Create(ctx, high, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cluster.Client.SchedulingV1().PriorityClasses().Delete(context.Background(), high.Name, metav1.DeleteOptions{})
	})
	leader, follower := waitLeader(t, ctx, leaseLog, []*schedulerProcess{startReplica(t, ctx, r, "replica-0"), startReplica(t, ctx, r, "replica-1")})

	// Gang a (minimum 2 of 4) fills the cluster; its members take 20 s to
	// stop.
	a := w.gangPods("a", 4, "2", false)
	for _, p := range a {
		p.Labels[v1alpha1.LabelMinAvailable] = "2"
		p.Annotations = map[string]string{simulator.AnnotationStopTime: "20s"}
		p.Spec.TerminationGracePeriodSeconds = new(int64(30))
	}
	w.create(a)
	w.waitAllBound(30 * time.Second)

	// Gang h, of higher priority in the same (default) queue, needs half
	// the cluster: a's two members above its minimum.
	h := w.gangPods("h", 2, "2", false)
	for _, p := range h {
		p.Spec.PriorityClassName = high.Name
	}
	w.create(h)
	var first *v1.Pod
	err := wait.PollUntilContextTimeout(ctx, 10*time.Millisecond, 30*time.Second, true, func(context.Context) (bool, error) {
		for _, p := range w.pods("a") {
			if p.DeletionTimestamp != nil {
				first = p
				return true, nil
			}
		}
		return false, nil
	})
	if err != nil {
		t.Fatalf("no member of gang a was evicted: %v", err)
	}
	leader.kill()
	t.Logf("killed the leader with %d of gang a's members left", len(w.live("a")))
	_, c := podutil.GetPodCondition(&first.Status, v1.DisruptionTarget)
	if c == nil || c.Reason != v1.PodReasonPreemptionByScheduler || !strings.Contains(c.Message, "gang muster/"+w.ns+"/h ") {
		t.Errorf("victim %s was deleted without a DisruptionTarget condition naming gang h: %+v", first.Name, c)
	}
	if _, err := follower.waitLog(ctx, leaseLog, 3*leaseDuration); err != nil {
		t.Fatalf("the follower did not take over: %v", err)
	}

	// The victims stop 20 s after their deletion; then h binds.
	err = wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 60*time.Second, true, func(context.Context) (bool, error) {
		n := 0
		for _, p := range w.pods("h") {
			if p.Spec.NodeName != "" {
				n++
			}
		}
		return n == len(h), nil
	})
	if err != nil {
		t.Fatalf("gang h did not bind after the takeover: %v", err)
	}
	if live := w.live("a"); len(live) != 2 {
		t.Errorf("gang a has %d members left, want its minimum 2: the evictions must be the minimal set, and the new leader must not evict again", len(live))
	}
	for _, p := range []*schedulerProcess{leader, follower} {
		if lines := p.forbidden(); len(lines) > 0 {
			t.Errorf("%s was refused by the chart's RBAC:\n%s", p.name, strings.Join(lines, "\n"))
		}
	}
}

// pods returns the gang's pods.
func (w *workload) pods(gangName string) []*v1.Pod {
	w.t.Helper()
	list, err := cluster.Client.CoreV1().Pods(w.ns).List(w.ctx, metav1.ListOptions{LabelSelector: v1alpha1.LabelPodGroup + "=" + gangName})
	if err != nil {
		w.t.Fatal(err)
	}
	out := make([]*v1.Pod, len(list.Items))
	for i := range list.Items {
		out[i] = &list.Items[i]
	}
	return out
}

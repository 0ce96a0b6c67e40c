package deploy

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	schedulingv1beta1 "k8s.io/api/scheduling/v1beta1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/kubernetes/test/utils/ktesting"
	"k8s.io/utils/ptr"

	"github.com/muster-sched/muster/apis/scheduling/v1alpha1"
	"github.com/muster-sched/muster/pkg/simulator"
)

// TestUpstreamPodGroups schedules Kubernetes' own PodGroups
// (scheduling.k8s.io/v1beta1) with the chart's scheduler: a gang that fits
// binds whole, one that cannot binds nothing and says why in the
// PodGroupInitiallyScheduled condition, then binds once room frees; a
// basic-policy PodGroup is no gang; a PodGroup's queue label puts the gang
// under that queue's ceiling.
func TestUpstreamPodGroups(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	r := installChart(t, ctx, "muster", "muster-upstream", "--set", "mode=replace-default")
	p := startReplica(t, ctx, r, "replica-0")
	if _, err := p.waitLog(ctx, leaseAcquired("kube-system/kube-scheduler"), 30*time.Second); err != nil {
		t.Fatal(err)
	}
	if !p.hasLogged("upstreamPodGroups=true") {
		t.Fatalf("the scheduler does not schedule scheduling.k8s.io PodGroups; its log:\n%s", p.tail(40))
	}
	// Two nodes of 4 cpu.
	w := newWorkload(t, ctx, "work-upstream", "default-scheduler", 2, simulator.NodeShape{CPU: "4", Memory: "16Gi"})
	u := upstreamWorkload{w}

	// Pods wait for their PodGroup, as kube-scheduler's would; a
	// basic-policy PodGroup is no gang: once it exists its pods bind one by
	// one, as plain pods, with no queue.
	u.create("web", 1, "1")
	time.Sleep(time.Second)
	if n := u.bound("web"); n != 0 {
		t.Fatalf("a pod bound before the PodGroup it names existed")
	}
	u.createPodGroup("web", nil, nil)
	u.waitBound("web", 1, 30*time.Second)

	// A gang of 3 × 2 cpu fits (7 cpu free): it binds whole.
	u.createPodGroup("fits", ptr.To[int32](3), nil)
	u.create("fits", 3, "2")
	u.waitBound("fits", 3, 30*time.Second)
	u.waitCondition("fits", metav1.ConditionTrue, "Scheduled", "")

	// A gang of 2 × 2 cpu cannot fit beside it (1 cpu free): nothing binds.
	u.createPodGroup("waits", ptr.To[int32](2), nil)
	u.create("waits", 2, "2")
	u.waitCondition("waits", metav1.ConditionFalse, "Unschedulable", "")
	if n := u.bound("waits"); n != 0 {
		t.Fatalf("%d members of gang waits bound, want none before room frees", n)
	}

	// Room frees: the gang binds whole.
	freed := time.Now()
	if err := cluster.Client.CoreV1().Pods(w.ns).DeleteCollection(ctx, metav1.DeleteOptions{GracePeriodSeconds: new(int64)},
		metav1.ListOptions{LabelSelector: upstreamGangLabel + "=fits"}); err != nil {
		t.Fatal(err)
	}
	u.waitBound("waits", 2, 30*time.Second)
	t.Logf("gang waits bound %v after the pods in its way were deleted", time.Since(freed).Round(time.Millisecond))
	u.waitCondition("waits", metav1.ConditionTrue, "Scheduled", "")

	// The PodGroup's queue label puts the gang in that queue: a queue
	// capped at 2 cpu refuses a gang needing 3 (3 cpu are free), and
	// admits it once the cap is raised.
	q := &v1alpha1.Queue{ObjectMeta: metav1.ObjectMeta{Name: "upstream-capped"}, Spec: v1alpha1.QueueSpec{
		Capability: map[v1.ResourceName]resource.Quantity{v1.ResourceCPU: resource.MustParse("2")},
	}}
	if _, err := cluster.Muster.SchedulingV1alpha1().Queues().Create(ctx, q, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cluster.Muster.SchedulingV1alpha1().Queues().Delete(context.Background(), q.Name, metav1.DeleteOptions{})
	})
	u.createPodGroup("queued", ptr.To[int32](3), map[string]string{v1alpha1.LabelQueue: q.Name})
	u.create("queued", 3, "1")
	u.waitCondition("queued", metav1.ConditionFalse, "Unschedulable", q.Name)
	if n := u.bound("queued"); n != 0 {
		t.Fatalf("%d members of gang queued bound over its queue's capability", n)
	}
	q, err := cluster.Muster.SchedulingV1alpha1().Queues().Get(ctx, q.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	q.Spec.Capability = map[v1.ResourceName]resource.Quantity{v1.ResourceCPU: resource.MustParse("3")}
	if _, err := cluster.Muster.SchedulingV1alpha1().Queues().Update(ctx, q, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	// The gang is submitted again once the queue's status shows the new
	// ceiling: a waiting gang retried on the Queue's update event may still
	// read the old ceiling, and nothing retries it after (issue 23).
	err = wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		q, err := cluster.Muster.SchedulingV1alpha1().Queues().Get(ctx, q.Name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		c := q.Status.RealCapability[v1.ResourceCPU]
		return c.Cmp(resource.MustParse("3")) == 0, nil
	})
	if err != nil {
		t.Fatalf("queue %s: realCapability never showed the raised cpu capability: %v", q.Name, err)
	}
	if err := cluster.Client.CoreV1().Pods(w.ns).DeleteCollection(ctx, metav1.DeleteOptions{GracePeriodSeconds: new(int64)},
		metav1.ListOptions{LabelSelector: upstreamGangLabel + "=queued"}); err != nil {
		t.Fatal(err)
	}
	if err := wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, 30*time.Second, true, func(context.Context) (bool, error) {
		return u.count("queued", func(*v1.Pod) bool { return true }) == 0, nil
	}); err != nil {
		t.Fatal(err)
	}
	u.create("queued", 3, "1")
	u.waitBound("queued", 3, 30*time.Second)

	// The PodGroup's topology constraint: two racks of two 4-cpu nodes.
	// A gang of 2 × 3 cpu binds within one rack; one of 3 × 3 cpu fits no
	// rack (one member per node) and waits, holding nothing, until a third
	// node joins a rack.
	for _, rack := range []string{"r1", "r2"} {
		if _, err := simulator.CreateNodes(ctx, cluster.Client, w.ns+"-"+rack, 2, simulator.NodeShape{CPU: "4", Memory: "16Gi",
			Labels: map[string]string{v1alpha1.LabelRack: rack}}); err != nil {
			t.Fatal(err)
		}
	}
	u.createPodGroupIn("racked", 2, v1alpha1.LabelRack)
	u.create("racked", 2, "3")
	u.waitBound("racked", 2, 30*time.Second)
	if racks := u.racks("racked"); len(racks) != 1 {
		t.Fatalf("gang racked is in racks %v, want one", racks)
	}
	u.createPodGroupIn("wide", 3, v1alpha1.LabelRack)
	u.create("wide", 3, "3")
	u.waitCondition("wide", metav1.ConditionFalse, "Unschedulable", "needs 9 cpu in one topology.muster.dev/rack")
	if n := u.bound("wide"); n != 0 {
		t.Fatalf("%d members of gang wide bound, want none while no rack fits it", n)
	}
	free := "r1"
	if u.racks("racked")[0] == "r1" {
		free = "r2"
	}
	if _, err := simulator.CreateNodes(ctx, cluster.Client, w.ns+"-"+free+"-more", 1, simulator.NodeShape{CPU: "4", Memory: "16Gi",
		Labels: map[string]string{v1alpha1.LabelRack: free}}); err != nil {
		t.Fatal(err)
	}
	u.waitBound("wide", 3, 30*time.Second)
	if racks := u.racks("wide"); len(racks) != 1 || racks[0] != free {
		t.Fatalf("gang wide is in racks %v, want %s alone", racks, free)
	}

	p.stop()
	if lines := p.forbidden(); len(lines) > 0 {
		t.Errorf("the chart's RBAC refused the scheduler:\n%s", strings.Join(lines, "\n"))
	}
}

// upstreamGangLabel marks the test's pods with the PodGroup they name.
const upstreamGangLabel = "test.muster.dev/gang"

// upstreamWorkload makes gangs of scheduling.k8s.io PodGroups.
type upstreamWorkload struct{ *workload }

// createPodGroup creates a PodGroup with the gang policy of minCount, or
// the basic policy when minCount is nil.
func (u upstreamWorkload) createPodGroup(name string, minCount *int32, labels map[string]string) {
	u.t.Helper()
	policy := schedulingv1beta1.PodGroupSchedulingPolicy{Basic: &schedulingv1beta1.BasicSchedulingPolicy{}}
	if minCount != nil {
		policy = schedulingv1beta1.PodGroupSchedulingPolicy{Gang: &schedulingv1beta1.GangSchedulingPolicy{MinCount: *minCount}}
	}
	pg := &schedulingv1beta1.PodGroup{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: u.ns, Labels: labels},
		Spec:       schedulingv1beta1.PodGroupSpec{SchedulingPolicy: policy},
	}
	if _, err := cluster.Client.SchedulingV1beta1().PodGroups(u.ns).Create(u.ctx, pg, metav1.CreateOptions{}); err != nil {
		u.t.Fatal(err)
	}
}

// createPodGroupIn creates a PodGroup with the gang policy of minCount
// whose members must share one domain of the node label key.
func (u upstreamWorkload) createPodGroupIn(name string, minCount int32, key string) {
	u.t.Helper()
	pg := &schedulingv1beta1.PodGroup{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: u.ns},
		Spec: schedulingv1beta1.PodGroupSpec{
			SchedulingPolicy:      schedulingv1beta1.PodGroupSchedulingPolicy{Gang: &schedulingv1beta1.GangSchedulingPolicy{MinCount: minCount}},
			SchedulingConstraints: &schedulingv1beta1.PodGroupSchedulingConstraints{Topology: []schedulingv1beta1.TopologyConstraint{{Key: key}}},
		},
	}
	if _, err := cluster.Client.SchedulingV1beta1().PodGroups(u.ns).Create(u.ctx, pg, metav1.CreateOptions{}); err != nil {
		u.t.Fatal(err)
	}
}

// racks are the distinct rack labels of the nodes of the PodGroup's bound
// pods.
func (u upstreamWorkload) racks(group string) []string {
	u.t.Helper()
	pods, err := cluster.Client.CoreV1().Pods(u.ns).List(u.ctx, metav1.ListOptions{LabelSelector: upstreamGangLabel + "=" + group})
	if err != nil {
		u.t.Fatal(err)
	}
	seen := map[string]bool{}
	var out []string
	for _, p := range pods.Items {
		if p.Spec.NodeName == "" {
			continue
		}
		node, err := cluster.Client.CoreV1().Nodes().Get(u.ctx, p.Spec.NodeName, metav1.GetOptions{})
		if err != nil {
			u.t.Fatal(err)
		}
		if r := node.Labels[v1alpha1.LabelRack]; !seen[r] {
			seen[r] = true
			out = append(out, r)
		}
	}
	return out
}

// create creates n pods of the PodGroup, each requesting cpu.
func (u upstreamWorkload) create(group string, n int, cpu string) {
	u.t.Helper()
	for i := range n {
		pod := &v1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("%s-%d", group, i), Namespace: u.ns, Labels: map[string]string{upstreamGangLabel: group}},
			Spec: v1.PodSpec{
				SchedulerName:   u.schedulerName,
				SchedulingGroup: &v1.PodSchedulingGroup{PodGroupName: ptr.To(group)},
				Containers: []v1.Container{{
					Name: "c", Image: "registry.k8s.io/pause:3.10",
					Resources: v1.ResourceRequirements{Requests: v1.ResourceList{v1.ResourceCPU: resource.MustParse(cpu)}},
				}},
			},
		}
		if _, err := cluster.Client.CoreV1().Pods(u.ns).Create(u.ctx, pod, metav1.CreateOptions{}); err != nil {
			u.t.Fatal(err)
		}
	}
}

// bound counts the bound pods of the PodGroup.
func (u upstreamWorkload) bound(group string) int {
	return u.count(group, func(p *v1.Pod) bool { return p.Spec.NodeName != "" })
}

// count counts the pods of the PodGroup for which ok holds.
func (u upstreamWorkload) count(group string, ok func(*v1.Pod) bool) int {
	u.t.Helper()
	pods, err := cluster.Client.CoreV1().Pods(u.ns).List(u.ctx, metav1.ListOptions{LabelSelector: upstreamGangLabel + "=" + group})
	if err != nil {
		u.t.Fatal(err)
	}
	n := 0
	for i := range pods.Items {
		if ok(&pods.Items[i]) {
			n++
		}
	}
	return n
}

// waitBound waits until n pods of the PodGroup are bound.
func (u upstreamWorkload) waitBound(group string, n int, timeout time.Duration) {
	u.t.Helper()
	err := wait.PollUntilContextTimeout(u.ctx, 50*time.Millisecond, timeout, true, func(context.Context) (bool, error) {
		return u.bound(group) == n, nil
	})
	if err != nil {
		u.t.Fatalf("gang %s: %d of %d bound after %v", group, u.bound(group), n, timeout)
	}
}

// waitCondition waits until the PodGroup's PodGroupInitiallyScheduled
// condition has status and reason, and a message containing msg.
func (u upstreamWorkload) waitCondition(group string, status metav1.ConditionStatus, reason, msg string) {
	u.t.Helper()
	var last *metav1.Condition
	err := wait.PollUntilContextTimeout(u.ctx, 100*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		pg, err := cluster.Client.SchedulingV1beta1().PodGroups(u.ns).Get(ctx, group, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		last = meta.FindStatusCondition(pg.Status.Conditions, schedulingv1beta1.PodGroupInitiallyScheduled)
		return last != nil && last.Status == status && last.Reason == reason && strings.Contains(last.Message, msg) &&
			last.ObservedGeneration == pg.Generation, nil
	})
	if err != nil {
		u.t.Fatalf("PodGroup %s: condition %s is %+v, want status %s, reason %s, a message containing %q", group,
			schedulingv1beta1.PodGroupInitiallyScheduled, last, status, reason, msg)
	}
}

// TestUpstreamReclaim: queue qa's gang of Kubernetes PodGroup fills the
// cluster; queue qb's gang arrives, and reclaim takes back qb's share
// from the members of qa's gang above its minCount, and no more. The
// cluster-wide overcommit bound is raised: at the chart's default (1.2 ×
// allocatable) a full cluster admits no new gang, and so reclaims for none.
func TestUpstreamReclaim(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	r := installChart(t, ctx, "muster", "muster-upreclaim", "--set", "mode=replace-default", "--set", "plugins.queue.overcommitFactor=2")
	p := startReplica(t, ctx, r, "replica-0")
	if _, err := p.waitLog(ctx, leaseAcquired("kube-system/kube-scheduler"), 30*time.Second); err != nil {
		t.Fatal(err)
	}
	w := newWorkload(t, ctx, "work-upreclaim", "default-scheduler", 2, simulator.NodeShape{CPU: "4", Memory: "16Gi"})
	u := upstreamWorkload{w}
	for _, name := range []string{"upstream-qa", "upstream-qb"} {
		q := &v1alpha1.Queue{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: v1alpha1.QueueSpec{Weight: 1}}
		if _, err := cluster.Muster.SchedulingV1alpha1().Queues().Create(ctx, q, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			_ = cluster.Muster.SchedulingV1alpha1().Queues().Delete(context.Background(), name, metav1.DeleteOptions{})
		})
	}
	u.createPodGroup("a", ptr.To[int32](2), map[string]string{v1alpha1.LabelQueue: "upstream-qa"})
	u.create("a", 4, "2")
	u.waitBound("a", 4, 30*time.Second)

	u.createPodGroup("b", ptr.To[int32](2), map[string]string{v1alpha1.LabelQueue: "upstream-qb"})
	u.create("b", 2, "2")
	u.waitBound("b", 2, 30*time.Second)
	if n := u.live("a"); n != 2 {
		t.Errorf("gang a has %d members left, want its minCount 2: reclaim takes the members above it, and no more", n)
	}
	p.stop()
	if lines := p.forbidden(); len(lines) > 0 {
		t.Errorf("the chart's RBAC refused the scheduler:\n%s", strings.Join(lines, "\n"))
	}
}

// live counts the pods of the PodGroup that exist and are not being
// deleted.
func (u upstreamWorkload) live(group string) int {
	return u.count(group, func(p *v1.Pod) bool { return p.DeletionTimestamp == nil })
}

package integration

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/util/retry"
	vcv1beta1 "volcano.sh/apis/pkg/apis/scheduling/v1beta1"
	vcclient "volcano.sh/apis/pkg/client/clientset/versioned"

	"github.com/muster-sched/muster/apis/scheduling/v1alpha1"
	"github.com/muster-sched/muster/pkg/simulator"
)

// The kinds of Queue a gang may name: Muster's, and Volcano's, which are
// queues of the same meaning. Queue tests run once per kind.
const (
	musterQueue  = "muster"
	volcanoQueue = "volcano"
)

var queueKinds = []string{musterQueue, volcanoQueue}

// volcanoConfig is the replace-default profile with a second one named
// volcano, as shipped: Muster writes Volcano's PodGroups and Queues only
// where it serves that name.
func volcanoConfig(t testing.TB) string { return readConfig(t, "volcano.yaml") }

// configFor is the configuration a queue test of that kind runs.
func configFor(t *testing.T, kind string) string {
	if kind == volcanoQueue {
		return volcanoConfig(t)
	}
	return gangConfig(t)
}

// volcanoClient is a client of the integration control plane's Volcano CRDs.
func volcanoClient(t testing.TB) vcclient.Interface {
	t.Helper()
	c, err := vcclient.NewForConfig(cluster.JSONConfig())
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// queueOf creates a Queue of that kind with what spec says, deleted at the
// end of the case. A Volcano Queue has no state in its spec: a Closed
// spec closes it through its status, as Volcano's queue controller does.
func (e *env) queueOf(kind, name string, spec v1alpha1.QueueSpec) {
	e.t.Helper()
	if kind == musterQueue {
		e.queue(name, spec)
		return
	}
	vc := volcanoClient(e.t)
	q, err := vc.SchedulingV1beta1().Queues().Create(e.ctx, &vcv1beta1.Queue{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: vcv1beta1.QueueSpec{
			Weight: spec.Weight, Priority: spec.Priority, Parent: spec.Parent, Reclaimable: spec.Reclaimable,
			Capability: spec.Capability, Deserved: spec.Deserved, Guarantee: vcv1beta1.Guarantee{Resource: spec.Guarantee},
		},
	}, metav1.CreateOptions{})
	if err != nil {
		e.t.Fatal(err)
	}
	e.t.Cleanup(func() {
		_ = vc.SchedulingV1beta1().Queues().Delete(context.Background(), q.Name, metav1.DeleteOptions{})
	})
	if spec.State == v1alpha1.QueueClosed {
		e.setQueueState(kind, name, v1alpha1.QueueClosed)
	}
}

// setQueueState opens or closes a queue of that kind.
func (e *env) setQueueState(kind, name string, state v1alpha1.QueueState) {
	e.t.Helper()
	if kind == musterQueue {
		e.updateQueue(name, func(q *v1alpha1.Queue) { q.Spec.State = state })
		return
	}
	vc := volcanoClient(e.t)
	err := wait.PollUntilContextTimeout(e.ctx, 50*time.Millisecond, 10*time.Second, true, func(ctx context.Context) (bool, error) {
		q, err := vc.SchedulingV1beta1().Queues().Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		q.Status.State = vcv1beta1.QueueState(state)
		_, err = vc.SchedulingV1beta1().Queues().UpdateStatus(ctx, q, metav1.UpdateOptions{})
		return err == nil, nil // a conflict with the status controller: again
	})
	if err != nil {
		e.t.Fatalf("setting Volcano queue %s %s: %v", name, state, err)
	}
}

// waitRefusedBy waits until the scheduler refuses a pod of the queue for
// why. Muster writes no state on a Volcano Queue, so a refused pod is what
// says that the scheduler saw it closed: one probe pod after another, each
// deleted if it binds first, until one is refused.
func (e *env) waitRefusedBy(queue, why string) {
	e.t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for i := 0; time.Now().Before(deadline); i++ {
		name := fmt.Sprintf("probe-%d", i)
		e.create(e.member(name, "1", map[string]string{v1alpha1.LabelQueue: queue}))
		var refused, bound bool
		err := wait.PollUntilContextTimeout(e.ctx, 50*time.Millisecond, 5*time.Second, true, func(ctx context.Context) (bool, error) {
			p, err := cluster.Client.CoreV1().Pods(e.ns).Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				return false, err
			}
			bound = p.Spec.NodeName != ""
			for _, c := range p.Status.Conditions {
				if c.Type == v1.PodScheduled && c.Status == v1.ConditionFalse && strings.Contains(c.Message, why) {
					refused = true
				}
			}
			return bound || refused, nil
		})
		if err != nil {
			e.t.Fatalf("probe %s neither bound nor refused for %q: %v", name, why, err)
		}
		if refused {
			return
		}
		if err := cluster.Client.CoreV1().Pods(e.ns).Delete(e.ctx, name, metav1.DeleteOptions{GracePeriodSeconds: new(int64)}); err != nil {
			e.t.Fatal(err)
		}
	}
	e.t.Fatalf("no pod of queue %s refused for %q within 10s", queue, why)
}

// waitVolcanoQueue waits until the Volcano Queue's status satisfies ok.
func (e *env) waitVolcanoQueue(name, what string, ok func(*vcv1beta1.QueueStatus) bool) {
	e.t.Helper()
	vc := volcanoClient(e.t)
	q := &vcv1beta1.Queue{}
	err := wait.PollUntilContextTimeout(e.ctx, 100*time.Millisecond, 10*time.Second, true, func(ctx context.Context) (bool, error) {
		got, err := vc.SchedulingV1beta1().Queues().Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, nil
		}
		q = got
		return ok(&q.Status), nil
	})
	if err != nil {
		e.t.Fatalf("Volcano queue %s: want %s; status is %+v", name, what, q.Status)
	}
}

// TestVolcanoEnqueue: Volcano's Job controller and the training-operator
// create a job's pods only once its PodGroup is Inqueue. A PodGroup whose
// queue has room for its minResources is moved there with no pod in it; one
// whose queue has none stays Pending and says why; once its pods exist, the
// gang is scheduled as any other.
func TestVolcanoEnqueue(t *testing.T) {
	e := newEnv(t)
	e.nodes("n", 2, simulator.NodeShape{CPU: "8", Memory: "32Gi"})
	e.queueOf(volcanoQueue, "team", v1alpha1.QueueSpec{Capability: res("cpu", "6")})
	e.startScheduler(volcanoConfig(t))
	e.volcanoPodGroup("fits", "team", 2, "4")
	e.volcanoPodGroup("too-big", "team", 2, "8")
	e.waitVolcanoPodGroup("fits", "Inqueue with no pod yet", func(s *vcv1beta1.PodGroupStatus) bool {
		return s.Phase == vcv1beta1.PodGroupInqueue
	})
	e.waitVolcanoPodGroup("too-big", "Pending, naming the queue", func(s *vcv1beta1.PodGroupStatus) bool {
		for _, c := range s.Conditions {
			if c.Type == vcv1beta1.PodGroupUnschedulableType && c.Status == v1.ConditionTrue &&
				strings.Contains(c.Message, "queue team: cpu") {
				return s.Phase == vcv1beta1.PodGroupPending
			}
		}
		return false
	})
	members := e.volcanoMembers("fits", 2, "2")
	e.waitBound(members...)
	e.waitVolcanoPodGroup("fits", "Running", func(s *vcv1beta1.PodGroupStatus) bool {
		return s.Phase == vcv1beta1.PodGroupRunning && s.Running == 2
	})
	// Room in the queue is checked again: with its capability raised, the
	// big one is enqueued.
	e.updateVolcanoQueue("team", func(q *vcv1beta1.Queue) { q.Spec.Capability = res("cpu", "16") })
	e.waitVolcanoPodGroup("too-big", "Inqueue once the queue has room", func(s *vcv1beta1.PodGroupStatus) bool {
		return s.Phase == vcv1beta1.PodGroupInqueue
	})
}

// volcanoPodGroup creates a Volcano PodGroup of the case in queue, with
// minMember min and minResources of cpu.
func (e *env) volcanoPodGroup(name, queue string, min int32, cpu string) {
	e.t.Helper()
	_, err := volcanoClient(e.t).SchedulingV1beta1().PodGroups(e.ns).Create(e.ctx, &vcv1beta1.PodGroup{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: vcv1beta1.PodGroupSpec{
			MinMember: min, Queue: queue,
			MinResources: &v1.ResourceList{v1.ResourceCPU: resource.MustParse(cpu)},
		},
	}, metav1.CreateOptions{})
	if err != nil {
		e.t.Fatal(err)
	}
}

// volcanoMembers creates n pods of cpu each named <group>-<i>, joining
// the Volcano PodGroup group as Volcano's Job controller joins them.
func (e *env) volcanoMembers(group string, n int, cpu string) []string {
	members := names(group, n)
	for _, name := range members {
		p := e.member(name, cpu, nil)
		p.Annotations = map[string]string{v1alpha1.VolcanoAnnotationGroupName: group}
		e.create(p)
	}
	return members
}

// waitVolcanoPodGroup waits until the Volcano PodGroup's status satisfies ok.
func (e *env) waitVolcanoPodGroup(name, what string, ok func(*vcv1beta1.PodGroupStatus) bool) {
	e.t.Helper()
	vc := volcanoClient(e.t)
	pg := &vcv1beta1.PodGroup{}
	err := wait.PollUntilContextTimeout(e.ctx, 50*time.Millisecond, 10*time.Second, true, func(ctx context.Context) (bool, error) {
		got, err := vc.SchedulingV1beta1().PodGroups(e.ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, nil
		}
		pg = got
		return ok(&pg.Status), nil
	})
	if err != nil {
		e.t.Fatalf("Volcano PodGroup %s: want %s; status is %+v", name, what, pg.Status)
	}
}

// TestVolcanoQueueAnnotation: a pod in no group that names its queue with
// Volcano's annotation is a gang of one in that queue, held to its share.
func TestVolcanoQueueAnnotation(t *testing.T) {
	e := newEnv(t)
	e.nodes("n", 2, simulator.NodeShape{CPU: "4", Memory: "16Gi"})
	e.queueOf(volcanoQueue, "team", v1alpha1.QueueSpec{Capability: res("cpu", "2")})
	e.startScheduler(gangConfig(t))
	pods := names("p", 2)
	for _, name := range pods {
		p := e.pod(name, map[v1.ResourceName]string{v1.ResourceCPU: "2"})
		p.Annotations = map[string]string{v1alpha1.VolcanoAnnotationQueueName: "team"}
		e.create(p)
	}
	// Room for both on the nodes, but the queue's capability holds one.
	e.waitOneRefused(pods, "queue team")
}

// TestVolcanoEnqueueOnBusyCluster: another queue holds the whole cluster
// and asks for more. A Volcano job's PodGroup is still enqueued (its
// queue's share counts no pod of it yet), its pods are created, and
// reclaim gives its queue its share.
func TestVolcanoEnqueueOnBusyCluster(t *testing.T) {
	e := newEnv(t)
	e.nodes("n", 2, simulator.NodeShape{CPU: "8", Memory: "32Gi"})
	e.queueOf(musterQueue, "other", v1alpha1.QueueSpec{Weight: 1})
	e.queueOf(volcanoQueue, "team", v1alpha1.QueueSpec{Weight: 1})
	e.startScheduler(volcanoConfig(t))
	others := e.queuePods("other", 24, "1")
	err := wait.PollUntilContextTimeout(e.ctx, 50*time.Millisecond, 20*time.Second, true, func(context.Context) (bool, error) {
		return count(e.bound(), others) == 16, nil
	})
	if err != nil {
		t.Fatalf("queue other holds %d cpu, want the cluster's 16", count(e.bound(), others))
	}
	e.volcanoPodGroup("job", "team", 4, "8")
	e.waitVolcanoPodGroup("job", "Inqueue on a full cluster", func(s *vcv1beta1.PodGroupStatus) bool {
		return s.Phase == vcv1beta1.PodGroupInqueue
	})
	members := e.volcanoMembers("job", 4, "2")
	e.waitBoundWithin(20*time.Second, members...)
}

// TestVolcanoLeftToVcScheduler: a scheduler that does not serve the name
// volcano (beside a running vc-scheduler, say) writes nothing on Volcano's
// PodGroups and Queues, whose status vc-scheduler writes.
func TestVolcanoLeftToVcScheduler(t *testing.T) {
	e := newEnv(t)
	e.nodes("n", 1, simulator.NodeShape{CPU: "8", Memory: "32Gi"})
	e.queueOf(volcanoQueue, "team", v1alpha1.QueueSpec{})
	e.startScheduler(gangConfig(t))
	vc := volcanoClient(t)
	e.volcanoPodGroup("job", "team", 1, "1")
	// Two resyncs of the queue status controller, and many retries of the
	// PodGroup's enqueue, were it on.
	deadline := time.Now().Add(2500 * time.Millisecond)
	for time.Now().Before(deadline) {
		pg, err := vc.SchedulingV1beta1().PodGroups(e.ns).Get(e.ctx, "job", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		q, err := vc.SchedulingV1beta1().Queues().Get(e.ctx, "team", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if !equality.Semantic.DeepEqual(pg.Status, vcv1beta1.PodGroupStatus{}) || !equality.Semantic.DeepEqual(q.Status, vcv1beta1.QueueStatus{}) {
			t.Fatalf("Muster wrote Volcano status without serving volcano: PodGroup %+v, Queue %+v", pg.Status, q.Status)
		}
		time.Sleep(100 * time.Millisecond)
	}
	// Nor Events: why a gang waits goes to its members.
	e.volcanoPodGroup("short", "team", 2, "2")
	e.volcanoMembers("short", 1, "1")
	e.waitEvent("short-0", "GangInvalid", "1 members exist, minMember 2")
	events, err := cluster.Client.EventsV1().Events(e.ns).List(e.ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, ev := range events.Items {
		if ev.Regarding.Kind == "PodGroup" {
			t.Errorf("Muster recorded an Event on Volcano's PodGroup %s without serving volcano: %s %s", ev.Regarding.Name, ev.Reason, ev.Note)
		}
	}
}

// updateQueue changes a Muster Queue's spec; a conflict with the status
// controller's writes is tried again.
func (e *env) updateQueue(name string, change func(*v1alpha1.Queue)) {
	e.t.Helper()
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		q, err := cluster.Muster.SchedulingV1alpha1().Queues().Get(e.ctx, name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		change(q)
		_, err = cluster.Muster.SchedulingV1alpha1().Queues().Update(e.ctx, q, metav1.UpdateOptions{})
		return err
	})
	if err != nil {
		e.t.Fatal(err)
	}
}

// updateVolcanoQueue is updateQueue for a Volcano Queue.
func (e *env) updateVolcanoQueue(name string, change func(*vcv1beta1.Queue)) {
	e.t.Helper()
	vc := volcanoClient(e.t)
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		q, err := vc.SchedulingV1beta1().Queues().Get(e.ctx, name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		change(q)
		_, err = vc.SchedulingV1beta1().Queues().Update(e.ctx, q, metav1.UpdateOptions{})
		return err
	})
	if err != nil {
		e.t.Fatal(err)
	}
}

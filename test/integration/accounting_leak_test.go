package integration

import (
	"context"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/muster-sched/muster/apis/scheduling/v1alpha1"
	"github.com/muster-sched/muster/pkg/simulator"
)

// TestUnmanagedPodOffTheDividedNodes (issue 29, item 3): what the queues
// divide is the allocatable of the ready, schedulable nodes less the
// requests of the unmanaged pods (in no gang and no queue) bound to those
// nodes. A pod bound to a node that is not counted — deleted under it (a
// test's nodes deleted before its pods, no pod garbage collector),
// cordoned, or not ready — takes nothing of that allocatable, and must
// not be subtracted from it as well.
//
// Two ready nodes of 8 cpu and one 1-cpu plain pod on a third node that is
// then taken out of the count; one queue asks for 20 cpu. The queue must
// deserve the whole 16 cpu, and get them: 16 of its pods bound. Counting
// the pod leaves the queue 15 cpu, and a cpu free with its pods pending.
func TestUnmanagedPodOffTheDividedNodes(t *testing.T) {
	tests := []struct {
		name string
		// before is true when the node leaves the count before the
		// scheduler starts (the scheduler's first lists), false when it
		// leaves while it runs (an event).
		before bool
		// remove takes the node out of the count.
		remove func(e *env, node string)
	}{
		{name: "node deleted before the scheduler starts", before: true, remove: deleteNode},
		{name: "node deleted while the scheduler runs", remove: deleteNode},
		{name: "node cordoned", remove: cordonNode},
		{name: "node not ready", remove: unreadyNode},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnv(t)
			e.nodes("n", 2, simulator.NodeShape{CPU: "8", Memory: "32Gi"})
			// The queue's pods keep off the third node while it counts.
			e.nodes("away", 1, simulator.NodeShape{CPU: "4", Memory: "16Gi", Taints: []v1.Taint{{
				Key: "example.com/away", Effect: v1.TaintEffectNoSchedule,
			}}})
			plain := e.pod("plain", map[v1.ResourceName]string{v1.ResourceCPU: "1"})
			plain.Spec.NodeName = "away-0"
			e.create(plain)
			waitPhase(t, e, []string{"plain"}, v1.PodRunning, 10*time.Second)
			if tt.before {
				tt.remove(e, "away-0")
			}
			e.queue("lone", v1alpha1.QueueSpec{Weight: 1})
			pods := e.queuePods("lone", 20, "1")
			e.startScheduler(gangConfig(t))
			if !tt.before {
				// The accounting took in the node and the pod: the queue
				// deserves 19 cpu and holds what fits, 16.
				e.waitBoundAtLeast(pods, 16)
				tt.remove(e, "away-0")
			}
			e.waitDeserved("lone", "16")
			e.waitShares(map[string]float64{"lone": 16}, 0)
		})
	}
}

// TestQueuePodsOffTheDividedNodes: what a queue's members hold on a node
// taken out of the count still counts in its allocated, so it is added to
// what the queues divide. Otherwise the queue's share shrinks by it, and
// room on the counted nodes stays idle while its pods wait.
//
// A queue holds 4 cpu on a 4-cpu node, which then leaves the count, and
// asks for 20 more on two 8-cpu nodes: it must deserve 20 cpu and hold
// them, 16 of its waiting pods bound. Dividing only the counted 16 cpu
// binds 12.
func TestQueuePodsOffTheDividedNodes(t *testing.T) {
	tests := []struct {
		name   string
		remove func(e *env, node string)
	}{
		{name: "node deleted", remove: deleteNode},
		{name: "node cordoned", remove: cordonNode},
		{name: "node not ready", remove: unreadyNode},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnv(t)
			e.nodes("n", 2, simulator.NodeShape{CPU: "8", Memory: "32Gi"})
			e.nodes("away", 1, simulator.NodeShape{CPU: "4", Memory: "16Gi"})
			e.queue("lone", v1alpha1.QueueSpec{Weight: 1})
			held := names("held", 4)
			for _, name := range held {
				p := e.member(name, "1", map[string]string{v1alpha1.LabelQueue: "lone"})
				p.Spec.NodeName = "away-0"
				e.create(p)
			}
			waitPhase(t, e, held, v1.PodRunning, 10*time.Second)
			tt.remove(e, "away-0")
			pods := e.queuePods("lone", 20, "1")
			e.startScheduler(gangConfig(t))
			e.waitDeserved("lone", "20")
			e.waitShares(map[string]float64{"lone": 20}, 0)
			if got := count(e.bound(), pods); got != 16 {
				t.Errorf("%d of the queue's waiting pods bound, want 16", got)
			}
		})
	}
}

// waitDeserved waits until the queue's status shows cpu deserved; it fails
// with the figure it shows if that does not come within 10 s.
func (e *env) waitDeserved(name, cpu string) {
	e.t.Helper()
	var got *resource.Quantity
	err := wait.PollUntilContextTimeout(e.ctx, 100*time.Millisecond, 10*time.Second, true, func(ctx context.Context) (bool, error) {
		q, err := cluster.Muster.SchedulingV1alpha1().Queues().Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, nil
		}
		if d, ok := q.Status.Deserved[v1.ResourceCPU]; ok {
			got = &d
		}
		return quantityIs(q.Status.Deserved, v1.ResourceCPU, cpu), nil
	})
	if err != nil {
		e.t.Fatalf("queue %s deserves cpu %v, want %s", name, got, cpu)
	}
}

// waitBoundAtLeast waits until at least n of the pods are bound.
func (e *env) waitBoundAtLeast(names []string, n int) {
	e.t.Helper()
	err := wait.PollUntilContextTimeout(e.ctx, 50*time.Millisecond, 30*time.Second, true, func(context.Context) (bool, error) {
		return count(e.bound(), names) >= n, nil
	})
	if err != nil {
		e.t.Fatalf("fewer than %d of %v bound: %v", n, names, e.bound())
	}
}

func deleteNode(e *env, name string) {
	e.t.Helper()
	if err := cluster.Client.CoreV1().Nodes().Delete(e.ctx, name, metav1.DeleteOptions{}); err != nil {
		e.t.Fatal(err)
	}
}

func cordonNode(e *env, name string) {
	e.t.Helper()
	patch := []byte(`{"spec":{"unschedulable":true}}`)
	if _, err := cluster.Client.CoreV1().Nodes().Patch(e.ctx, name, types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
		e.t.Fatal(err)
	}
}

func unreadyNode(e *env, name string) {
	e.t.Helper()
	n, err := cluster.Client.CoreV1().Nodes().Get(e.ctx, name, metav1.GetOptions{})
	if err != nil {
		e.t.Fatal(err)
	}
	for i := range n.Status.Conditions {
		if c := &n.Status.Conditions[i]; c.Type == v1.NodeReady {
			c.Status, c.Reason = v1.ConditionFalse, "SimulatedNodeDown"
		}
	}
	if _, err := cluster.Client.CoreV1().Nodes().UpdateStatus(e.ctx, n, metav1.UpdateOptions{}); err != nil {
		e.t.Fatal(err)
	}
}

package integration

import (
	"context"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/util/retry"
	vcv1beta1 "volcano.sh/apis/pkg/apis/scheduling/v1beta1"

	"github.com/muster-sched/muster/apis/scheduling/v1alpha1"
	"github.com/muster-sched/muster/pkg/simulator"
)

// lifecycleTimeout bounds each wait of these cases: generous, for a loaded
// machine; a case that works is done in seconds.
const lifecycleTimeout = time.Minute

// TestQueueLifecycle: queues that change under running work, once per
// kind of queue. Muster writes no deserved share into a Volcano Queue's
// status: there, what the queues take shows in what binds and in the
// allocated and per-phase figures it writes.
func TestQueueLifecycle(t *testing.T) {
	for _, kind := range queueKinds {
		t.Run(kind+"/a deleted queue's running gang is accounted in and limited by default", func(t *testing.T) {
			e := newEnv(t)
			e.nodes("n", 2, simulator.NodeShape{CPU: "4", Memory: "16Gi"})
			e.queueOf(kind, "q1", v1alpha1.QueueSpec{Weight: 1})
			e.startScheduler(configFor(t, kind))
			// Without its ceiling, default deserves what its gangs ask for:
			// the 8 cpu would take both extra members below.
			e.capDefault(res("cpu", "5"))
			running := e.gangOf("elastic", "q1", 2, 4, "1", nil)
			e.waitBound(running...)
			e.waitAllocated(kind, "q1", "4")

			e.deleteQueue(kind, "q1")
			// default is a Muster Queue, whichever kind q1 was.
			e.waitAllocated(musterQueue, v1alpha1.DefaultQueue, "4")

			// Two extra members: default's ceiling (5) takes one.
			labels := map[string]string{v1alpha1.LabelPodGroup: "elastic", v1alpha1.LabelQueue: "q1"}
			extra := []string{"elastic-4", "elastic-5"}
			for _, name := range extra {
				e.create(e.member(name, "1", labels))
			}
			refused := e.waitOneRefused(extra, "queue default: cpu 5/5 deserved, needs 1 more")
			e.waitAllocated(musterQueue, v1alpha1.DefaultQueue, "5")
			e.staysUnbound(2*time.Second, refused)
			bound := e.bound()
			for _, name := range running {
				if bound[name] == "" {
					t.Errorf("member %s of the running gang is no longer bound (bound: %v)", name, bound)
				}
			}
		})

		t.Run(kind+"/closed and orphan queues take no share", func(t *testing.T) {
			e := newEnv(t)
			e.nodes("n", 2, simulator.NodeShape{CPU: "4", Memory: "16Gi"})
			e.queueOf(kind, "closed", v1alpha1.QueueSpec{Weight: 1, State: v1alpha1.QueueClosed})
			e.queueOf(kind, "orphan", v1alpha1.QueueSpec{Weight: 1, Parent: "missing"})
			e.queueOf(kind, "open", v1alpha1.QueueSpec{Weight: 1})
			// Work waits in the queues that cannot admit it, asking for the
			// whole cluster each.
			e.queuePods("closed", 8, "1")
			e.queuePods("orphan", 8, "1")
			// A gang that starts only with the whole cluster: a third of it
			// each, as the weights alone would give, does not admit it.
			open := e.gangOf("whole", "open", 8, 8, "1", nil)
			e.startScheduler(configFor(t, kind))

			e.waitBoundWithin(lifecycleTimeout, open...)
			e.waitAllocated(kind, "open", "8")
			if kind == volcanoQueue {
				// Each of their pods is a gang of one, waiting.
				for _, name := range []string{"closed", "orphan"} {
					e.waitVolcanoQueue(name, "8 gangs pending, nothing allocated", func(s *vcv1beta1.QueueStatus) bool {
						return s.Pending == 8 && s.Running == 0 && s.Allocated.Cpu().IsZero()
					})
				}
				return
			}
			e.waitQueueWithin("open", "deserved all 8 cpu", func(s *v1alpha1.QueueStatus) bool {
				return quantityIs(s.Deserved, "cpu", "8")
			})
			for _, name := range []string{"closed", "orphan"} {
				e.waitQueueWithin(name, "deserved nothing", func(s *v1alpha1.QueueStatus) bool {
					return quantityIs(s.Deserved, "cpu", "0") && s.Allocated.Cpu().IsZero()
				})
			}
		})
	}
}

// capDefault sets the default queue's capability for the case; its spec
// is restored at the end. The scheduler creates the queue if it is gone.
func (e *env) capDefault(capability map[v1.ResourceName]resource.Quantity) {
	e.t.Helper()
	queues := cluster.Muster.SchedulingV1alpha1().Queues()
	var before v1alpha1.QueueSpec
	err := wait.PollUntilContextTimeout(e.ctx, 100*time.Millisecond, lifecycleTimeout, true, func(ctx context.Context) (bool, error) {
		err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
			q, err := queues.Get(ctx, v1alpha1.DefaultQueue, metav1.GetOptions{})
			if err != nil {
				return err
			}
			before = *q.Spec.DeepCopy()
			q.Spec.Capability = capability
			_, err = queues.Update(ctx, q, metav1.UpdateOptions{})
			return err
		})
		return err == nil, nil
	})
	if err != nil {
		e.t.Fatalf("capping the default queue: %v", err)
	}
	e.t.Cleanup(func() {
		ctx := context.Background()
		err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
			q, err := queues.Get(ctx, v1alpha1.DefaultQueue, metav1.GetOptions{})
			if apierrors.IsNotFound(err) {
				return nil
			}
			if err != nil {
				return err
			}
			q.Spec = before
			_, err = queues.Update(ctx, q, metav1.UpdateOptions{})
			return err
		})
		if err != nil {
			e.t.Errorf("restoring the default queue: %v", err)
		}
	})
}

// waitQueueWithin waits, up to lifecycleTimeout, until the queue's status
// satisfies ok.
func (e *env) waitQueueWithin(name, what string, ok func(*v1alpha1.QueueStatus) bool) {
	e.t.Helper()
	q := &v1alpha1.Queue{}
	err := wait.PollUntilContextTimeout(e.ctx, 100*time.Millisecond, lifecycleTimeout, true, func(ctx context.Context) (bool, error) {
		got, err := cluster.Muster.SchedulingV1alpha1().Queues().Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, nil
		}
		q = got
		return ok(&q.Status), nil
	})
	if err != nil {
		e.t.Fatalf("queue %s: want %s; status is %+v", name, what, q.Status)
	}
}

// waitOneRefused waits until all of the pods but one are bound and that one
// is unschedulable for a reason containing why; it returns that one.
func (e *env) waitOneRefused(names []string, why string) string {
	e.t.Helper()
	var refused, got string
	err := wait.PollUntilContextTimeout(e.ctx, 100*time.Millisecond, lifecycleTimeout, true, func(ctx context.Context) (bool, error) {
		refused, got = "", ""
		for _, name := range names {
			p, err := cluster.Client.CoreV1().Pods(e.ns).Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				return false, err
			}
			if p.Spec.NodeName != "" {
				continue
			}
			if refused != "" {
				return false, nil // two pending
			}
			refused = name
			for _, c := range p.Status.Conditions {
				if c.Type == v1.PodScheduled && c.Status == v1.ConditionFalse {
					got = c.Message
				}
			}
		}
		return refused != "" && strings.Contains(got, why), nil
	})
	if err != nil {
		e.t.Fatalf("want one of %v pending for %q; pending %q: %q", names, why, refused, got)
	}
	return refused
}

package integration

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/muster-sched/muster/apis/scheduling/v1alpha1"
	queuecontroller "github.com/muster-sched/muster/pkg/controllers/queue"
	"github.com/muster-sched/muster/pkg/simulator"
)

// TestQueueEvents: what a Queue says about itself, in its Admitting
// condition and its Events, as `kubectl describe mq` shows them.
func TestQueueEvents(t *testing.T) {
	t.Run("refused at the ceiling, closing, closed, open again", func(t *testing.T) {
		e := newEnv(t)
		e.nodes("n", 4, simulator.NodeShape{CPU: "8", Memory: "32Gi"})
		e.queue("ev-small", v1alpha1.QueueSpec{Capability: res("cpu", "6")})
		e.startScheduler(gangConfig(t))
		running := e.gangOf("first", "ev-small", 2, 2, "2", nil)
		e.waitBound(running...)
		e.waitAdmitting("ev-small", metav1.ConditionTrue, queuecontroller.ReasonAdmitting, "it admits new gangs")

		big := e.gangOf("big", "ev-small", 4, 4, "2", nil)
		why := "queue ev-small: cpu 4 allocated+inqueue of 6 deserved, gang needs 8"
		e.waitQueueEvent("ev-small", queuecontroller.EventAdmissionRefused, fmt.Sprintf("gang %s/big not admitted: %s", e.ns, why))
		e.waitAdmitting("ev-small", metav1.ConditionFalse, queuecontroller.ReasonAtCeiling, fmt.Sprintf("1 gang waits for room; %s/big: %s", e.ns, why))

		e.setQueueState(musterQueue, "ev-small", v1alpha1.QueueClosed)
		e.waitQueueEvent("ev-small", queuecontroller.EventClosing, "1 running, 0 inqueue and 0 unknown gangs finish first")
		e.waitAdmitting("ev-small", metav1.ConditionFalse, queuecontroller.ReasonClosing, "the queue is closed: it admits no new gang; 1 running")

		e.deletePods(running...)
		e.waitQueueEvent("ev-small", queuecontroller.EventClosed, "no gang of it runs and it admits none")
		e.waitAdmitting("ev-small", metav1.ConditionFalse, queuecontroller.ReasonClosed, "set spec.state to Open")

		e.setQueueState(musterQueue, "ev-small", v1alpha1.QueueOpen)
		e.waitQueueEvent("ev-small", queuecontroller.EventOpened, "it admits new gangs")
		// Still too big for the queue's 6 cpu, now with nothing held.
		e.waitAdmitting("ev-small", metav1.ConditionFalse, queuecontroller.ReasonAtCeiling,
			"queue ev-small: cpu 0 allocated+inqueue of 6 deserved, gang needs 8")
		e.staysUnbound(time.Second, big...)
	})

	t.Run("invalid, then valid once its parent exists", func(t *testing.T) {
		e := newEnv(t)
		e.nodes("n", 1, simulator.NodeShape{CPU: "8", Memory: "32Gi"})
		e.queue("ev-child", v1alpha1.QueueSpec{Parent: "ev-parent"})
		e.startScheduler(gangConfig(t))
		e.waitQueueEvent("ev-child", queuecontroller.EventInvalid, `parent queue "ev-parent" does not exist`)
		e.waitAdmitting("ev-child", metav1.ConditionFalse, queuecontroller.ReasonInvalid, `parent queue "ev-parent" does not exist`)

		e.queue("ev-parent", v1alpha1.QueueSpec{})
		e.waitQueueEvent("ev-child", queuecontroller.EventValid, "valid again")
		e.waitAdmitting("ev-child", metav1.ConditionTrue, queuecontroller.ReasonAdmitting, "")
		e.waitAdmitting("ev-parent", metav1.ConditionFalse, queuecontroller.ReasonNotLeaf, "it has child queues (ev-child)")
	})

	t.Run("reclaim tells both queues", func(t *testing.T) {
		e := newEnv(t)
		e.reclaimQueuesOf(musterQueue)
		e.fillQueueA(t, musterQueue)
		b := e.gangOf("b", "qb", 4, 4, "2", nil)
		e.waitBoundWithin(lifecycleTimeout, b...)
		// One pod of each gang of qa (its members above minMember), told
		// with the figures the victims were chosen on, however far the
		// evictions have gone when the Event is written.
		for i := range 4 {
			e.waitQueueEvent("qa", "Reclaimed", fmt.Sprintf("evicted 1 pods of gang %s/a%d (cpu=2) for queue qb, which is below its deserved share (cpu 0 of 8 deserved); queue qa holds cpu 40 of 32 deserved", e.ns, i))
			e.waitQueueEvent("qb", "Reclaiming", fmt.Sprintf("evicted 1 pods of gang %s/a%d (cpu=2) from queue qa, which is above its deserved share (cpu 40 of 32 deserved), for gang %s/b; queue qb holds cpu 0 of 8 deserved", e.ns, i, e.ns))
		}
	})
}

// deletePods deletes the case's pods by name, at once.
func (e *env) deletePods(names ...string) {
	e.t.Helper()
	for _, name := range names {
		err := cluster.Client.CoreV1().Pods(e.ns).Delete(e.ctx, name, metav1.DeleteOptions{GracePeriodSeconds: new(int64)})
		if err != nil {
			e.t.Fatal(err)
		}
	}
}

// waitAdmitting waits until the queue's Admitting condition has the
// status and reason, and a message containing substr.
func (e *env) waitAdmitting(name string, status metav1.ConditionStatus, reason, substr string) {
	e.t.Helper()
	var got *metav1.Condition
	err := wait.PollUntilContextTimeout(e.ctx, 100*time.Millisecond, lifecycleTimeout, true, func(ctx context.Context) (bool, error) {
		q, err := cluster.Muster.SchedulingV1alpha1().Queues().Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, nil
		}
		got = meta.FindStatusCondition(q.Status.Conditions, queuecontroller.ConditionAdmitting)
		return got != nil && got.Status == status && got.Reason == reason && strings.Contains(got.Message, substr), nil
	})
	if err != nil {
		e.t.Fatalf("queue %s: want Admitting=%s %s containing %q; got %+v", name, status, reason, substr, got)
	}
}

// waitQueueEvent waits for an Event of the reason about the queue named
// (this case's: Events are matched by the queue's UID, as queue names
// come back in other cases) whose note contains substr.
func (e *env) waitQueueEvent(name, reason, substr string) {
	e.t.Helper()
	q, err := cluster.Muster.SchedulingV1alpha1().Queues().Get(e.ctx, name, metav1.GetOptions{})
	if err != nil {
		e.t.Fatal(err)
	}
	var seen []string
	err = wait.PollUntilContextTimeout(e.ctx, 100*time.Millisecond, lifecycleTimeout, true, func(ctx context.Context) (bool, error) {
		events, err := e.queueEvents(ctx, q.UID)
		if err != nil {
			return false, nil // seen stays the last list read
		}
		seen = events
		return slices.ContainsFunc(events, func(ev string) bool {
			return strings.HasPrefix(ev, reason+": ") && strings.Contains(ev, substr)
		}), nil
	})
	if err != nil {
		e.t.Fatalf("no Event %s on queue %s containing %q; its events: %q", reason, name, substr, seen)
	}
}

// queueEvents lists "reason: note" of the Events about the object of that
// UID. A cluster-scoped object's Events are in the namespace default.
func (e *env) queueEvents(ctx context.Context, uid types.UID) ([]string, error) {
	events, err := cluster.Client.EventsV1().Events(metav1.NamespaceDefault).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, err
	}
	var out []string
	for _, ev := range events.Items {
		if ev.Regarding.UID == uid {
			out = append(out, ev.Reason+": "+ev.Note)
		}
	}
	return out, nil
}

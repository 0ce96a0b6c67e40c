package integration

import (
	"context"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/util/retry"

	"github.com/muster-sched/muster/apis/scheduling/v1alpha1"
	"github.com/muster-sched/muster/pkg/simulator"
)

// waitPodGroup waits until the PodGroup's status satisfies ok.
func (e *env) waitPodGroup(name string, what string, ok func(*v1alpha1.PodGroupStatus) bool) *v1alpha1.PodGroup {
	e.t.Helper()
	pg := &v1alpha1.PodGroup{}
	err := wait.PollUntilContextTimeout(e.ctx, 50*time.Millisecond, 10*time.Second, true, func(ctx context.Context) (bool, error) {
		got, err := cluster.Muster.SchedulingV1alpha1().PodGroups(e.ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, nil // a failed Get returns an empty object: keep the last one
		}
		pg = got
		return ok(&pg.Status), nil
	})
	if err != nil {
		e.t.Fatalf("PodGroup %s: want %s; status is %+v", name, what, pg.Status)
	}
	return pg
}

func scheduledCondition(s *v1alpha1.PodGroupStatus) *metav1.Condition {
	return meta.FindStatusCondition(s.Conditions, "Scheduled")
}

// waitEvent waits for an Event of the reason about the object named whose
// note contains substr.
func (e *env) waitEvent(regarding, reason, substr string) {
	e.t.Helper()
	var seen []string
	err := wait.PollUntilContextTimeout(e.ctx, 100*time.Millisecond, 10*time.Second, true, func(ctx context.Context) (bool, error) {
		events, err := cluster.Client.EventsV1().Events(e.ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err
		}
		seen = seen[:0]
		for _, ev := range events.Items {
			seen = append(seen, ev.Regarding.Name+" "+ev.Reason+": "+ev.Note)
			if ev.Regarding.Name == regarding && ev.Reason == reason && strings.Contains(ev.Note, substr) {
				return true, nil
			}
		}
		return false, nil
	})
	if err != nil {
		e.t.Fatalf("no Event %s on %s containing %q; events: %q", reason, regarding, substr, seen)
	}
}

func TestPodGroupStatus(t *testing.T) {
	e := newEnv(t)
	e.nodes("n", 3, simulator.NodeShape{CPU: "4", Memory: "16Gi"})
	// A plain pod takes half a node: the queue still has room for the gang
	// (12 − 2 ≥ 9 cpu), but no node for its third member.
	blocker := e.pod("blocker", map[v1.ResourceName]string{v1.ResourceCPU: "2"})
	blocker.Spec.NodeName = "n-2"
	e.create(blocker)
	e.startScheduler(gangConfig(t))
	e.podGroup("train", v1alpha1.PodGroupSpec{MinMember: 3})
	labels := map[string]string{v1alpha1.LabelPodGroup: "train"}
	// The members run until the test ends them: a run time would race the
	// poll that must see the gang Running.
	member := func(name string) *v1.Pod { return e.member(name, "3", labels) }
	e.create(member("train-0"), member("train-1"))

	e.waitPodGroup("train", "Pending: too few members", func(s *v1alpha1.PodGroupStatus) bool {
		c := scheduledCondition(s)
		return s.Phase == v1alpha1.PodGroupPending && c != nil && c.Reason == "Invalid" && c.Message == "2 members exist, minMember 3"
	})
	// events/v1 folds repeats of a reason into a series that keeps the first
	// note (it may say "1 members exist"); the condition has the latest.
	e.waitEvent("train", "Invalid", "members exist, minMember 3")

	// Three members of 3 cpu: valid and admitted, but it cannot fit, so it
	// gives its admission back.
	e.create(member("train-2"))
	e.waitPodGroup("train", "Pending and unschedulable, saying why", func(s *v1alpha1.PodGroupStatus) bool {
		c := scheduledCondition(s)
		return s.Phase == v1alpha1.PodGroupPending && c != nil && c.Reason == "Unschedulable" &&
			strings.HasPrefix(c.Message, "placeable 2/3: member ") && strings.Contains(c.Message, "3 Insufficient cpu") && s.ScheduleStartTime != nil
	})
	e.waitEvent("train", "Unschedulable", "placeable 2/3")

	if err := cluster.Client.CoreV1().Pods(e.ns).Delete(e.ctx, "blocker", metav1.DeleteOptions{GracePeriodSeconds: new(int64)}); err != nil {
		t.Fatal(err)
	}
	e.waitPodGroup("train", "Running", func(s *v1alpha1.PodGroupStatus) bool {
		c := scheduledCondition(s)
		return s.Phase == v1alpha1.PodGroupRunning && s.Scheduled == 3 && c != nil && c.Status == metav1.ConditionTrue
	})
	e.succeed("train-0", "train-1", "train-2")
	pg := e.waitPodGroup("train", "Completed", func(s *v1alpha1.PodGroupStatus) bool {
		return s.Phase == v1alpha1.PodGroupCompleted && s.Succeeded == 3
	})
	if pg.Status.ObservedGeneration != pg.Generation {
		t.Errorf("observedGeneration %d, generation %d", pg.Status.ObservedGeneration, pg.Generation)
	}
	e.waitEvent("train", "Completed", "phase Running -> Completed")
}

// succeed ends the pods as their kubelet would when they exit 0.
func (e *env) succeed(names ...string) {
	e.t.Helper()
	for _, name := range names {
		err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
			p, err := cluster.Client.CoreV1().Pods(e.ns).Get(e.ctx, name, metav1.GetOptions{})
			if err != nil {
				return err
			}
			p.Status.Phase = v1.PodSucceeded
			_, err = cluster.Client.CoreV1().Pods(e.ns).UpdateStatus(e.ctx, p, metav1.UpdateOptions{})
			return err
		})
		if err != nil {
			e.t.Fatal(err)
		}
	}
}

// TestLabelGroupEvents: a gang with no PodGroup says why it waits in Events
// on its pods.
func TestLabelGroupEvents(t *testing.T) {
	e := newEnv(t)
	e.nodes("n", 1, simulator.NodeShape{CPU: "4", Memory: "16Gi"})
	e.startScheduler(gangConfig(t))
	e.create(e.member("bad-0", "1", map[string]string{v1alpha1.LabelPodGroup: "g", v1alpha1.LabelMinAvailable: "abc"}))
	e.waitEvent("bad-0", "GangInvalid", `label muster.dev/min-available="abc" is not a whole number >= 1`)
}

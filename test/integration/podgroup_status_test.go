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
	spv1alpha1 "sigs.k8s.io/scheduler-plugins/apis/scheduling/v1alpha1"
	spclient "sigs.k8s.io/scheduler-plugins/pkg/generated/clientset/versioned"
	vcv1beta1 "volcano.sh/apis/pkg/apis/scheduling/v1beta1"
	vcclient "volcano.sh/apis/pkg/client/clientset/versioned"

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

// TestPodGroupStatus follows a gang through its life (too few members, no
// room, running, completed) with a PodGroup of each kind whose status
// Muster writes, and reads that status as the kind's own tools read it.
func TestPodGroupStatus(t *testing.T) {
	for _, k := range podGroupKinds(t) {
		t.Run(k.name, func(t *testing.T) {
			e := newEnv(t)
			e.nodes("n", 3, simulator.NodeShape{CPU: "4", Memory: "16Gi"})
			// A plain pod takes half a node: the queue still has room for
			// the gang (12 − 2 ≥ 9 cpu), but no node for its third member.
			blocker := e.pod("blocker", map[v1.ResourceName]string{v1.ResourceCPU: "2"})
			blocker.Spec.NodeName = "n-2"
			e.create(blocker)
			e.startScheduler(volcanoConfig(t))
			k.create(e, "train", 3)
			// The members run until the test ends them: a run time would
			// race the poll that must see the gang Running.
			member := func(name string) *v1.Pod {
				p := e.member(name, "3", nil)
				k.join(p, "train")
				return p
			}
			e.create(member("train-0"), member("train-1"))

			e.waitPodGroupKind(k, "train", k.phases.tooFew+": too few members", func(v *podGroupView) bool {
				return (v.phase == k.phases.tooFew || k.tooFewEnqueued != "" && v.phase == k.tooFewEnqueued) &&
					(k.invalidReason == "" || v.why != nil && v.why.Reason == k.invalidReason && v.why.Message == "2 members exist, minMember 3")
			})
			// events/v1 folds repeats of a reason into a series that keeps
			// the first note (it may say "1 members exist"); the condition
			// has the latest.
			k.waitEvent(e, "train", "Invalid", "members exist, minMember 3")

			// Three members of 3 cpu: valid and admitted, but it cannot fit,
			// so it gives its admission back.
			e.create(member("train-2"))
			e.waitPodGroupKind(k, "train", k.phases.unschedulable+" and unschedulable, saying why", func(v *podGroupView) bool {
				return v.phase == k.phases.unschedulable && (v.started || !k.scheduleStartTime) &&
					(k.unschedulableReason == "" || v.why != nil && v.why.Reason == k.unschedulableReason &&
						strings.HasPrefix(v.why.Message, "placeable 2/3: member ") && strings.Contains(v.why.Message, "3 Insufficient cpu"))
			})
			k.waitEvent(e, "train", "Unschedulable", "placeable 2/3")

			if err := cluster.Client.CoreV1().Pods(e.ns).Delete(e.ctx, "blocker", metav1.DeleteOptions{GracePeriodSeconds: new(int64)}); err != nil {
				t.Fatal(err)
			}
			e.waitPodGroupKind(k, "train", k.phases.running, func(v *podGroupView) bool {
				return v.phase == k.phases.running && v.running == 3 && (v.placed || !k.placedCondition)
			})
			e.succeed("train-0", "train-1", "train-2")
			v := e.waitPodGroupKind(k, "train", k.phases.completed, func(v *podGroupView) bool {
				return v.phase == k.phases.completed && v.succeeded == 3
			})
			if k.observesGeneration && v.observedGeneration != v.generation {
				t.Errorf("observedGeneration %d, generation %d", v.observedGeneration, v.generation)
			}
			if k.podGroupEvents {
				e.waitEvent("train", "Completed", "phase Running -> Completed")
			}
			// Nothing changes any more: nothing is written, though a write
			// of Volcano's PodGroup bumps its generation.
			time.Sleep(time.Second)
			if again := k.get(e, "train"); again.resourceVersion != v.resourceVersion {
				t.Errorf("PodGroup written again with nothing changed: generation %d -> %d, status %+v -> %+v",
					v.generation, again.generation, v.raw, again.raw)
			}
		})
	}
}

// podGroupKind is a kind of PodGroup whose status Muster writes: how to
// make one and its members, how its status reads, and what it says at each
// step of TestPodGroupStatus.
type podGroupKind struct {
	name   string
	create func(e *env, name string, minMember int32)
	// join makes p a member of the PodGroup group.
	join func(p *v1.Pod, group string)
	get  func(e *env, name string) *podGroupView

	phases struct{ tooFew, unschedulable, running, completed string }
	// tooFewEnqueued is the phase of a PodGroup with too few members that
	// was enqueued before its pods came ("" where the kind has no enqueue).
	tooFewEnqueued string
	// invalidReason and unschedulableReason are the reasons of the
	// condition saying why the gang waits; "" where the kind has none.
	invalidReason, unschedulableReason string
	// placedCondition: a condition says that the gang was placed.
	placedCondition    bool
	scheduleStartTime  bool
	observesGeneration bool
	// podGroupEvents: Events are recorded on the PodGroup; else they are
	// on its pending members.
	podGroupEvents bool
}

// podGroupView is what TestPodGroupStatus reads of a PodGroup of any kind.
type podGroupView struct {
	phase              string
	running, succeeded int32
	// why is the condition saying why the gang waits; placed says that
	// the condition its tools read says it was placed.
	why     *metav1.Condition
	placed  bool
	started bool
	// raw is the status as read.
	raw                            any
	generation, observedGeneration int64
	resourceVersion                string
}

func podGroupKinds(t *testing.T) []podGroupKind {
	sp, err := spclient.NewForConfig(cluster.JSONConfig())
	if err != nil {
		t.Fatal(err)
	}
	vc, err := vcclient.NewForConfig(cluster.JSONConfig())
	if err != nil {
		t.Fatal(err)
	}
	muster := podGroupKind{
		name:   "muster",
		create: func(e *env, name string, min int32) { e.podGroup(name, v1alpha1.PodGroupSpec{MinMember: min}) },
		join:   func(p *v1.Pod, group string) { p.Labels = map[string]string{v1alpha1.LabelPodGroup: group} },
		get: func(e *env, name string) *podGroupView {
			pg, err := cluster.Muster.SchedulingV1alpha1().PodGroups(e.ns).Get(e.ctx, name, metav1.GetOptions{})
			if err != nil {
				return nil
			}
			v := &podGroupView{phase: string(pg.Status.Phase), running: pg.Status.Running, succeeded: pg.Status.Succeeded,
				started: pg.Status.ScheduleStartTime != nil, raw: pg.Status,
				generation: pg.Generation, observedGeneration: pg.Status.ObservedGeneration, resourceVersion: pg.ResourceVersion}
			if c := scheduledCondition(&pg.Status); c != nil {
				v.placed = c.Status == metav1.ConditionTrue && pg.Status.Scheduled == 3
				if c.Status == metav1.ConditionFalse {
					v.why = c
				}
			}
			return v
		},
		invalidReason: "Invalid", unschedulableReason: "Unschedulable",
		placedCondition: true, scheduleStartTime: true, observesGeneration: true, podGroupEvents: true,
	}
	muster.phases.tooFew, muster.phases.unschedulable = "Pending", "Pending"
	muster.phases.running, muster.phases.completed = "Running", "Completed"

	// vc-scheduler keeps a gang that cannot fit Inqueue; it has no schedule
	// start time.
	volcano := podGroupKind{
		name: "volcano",
		create: func(e *env, name string, min int32) {
			_, err := vc.SchedulingV1beta1().PodGroups(e.ns).Create(e.ctx, &vcv1beta1.PodGroup{
				ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: vcv1beta1.PodGroupSpec{MinMember: min},
			}, metav1.CreateOptions{})
			if err != nil {
				e.t.Fatal(err)
			}
		},
		join: func(p *v1.Pod, group string) {
			p.Annotations = map[string]string{v1alpha1.VolcanoAnnotationGroupName: group}
		},
		get: func(e *env, name string) *podGroupView {
			pg, err := vc.SchedulingV1beta1().PodGroups(e.ns).Get(e.ctx, name, metav1.GetOptions{})
			if err != nil {
				return nil
			}
			v := &podGroupView{phase: string(pg.Status.Phase), running: pg.Status.Running, succeeded: pg.Status.Succeeded,
				raw: pg.Status, generation: pg.Generation, resourceVersion: pg.ResourceVersion}
			// As Volcano's Job controller reads them: the True condition
			// transitioned last (the first of those, on a tie) is the
			// gang's state.
			var last *vcv1beta1.PodGroupCondition
			for i, c := range pg.Status.Conditions {
				if c.Status == v1.ConditionTrue && (last == nil || c.LastTransitionTime.After(last.LastTransitionTime.Time)) {
					last = &pg.Status.Conditions[i]
				}
			}
			if last != nil && last.Type == vcv1beta1.PodGroupUnschedulableType {
				v.why = &metav1.Condition{Type: string(last.Type), Reason: last.Reason, Message: last.Message}
			}
			v.placed = last != nil && last.Type == vcv1beta1.PodGroupScheduled
			return v
		},
		invalidReason: vcv1beta1.NotEnoughPodsReason, unschedulableReason: vcv1beta1.NotEnoughResourcesReason,
		placedCondition: true, podGroupEvents: true,
	}
	volcano.phases.tooFew, volcano.phases.unschedulable = "Pending", "Inqueue"
	// Volcano enqueues a PodGroup whose pods do not exist yet, and it stays
	// Inqueue while they come: whether the two members are seen before the
	// PodGroup's enqueue is a race.
	volcano.tooFewEnqueued = "Inqueue"
	volcano.phases.running, volcano.phases.completed = "Running", "Completed"

	// scheduler-plugins' controller writes no conditions; Scheduling means
	// that minMember pods exist.
	schedulerPlugins := podGroupKind{
		name: "scheduler-plugins",
		create: func(e *env, name string, min int32) {
			_, err := sp.SchedulingV1alpha1().PodGroups(e.ns).Create(e.ctx, &spv1alpha1.PodGroup{
				ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: spv1alpha1.PodGroupSpec{MinMember: min},
			}, metav1.CreateOptions{})
			if err != nil {
				e.t.Fatal(err)
			}
		},
		join: func(p *v1.Pod, group string) {
			p.Labels = map[string]string{v1alpha1.SchedulerPluginsLabelPodGroup: group}
		},
		get: func(e *env, name string) *podGroupView {
			pg, err := sp.SchedulingV1alpha1().PodGroups(e.ns).Get(e.ctx, name, metav1.GetOptions{})
			if err != nil {
				return nil
			}
			return &podGroupView{phase: string(pg.Status.Phase), running: pg.Status.Running, succeeded: pg.Status.Succeeded,
				started: !pg.Status.ScheduleStartTime.IsZero(), raw: pg.Status,
				generation: pg.Generation, resourceVersion: pg.ResourceVersion}
		},
		scheduleStartTime: true,
	}
	schedulerPlugins.phases.tooFew, schedulerPlugins.phases.unschedulable = "Pending", "Scheduling"
	schedulerPlugins.phases.running, schedulerPlugins.phases.completed = "Running", "Finished"

	return []podGroupKind{muster, volcano, schedulerPlugins}
}

// waitPodGroupKind waits until the PodGroup's status, of kind k, satisfies
// ok.
func (e *env) waitPodGroupKind(k podGroupKind, name, what string, ok func(*podGroupView) bool) *podGroupView {
	e.t.Helper()
	var v *podGroupView
	err := wait.PollUntilContextTimeout(e.ctx, 50*time.Millisecond, 10*time.Second, true, func(context.Context) (bool, error) {
		if got := k.get(e, name); got != nil {
			v = got // a failed Get: keep the last one read
		}
		return v != nil && ok(v), nil
	})
	if err != nil {
		var status any
		if v != nil {
			status = v.raw
		}
		e.t.Fatalf("%s PodGroup %s: want %s; status is %+v", k.name, name, what, status)
	}
	return v
}

// waitEvent waits for the Event that says why the gang of the PodGroup
// waits: on the PodGroup where the kind has them, else on its first member.
func (k podGroupKind) waitEvent(e *env, group, reason, substr string) {
	e.t.Helper()
	if k.podGroupEvents {
		e.waitEvent(group, reason, substr)
		return
	}
	e.waitEvent(group+"-0", "Gang"+reason, substr)
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

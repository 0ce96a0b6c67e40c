package podgroup

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	vcv1beta1 "volcano.sh/apis/pkg/apis/scheduling/v1beta1"

	"github.com/muster-sched/muster/pkg/gang"
)

func TestVolcanoPhase(t *testing.T) {
	spec := gang.Spec{MinMember: 3}
	tests := []struct {
		name     string
		status   gang.Status
		prev     vcv1beta1.PodGroupPhase
		admitted bool
		want     vcv1beta1.PodGroupPhase
	}{
		{name: "no members, queue policy", status: gang.Status{Spec: spec, Invalid: "0 members exist, minMember 3"}, want: vcv1beta1.PodGroupPending},
		{name: "no members, no queue policy", status: gang.Status{Spec: spec, Invalid: "0 members exist, minMember 3"}, admitted: true, want: vcv1beta1.PodGroupInqueue},
		{name: "too few members", status: gang.Status{Spec: spec, Members: 2, Live: 2, Invalid: "2 members exist, minMember 3"}, prev: vcv1beta1.PodGroupPending, want: vcv1beta1.PodGroupPending},
		{name: "admitted", status: gang.Status{Spec: spec, Members: 3, Live: 3}, prev: vcv1beta1.PodGroupPending, admitted: true, want: vcv1beta1.PodGroupInqueue},
		{name: "tried and failed: was admitted for the try", status: gang.Status{Spec: spec, Members: 3, Live: 3, Waiting: "placeable 2/3", Tried: true},
			prev: vcv1beta1.PodGroupPending, want: vcv1beta1.PodGroupInqueue},
		{name: "stays inqueue once its admission is given back", status: gang.Status{Spec: spec, Members: 3, Live: 3, Waiting: "placeable 2/3"},
			prev: vcv1beta1.PodGroupInqueue, want: vcv1beta1.PodGroupInqueue},
		{name: "minMember bound", status: gang.Status{Spec: spec, Members: 4, Live: 4, Placed: 3, Scheduled: 3, Running: 1}, prev: vcv1beta1.PodGroupInqueue, want: vcv1beta1.PodGroupRunning},
		{name: "members run, one lost and cannot be placed again", status: gang.Status{Spec: spec, Members: 3, Live: 3, Placed: 2, Scheduled: 2, Running: 2, Waiting: "placeable 2/3"},
			prev: vcv1beta1.PodGroupRunning, admitted: true, want: vcv1beta1.PodGroupUnknown},
		{name: "members run, one failed", status: gang.Status{Spec: spec, Members: 3, Live: 2, Placed: 2, Scheduled: 3, Running: 2, Failed: 1, Invalid: "2 members exist, minMember 3"},
			prev: vcv1beta1.PodGroupRunning, admitted: true, want: vcv1beta1.PodGroupUnknown},
		{name: "one lost, being placed again", status: gang.Status{Spec: spec, Members: 3, Live: 3, Placed: 2, Scheduled: 2, Running: 2},
			prev: vcv1beta1.PodGroupRunning, admitted: true, want: vcv1beta1.PodGroupInqueue},
		{name: "all succeeded", status: gang.Status{Spec: spec, Members: 3, Live: 3, Placed: 3, Scheduled: 3, Succeeded: 3}, prev: vcv1beta1.PodGroupRunning, want: vcv1beta1.PodGroupCompleted},
		{name: "all finished, one failed: no Failed phase", status: gang.Status{Spec: spec, Members: 3, Live: 2, Placed: 2, Scheduled: 3, Succeeded: 2, Failed: 1, Invalid: "2 members exist, minMember 3"},
			prev: vcv1beta1.PodGroupRunning, want: vcv1beta1.PodGroupCompleted},
		{name: "succeeded, one still runs", status: gang.Status{Spec: spec, Members: 3, Live: 3, Placed: 3, Scheduled: 3, Succeeded: 2, Running: 1}, prev: vcv1beta1.PodGroupRunning, want: vcv1beta1.PodGroupRunning},
		{name: "succeeded, one bound but not started", status: gang.Status{Spec: spec, Members: 3, Live: 3, Placed: 3, Scheduled: 3, Succeeded: 2}, prev: vcv1beta1.PodGroupRunning, want: vcv1beta1.PodGroupRunning},
		{name: "members deleted, queue policy", status: gang.Status{Spec: spec, Invalid: "0 members exist, minMember 3"}, prev: vcv1beta1.PodGroupRunning, want: vcv1beta1.PodGroupPending},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := volcanoPhase(&tt.status, tt.prev, tt.admitted); got != tt.want {
				t.Errorf("phase = %s, want %s", got, tt.want)
			}
		})
	}
}

func TestVolcanoStatus(t *testing.T) {
	now := metav1.NewTime(time.Date(2026, 11, 27, 10, 0, 0, 0, time.UTC))
	before := metav1.NewTime(now.Add(-time.Minute))
	spec := gang.Spec{MinMember: 3}
	unschedulable := func(reason, msg string, at metav1.Time, id string) vcv1beta1.PodGroupCondition {
		return vcv1beta1.PodGroupCondition{Type: vcv1beta1.PodGroupUnschedulableType, Status: v1.ConditionTrue, Reason: reason, Message: msg, LastTransitionTime: at, TransitionID: id}
	}
	scheduled := func(at metav1.Time, id string) vcv1beta1.PodGroupCondition {
		return vcv1beta1.PodGroupCondition{Type: vcv1beta1.PodGroupScheduled, Status: v1.ConditionTrue, Reason: VolcanoReasonScheduled, LastTransitionTime: at, TransitionID: id}
	}
	tests := []struct {
		name     string
		old      vcv1beta1.PodGroupStatus
		status   gang.Status
		admitted bool
		want     vcv1beta1.PodGroupStatus
	}{{
		name:   "no members: nothing to say",
		status: gang.Status{Spec: spec, Invalid: "0 members exist, minMember 3"},
		want:   vcv1beta1.PodGroupStatus{Phase: vcv1beta1.PodGroupPending},
	}, {
		name:   "too few members",
		old:    vcv1beta1.PodGroupStatus{Phase: vcv1beta1.PodGroupPending},
		status: gang.Status{Spec: spec, Members: 2, Live: 2, Invalid: "2 members exist, minMember 3"},
		want: vcv1beta1.PodGroupStatus{Phase: vcv1beta1.PodGroupPending, Conditions: []vcv1beta1.PodGroupCondition{
			unschedulable(vcv1beta1.NotEnoughPodsReason, "2 members exist, minMember 3", now, "new")}},
	}, {
		name: "too few of a role",
		status: gang.Status{Spec: gang.Spec{MinMember: 3, MinTaskMember: map[string]int32{"ps": 1}}, Members: 3, Live: 3,
			LiveByRole: map[string]int32{"worker": 3}, Invalid: "role ps: 0 members exist, minTaskMember 1"},
		want: vcv1beta1.PodGroupStatus{Phase: vcv1beta1.PodGroupPending, Conditions: []vcv1beta1.PodGroupCondition{
			unschedulable(vcv1beta1.NotEnoughPodsOfTaskReason, "role ps: 0 members exist, minTaskMember 1", now, "new")}},
	}, {
		name:   "invalid spec",
		status: gang.Status{Spec: spec, Members: 3, Live: 3, Invalid: `Volcano PodGroup ns/g names PriorityClass "gold", which does not exist`},
		want: vcv1beta1.PodGroupStatus{Phase: vcv1beta1.PodGroupPending, Conditions: []vcv1beta1.PodGroupCondition{
			unschedulable(ReasonInvalid, `Volcano PodGroup ns/g names PriorityClass "gold", which does not exist`, now, "new")}},
	}, {
		name: "no room: the message changes",
		old: vcv1beta1.PodGroupStatus{Phase: vcv1beta1.PodGroupPending, Conditions: []vcv1beta1.PodGroupCondition{
			unschedulable(vcv1beta1.NotEnoughPodsReason, "2 members exist, minMember 3", before, "old")}},
		status: gang.Status{Spec: spec, Members: 3, Live: 3, Placed: 1, Waiting: "placeable 2/3: member g-2 fits no node: 3 Insufficient cpu", Tried: true},
		want: vcv1beta1.PodGroupStatus{Phase: vcv1beta1.PodGroupInqueue, Conditions: []vcv1beta1.PodGroupCondition{
			unschedulable(vcv1beta1.NotEnoughResourcesReason, "placeable 2/3: member g-2 fits no node: 3 Insufficient cpu", now, "new")}},
	}, {
		name: "unchanged: its transition stays",
		old: vcv1beta1.PodGroupStatus{Phase: vcv1beta1.PodGroupInqueue, Conditions: []vcv1beta1.PodGroupCondition{
			unschedulable(vcv1beta1.NotEnoughResourcesReason, "placeable 2/3", before, "old")}},
		status: gang.Status{Spec: spec, Members: 3, Live: 3, Waiting: "placeable 2/3"},
		want: vcv1beta1.PodGroupStatus{Phase: vcv1beta1.PodGroupInqueue, Conditions: []vcv1beta1.PodGroupCondition{
			unschedulable(vcv1beta1.NotEnoughResourcesReason, "placeable 2/3", before, "old")}},
	}, {
		name: "being placed: conditions stay",
		old: vcv1beta1.PodGroupStatus{Phase: vcv1beta1.PodGroupInqueue, Conditions: []vcv1beta1.PodGroupCondition{
			unschedulable(vcv1beta1.NotEnoughResourcesReason, "placeable 2/3", before, "old")}},
		status: gang.Status{Spec: spec, Members: 3, Live: 3, Placed: 2, Tried: true},
		want: vcv1beta1.PodGroupStatus{Phase: vcv1beta1.PodGroupInqueue, Conditions: []vcv1beta1.PodGroupCondition{
			unschedulable(vcv1beta1.NotEnoughResourcesReason, "placeable 2/3", before, "old")}},
	}, {
		name: "placed: Scheduled goes first, Unschedulable stays True as vc-scheduler leaves it",
		old: vcv1beta1.PodGroupStatus{Phase: vcv1beta1.PodGroupInqueue, Conditions: []vcv1beta1.PodGroupCondition{
			unschedulable(vcv1beta1.NotEnoughResourcesReason, "placeable 2/3", before, "old")}},
		status: gang.Status{Spec: spec, Members: 3, Live: 3, Placed: 3, Scheduled: 3, Running: 3},
		want: vcv1beta1.PodGroupStatus{Phase: vcv1beta1.PodGroupRunning, Running: 3, Conditions: []vcv1beta1.PodGroupCondition{
			scheduled(now, "new"), unschedulable(vcv1beta1.NotEnoughResourcesReason, "placeable 2/3", before, "old")}},
	}, {
		name: "unschedulable again, as before: transitions anew to be the latest",
		old: vcv1beta1.PodGroupStatus{Phase: vcv1beta1.PodGroupRunning, Running: 3, Conditions: []vcv1beta1.PodGroupCondition{
			scheduled(before, "s"), unschedulable(vcv1beta1.NotEnoughResourcesReason, "placeable 2/3", before, "u")}},
		status: gang.Status{Spec: spec, Members: 3, Live: 3, Placed: 2, Scheduled: 2, Running: 2, Waiting: "placeable 2/3"},
		want: vcv1beta1.PodGroupStatus{Phase: vcv1beta1.PodGroupUnknown, Running: 2, Conditions: []vcv1beta1.PodGroupCondition{
			unschedulable(vcv1beta1.NotEnoughResourcesReason, "placeable 2/3", now, "new"), scheduled(before, "s")}},
	}, {
		name: "the latest was written by a clock ahead: a tie",
		old: vcv1beta1.PodGroupStatus{Phase: vcv1beta1.PodGroupInqueue, Conditions: []vcv1beta1.PodGroupCondition{
			unschedulable(vcv1beta1.NotEnoughResourcesReason, "placeable 2/3", metav1.NewTime(now.Add(time.Hour)), "old")}},
		status: gang.Status{Spec: spec, Members: 3, Live: 3, Placed: 3, Scheduled: 3},
		want: vcv1beta1.PodGroupStatus{Phase: vcv1beta1.PodGroupRunning, Conditions: []vcv1beta1.PodGroupCondition{
			scheduled(metav1.NewTime(now.Add(time.Hour)), "new"),
			unschedulable(vcv1beta1.NotEnoughResourcesReason, "placeable 2/3", metav1.NewTime(now.Add(time.Hour)), "old")}},
	}, {
		name: "completed with a failed member: no Unschedulable for a finished gang",
		old: vcv1beta1.PodGroupStatus{Phase: vcv1beta1.PodGroupRunning, Running: 3, Conditions: []vcv1beta1.PodGroupCondition{
			scheduled(before, "s")}},
		status: gang.Status{Spec: spec, Members: 3, Live: 2, Placed: 2, Scheduled: 3, Succeeded: 2, Failed: 1, Invalid: "2 members exist, minMember 3"},
		want: vcv1beta1.PodGroupStatus{Phase: vcv1beta1.PodGroupCompleted, Succeeded: 2, Failed: 1, Conditions: []vcv1beta1.PodGroupCondition{
			scheduled(before, "s")}},
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			pg := &vcv1beta1.PodGroup{Status: tt.old}
			got := volcanoStatus(pg, &tt.status, tt.admitted, now, func() string { return "new" })
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("status (-want +got):\n%s", diff)
			}
			// Written and read back (timestamps to the second), it calls
			// for no other write: a write wakes nothing, but the
			// resync must find nothing to do.
			pg.Status = roundTrip(got)
			if again := volcanoStatus(pg, &tt.status, tt.admitted, metav1.NewTime(now.Add(time.Second)), func() string { return "newer" }); !cmp.Equal(pg.Status, again) {
				t.Errorf("a second sync writes again (-first +second):\n%s", cmp.Diff(pg.Status, again))
			}
		})
	}
}

// roundTrip is the status as the API stores it: times to the second.
func roundTrip(s vcv1beta1.PodGroupStatus) vcv1beta1.PodGroupStatus {
	s = *s.DeepCopy()
	for i := range s.Conditions {
		s.Conditions[i].LastTransitionTime = metav1.NewTime(s.Conditions[i].LastTransitionTime.Truncate(time.Second))
	}
	return s
}

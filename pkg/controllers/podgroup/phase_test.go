package podgroup

import (
	"testing"

	"github.com/muster-sched/muster/apis/scheduling/v1alpha1"
	"github.com/muster-sched/muster/pkg/gang"
)

func TestPhaseOf(t *testing.T) {
	spec := gang.Spec{MinMember: 3}
	tests := []struct {
		name   string
		status gang.Status
		prev   v1alpha1.PodGroupPhase
		want   v1alpha1.PodGroupPhase
	}{
		{name: "too few members", status: gang.Status{Spec: spec, Members: 2, Invalid: "2 members exist, minMember 3"}, want: v1alpha1.PodGroupPending},
		{name: "valid, being placed", status: gang.Status{Spec: spec, Members: 3, Placed: 1}, want: v1alpha1.PodGroupInqueue},
		{name: "minMember scheduled", status: gang.Status{Spec: spec, Members: 4, Scheduled: 3}, want: v1alpha1.PodGroupRunning},
		{name: "was running, lost a member", status: gang.Status{Spec: spec, Members: 3, Scheduled: 2}, prev: v1alpha1.PodGroupRunning, want: v1alpha1.PodGroupUnknown},
		{name: "stays unknown", status: gang.Status{Spec: spec, Members: 3, Scheduled: 1}, prev: v1alpha1.PodGroupUnknown, want: v1alpha1.PodGroupUnknown},
		{name: "all finished, enough succeeded", status: gang.Status{Spec: spec, Members: 4, Scheduled: 4, Succeeded: 3, Failed: 1}, want: v1alpha1.PodGroupCompleted},
		{name: "succeeded but some still run", status: gang.Status{Spec: spec, Members: 4, Scheduled: 4, Succeeded: 3, Running: 1}, want: v1alpha1.PodGroupRunning},
		{name: "too many failed", status: gang.Status{Spec: spec, Members: 3, Scheduled: 3, Failed: 1}, prev: v1alpha1.PodGroupRunning, want: v1alpha1.PodGroupFailed},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := PhaseOf(&tt.status, tt.prev); got != tt.want {
				t.Errorf("phase = %s, want %s", got, tt.want)
			}
		})
	}
}

func TestScheduledCondition(t *testing.T) {
	spec := gang.Spec{MinMember: 4}
	tests := []struct {
		name        string
		status      gang.Status
		wantReason  string
		wantMessage string
	}{
		{name: "invalid", status: gang.Status{Spec: spec, Invalid: "3 members exist, minMember 4"}, wantReason: ReasonInvalid, wantMessage: "3 members exist, minMember 4"},
		{name: "unschedulable", status: gang.Status{Spec: spec, Waiting: "placeable 3/4: member g-3 fits no node: 2 Insufficient nvidia.com/gpu"},
			wantReason: ReasonUnschedulable, wantMessage: "placeable 3/4: member g-3 fits no node: 2 Insufficient nvidia.com/gpu"},
		{name: "scheduling", status: gang.Status{Spec: spec, Placed: 2}, wantReason: ReasonScheduling, wantMessage: "2 of minMember 4 placed"},
		{name: "scheduled", status: gang.Status{Spec: spec, Scheduled: 4}, wantReason: ReasonScheduled, wantMessage: "4 members scheduled, minMember 4"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := scheduledCondition(&tt.status, PhaseOf(&tt.status, ""), 1)
			if c.Reason != tt.wantReason || c.Message != tt.wantMessage {
				t.Errorf("condition %s: %q; want %s: %q", c.Reason, c.Message, tt.wantReason, tt.wantMessage)
			}
		})
	}
}

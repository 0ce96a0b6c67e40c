package queuepolicy

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"

	"github.com/muster-sched/muster/pkg/gang"
)

func TestMarkOf(t *testing.T) {
	m := mark{gang: gang.Key{Family: gang.FamilySchedulerPlugins, Namespace: "team-b", Name: "job-9"}, eviction: 1764095123456789}
	withCondition := func(c v1.PodCondition) *v1.Pod {
		return &v1.Pod{Status: v1.PodStatus{Conditions: []v1.PodCondition{{Type: v1.PodReady, Status: v1.ConditionTrue}, c}}}
	}
	target := func(status v1.ConditionStatus, reason, message string) v1.PodCondition {
		return v1.PodCondition{Type: v1.DisruptionTarget, Status: status, Reason: reason, Message: message}
	}
	for _, tt := range []struct {
		name   string
		pod    *v1.Pod
		want   mark
		wantOK bool
	}{
		{"Muster's mark", withCondition(target(v1.ConditionTrue, v1.PodReasonPreemptionByScheduler, m.message("muster-scheduler", "to give queue team-b its deserved share (gang team-b/job-9)"))), m, true},
		{"a why with colons and parentheses", withCondition(target(v1.ConditionTrue, v1.PodReasonPreemptionByScheduler, m.message("batch", "x: (y) z"))), m, true},
		{"no condition", &v1.Pod{}, mark{}, false},
		{"cleared", withCondition(target(v1.ConditionFalse, v1.PodReasonPreemptionByScheduler, m.message("muster-scheduler", "w"))), mark{}, false},
		{"kube-scheduler's preemption", withCondition(target(v1.ConditionTrue, v1.PodReasonPreemptionByScheduler, "default-scheduler: preempting to accommodate a higher priority pod")), mark{}, false},
		{"the taint manager", withCondition(target(v1.ConditionTrue, "DeletionByTaintManager", m.message("muster-scheduler", "w"))), mark{}, false},
		{"a key that is not one", withCondition(target(v1.ConditionTrue, v1.PodReasonPreemptionByScheduler, "s: evicted to place gang team-b/job-9 (eviction 1): w")), mark{}, false},
		{"an eviction that is not a number", withCondition(target(v1.ConditionTrue, v1.PodReasonPreemptionByScheduler, "s: evicted to place gang muster/a/b (eviction x): w")), mark{}, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			got, ok := markOf(tt.pod)
			if ok != tt.wantOK {
				t.Fatalf("markOf ok = %v, want %v", ok, tt.wantOK)
			}
			if diff := cmp.Diff(tt.want, got, cmp.AllowUnexported(mark{})); diff != "" {
				t.Errorf("markOf (-want +got):\n%s", diff)
			}
		})
	}
}

package podgroup

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	spv1alpha1 "sigs.k8s.io/scheduler-plugins/apis/scheduling/v1alpha1"

	"github.com/muster-sched/muster/pkg/gang"
)

func TestSchedulerPluginsStatus(t *testing.T) {
	now := metav1.NewTime(time.Date(2026, 11, 27, 10, 0, 0, 0, time.UTC))
	before := metav1.NewTime(now.Add(-time.Minute))
	spec := gang.Spec{MinMember: 3}
	owned := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "job-a-0", Namespace: "ns", OwnerReferences: []metav1.OwnerReference{
		{Kind: "Job", Name: "job-a"}, {Kind: "JobSet", Name: "set"},
	}}}
	tests := []struct {
		name   string
		old    spv1alpha1.PodGroupStatus
		status gang.Status
		member *v1.Pod
		want   spv1alpha1.PodGroupStatus
	}{{
		name:   "new, too few pods",
		status: gang.Status{Spec: spec, Members: 2, Live: 2},
		want:   spv1alpha1.PodGroupStatus{Phase: spv1alpha1.PodGroupPending},
	}, {
		name:   "pending counts nothing",
		old:    spv1alpha1.PodGroupStatus{Phase: spv1alpha1.PodGroupPending, Running: 1},
		status: gang.Status{Spec: spec, Members: 2, Live: 2},
		want:   spv1alpha1.PodGroupStatus{Phase: spv1alpha1.PodGroupPending, Running: 1},
	}, {
		name:   "new, minMember pods: the workload occupies it",
		status: gang.Status{Spec: spec, Members: 3, Live: 3},
		member: owned,
		want:   spv1alpha1.PodGroupStatus{Phase: spv1alpha1.PodGroupScheduling, OccupiedBy: "ns/job-a,ns/set"},
	}, {
		name:   "a pod with no owner leaves occupiedBy",
		old:    spv1alpha1.PodGroupStatus{Phase: spv1alpha1.PodGroupPending, OccupiedBy: "ns/before"},
		status: gang.Status{Spec: spec, Members: 3, Live: 3},
		member: &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "bare", Namespace: "ns"}},
		want:   spv1alpha1.PodGroupStatus{Phase: spv1alpha1.PodGroupScheduling, OccupiedBy: "ns/before"},
	}, {
		name:   "tried: schedule start time",
		old:    spv1alpha1.PodGroupStatus{Phase: spv1alpha1.PodGroupScheduling},
		status: gang.Status{Spec: spec, Members: 3, Live: 3, Waiting: "placeable 2/3", Tried: true},
		want:   spv1alpha1.PodGroupStatus{Phase: spv1alpha1.PodGroupScheduling, ScheduleStartTime: now},
	}, {
		name:   "its schedule start time stays",
		old:    spv1alpha1.PodGroupStatus{Phase: spv1alpha1.PodGroupScheduling, ScheduleStartTime: before},
		status: gang.Status{Spec: spec, Members: 3, Live: 3, Placed: 3, Scheduled: 3, Running: 3},
		want:   spv1alpha1.PodGroupStatus{Phase: spv1alpha1.PodGroupRunning, Running: 3, ScheduleStartTime: before},
	}, {
		name:   "running and succeeded make minMember",
		old:    spv1alpha1.PodGroupStatus{Phase: spv1alpha1.PodGroupRunning, Running: 3, ScheduleStartTime: before},
		status: gang.Status{Spec: spec, Members: 3, Live: 3, Placed: 3, Scheduled: 3, Running: 1, Succeeded: 2},
		want:   spv1alpha1.PodGroupStatus{Phase: spv1alpha1.PodGroupRunning, Running: 1, Succeeded: 2, ScheduleStartTime: before},
	}, {
		name:   "minMember succeeded: finished",
		old:    spv1alpha1.PodGroupStatus{Phase: spv1alpha1.PodGroupRunning, Running: 3, ScheduleStartTime: before},
		status: gang.Status{Spec: spec, Members: 3, Live: 3, Placed: 3, Scheduled: 3, Succeeded: 3},
		want:   spv1alpha1.PodGroupStatus{Phase: spv1alpha1.PodGroupFinished, Succeeded: 3, ScheduleStartTime: before},
	}, {
		name:   "one failed: failed",
		old:    spv1alpha1.PodGroupStatus{Phase: spv1alpha1.PodGroupRunning, Running: 3, ScheduleStartTime: before},
		status: gang.Status{Spec: spec, Members: 3, Live: 2, Placed: 2, Scheduled: 3, Running: 2, Failed: 1},
		want:   spv1alpha1.PodGroupStatus{Phase: spv1alpha1.PodGroupFailed, Running: 2, Failed: 1, ScheduleStartTime: before},
	}, {
		name:   "finished is final",
		old:    spv1alpha1.PodGroupStatus{Phase: spv1alpha1.PodGroupFinished, Succeeded: 3},
		status: gang.Status{Spec: spec, Tried: true},
		want:   spv1alpha1.PodGroupStatus{Phase: spv1alpha1.PodGroupFinished, Succeeded: 3},
	}, {
		name:   "pods deleted: pending again, counted",
		old:    spv1alpha1.PodGroupStatus{Phase: spv1alpha1.PodGroupRunning, Running: 3, ScheduleStartTime: before},
		status: gang.Status{Spec: spec, Members: 2, Live: 2, Placed: 2, Scheduled: 2, Running: 2},
		want:   spv1alpha1.PodGroupStatus{Phase: spv1alpha1.PodGroupPending, Running: 2, ScheduleStartTime: before},
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			pg := &spv1alpha1.PodGroup{Spec: spv1alpha1.PodGroupSpec{MinMember: 3}, Status: tt.old}
			member := func() *v1.Pod { return tt.member }
			got := schedulerPluginsStatus(pg, &tt.status, member, now)
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("status (-want +got):\n%s", diff)
			}
			pg.Status = got
			if again := schedulerPluginsStatus(pg, &tt.status, member, metav1.NewTime(now.Add(time.Second))); !cmp.Equal(got, again) {
				t.Errorf("a second sync writes again (-first +second):\n%s", cmp.Diff(got, again))
			}
		})
	}
}

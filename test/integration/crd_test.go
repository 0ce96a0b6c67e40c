package integration

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/muster-sched/muster/apis/scheduling/v1alpha1"
)

func res(pairs ...string) map[v1.ResourceName]resource.Quantity {
	out := map[v1.ResourceName]resource.Quantity{}
	for i := 0; i+1 < len(pairs); i += 2 {
		out[v1.ResourceName(pairs[i])] = resource.MustParse(pairs[i+1])
	}
	return out
}

func TestPodGroupValidation(t *testing.T) {
	e := newEnv(t)
	tests := []struct {
		name    string
		spec    v1alpha1.PodGroupSpec
		wantErr string // a substring naming the field; empty: accepted
	}{
		{name: "valid", spec: v1alpha1.PodGroupSpec{
			MinMember: 4, MinTaskMember: map[string]int32{"ps": 1, "worker": 3},
			MinResources: res("cpu", "4", "nvidia.com/gpu", "8"), Queue: "team-a",
			ScheduleTimeoutSeconds: ptr.To[int32](30),
		}},
		{name: "minMember 0", spec: v1alpha1.PodGroupSpec{MinMember: 0},
			wantErr: "spec.minMember: Invalid value: 0: spec.minMember in body should be greater than or equal to 1"},
		{name: "minTaskMember sum above minMember", spec: v1alpha1.PodGroupSpec{MinMember: 3, MinTaskMember: map[string]int32{"ps": 2, "worker": 2}},
			wantErr: "spec.minTaskMember: Invalid value: the sum of minTaskMember must not exceed minMember"},
		{name: "negative role minimum", spec: v1alpha1.PodGroupSpec{MinMember: 3, MinTaskMember: map[string]int32{"ps": -1}},
			wantErr: "spec.minTaskMember: Invalid value: every role minimum must be >= 0"},
		{name: "scheduleTimeoutSeconds 0", spec: v1alpha1.PodGroupSpec{MinMember: 1, ScheduleTimeoutSeconds: ptr.To[int32](0)},
			wantErr: "spec.scheduleTimeoutSeconds: Invalid value: 0"},
		{name: "queue not a name", spec: v1alpha1.PodGroupSpec{MinMember: 1, Queue: "Team A"},
			wantErr: "spec.queue: Invalid value: \"Team A\""},
		{name: "negative minResources", spec: v1alpha1.PodGroupSpec{MinMember: 1, MinResources: res("cpu", "4", "memory", "-1Gi")},
			wantErr: "spec.minResources: Invalid value: quantities must not be negative"},
		{name: "minResources beyond the bound", spec: v1alpha1.PodGroupSpec{MinMember: 1, MinResources: res("cpu", "10000000000000000")},
			wantErr: "spec.minResources: Invalid value: quantities must not exceed 9P (9T for cpu)"},
		{name: "minResources at the bound", spec: v1alpha1.PodGroupSpec{MinMember: 1, MinResources: res("cpu", "9T", "memory", "9P", "example.com/x", "9P")}},
		{name: "topology", spec: v1alpha1.PodGroupSpec{MinMember: 1, Topology: &v1alpha1.TopologySpec{Required: v1alpha1.LabelBlock, Preferred: v1alpha1.LabelRack}}},
		{name: "empty topology", spec: v1alpha1.PodGroupSpec{MinMember: 1, Topology: &v1alpha1.TopologySpec{}},
			wantErr: "spec.topology: Invalid value: set required, preferred or both"},
		{name: "topology key not a label key", spec: v1alpha1.PodGroupSpec{MinMember: 1, Topology: &v1alpha1.TopologySpec{Required: "the rack"}},
			wantErr: "spec.topology.required: Invalid value: \"the rack\": must be a node label key, such as topology.muster.dev/rack"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			pg := &v1alpha1.PodGroup{ObjectMeta: metav1.ObjectMeta{GenerateName: "pg-"}, Spec: tt.spec}
			_, err := cluster.Muster.SchedulingV1alpha1().PodGroups(e.ns).Create(e.ctx, pg, metav1.CreateOptions{})
			checkAdmission(t, err, tt.wantErr)
		})
	}
}

func TestQueueValidation(t *testing.T) {
	e := newEnv(t)
	tests := []struct {
		name    string
		queue   v1alpha1.Queue
		wantErr string
	}{
		{name: "valid", queue: v1alpha1.Queue{Spec: v1alpha1.QueueSpec{
			Weight: 2, Capability: res("cpu", "100", "memory", "1Ti"), Deserved: res("cpu", "50"),
			Guarantee: res("cpu", "10"), Parent: "org",
		}}},
		{name: "guarantee above deserved", queue: v1alpha1.Queue{Spec: v1alpha1.QueueSpec{
			Guarantee: res("cpu", "20"), Deserved: res("cpu", "10"),
		}}, wantErr: "spec.guarantee: Invalid value: guarantee must not exceed deserved for any resource"},
		{name: "deserved above capability", queue: v1alpha1.Queue{Spec: v1alpha1.QueueSpec{
			Deserved: res("memory", "2Gi"), Capability: res("memory", "1Gi"),
		}}, wantErr: "spec.deserved: Invalid value: deserved must not exceed capability for any resource"},
		{name: "guarantee above capability", queue: v1alpha1.Queue{Spec: v1alpha1.QueueSpec{
			Guarantee: res("nvidia.com/gpu", "8"), Capability: res("nvidia.com/gpu", "4"),
		}}, wantErr: "spec.guarantee: Invalid value: guarantee must not exceed capability for any resource"},
		{name: "negative capability", queue: v1alpha1.Queue{Spec: v1alpha1.QueueSpec{Capability: res("cpu", "-1")}},
			wantErr: "spec.capability: Invalid value: quantities must not be negative"},
		{name: "negative guarantee", queue: v1alpha1.Queue{Spec: v1alpha1.QueueSpec{Guarantee: res("memory", "-1Gi")}},
			wantErr: "spec.guarantee: Invalid value: quantities must not be negative"},
		{name: "negative deserved", queue: v1alpha1.Queue{Spec: v1alpha1.QueueSpec{Deserved: res("nvidia.com/gpu", "-2")}},
			wantErr: "spec.deserved: Invalid value: quantities must not be negative"},
		{name: "capability beyond int64", queue: v1alpha1.Queue{Spec: v1alpha1.QueueSpec{Capability: res("memory", "1e30")}},
			wantErr: "spec.capability: Invalid value: quantities must not exceed 9P (9T for cpu)"},
		{name: "guarantee cpu beyond the bound", queue: v1alpha1.Queue{Spec: v1alpha1.QueueSpec{Guarantee: res("cpu", "1e16")}},
			wantErr: "spec.guarantee: Invalid value: quantities must not exceed 9P (9T for cpu)"},
		{name: "deserved beyond the bound", queue: v1alpha1.Queue{Spec: v1alpha1.QueueSpec{Deserved: res("example.com/x", "10P")}},
			wantErr: "spec.deserved: Invalid value: quantities must not exceed 9P (9T for cpu)"},
		{name: "weight 0", queue: v1alpha1.Queue{Spec: v1alpha1.QueueSpec{Weight: -1}},
			wantErr: "spec.weight: Invalid value: -1: spec.weight in body should be greater than or equal to 1"},
		{name: "parent is self", queue: v1alpha1.Queue{ObjectMeta: metav1.ObjectMeta{Name: "selfish"}, Spec: v1alpha1.QueueSpec{Parent: "selfish"}},
			wantErr: "spec.parent must not name the queue itself"},
		{name: "named root", queue: v1alpha1.Queue{ObjectMeta: metav1.ObjectMeta{Name: "root"}},
			wantErr: "root is the implicit top of the queue hierarchy"},
		{name: "unknown state", queue: v1alpha1.Queue{Spec: v1alpha1.QueueSpec{State: "Paused"}},
			wantErr: "spec.state: Unsupported value: \"Paused\""},
		{name: "topology", queue: v1alpha1.Queue{Spec: v1alpha1.QueueSpec{Topology: &v1alpha1.TopologySpec{Preferred: v1alpha1.LabelRack}}}},
		{name: "topology key not a label key", queue: v1alpha1.Queue{Spec: v1alpha1.QueueSpec{Topology: &v1alpha1.TopologySpec{Preferred: "-rack"}}},
			wantErr: "spec.topology.preferred: Invalid value: \"-rack\": must be a node label key, such as topology.muster.dev/rack"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			q := tt.queue.DeepCopy()
			if q.Name == "" {
				q.GenerateName = "q-"
			}
			created, err := cluster.Muster.SchedulingV1alpha1().Queues().Create(e.ctx, q, metav1.CreateOptions{})
			checkAdmission(t, err, tt.wantErr)
			if err == nil {
				defer cluster.Muster.SchedulingV1alpha1().Queues().Delete(e.ctx, created.Name, metav1.DeleteOptions{})
			}
		})
	}

	t.Run("defaults", func(t *testing.T) {
		q, err := cluster.Muster.SchedulingV1alpha1().Queues().Create(e.ctx, &v1alpha1.Queue{ObjectMeta: metav1.ObjectMeta{GenerateName: "q-"}}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		defer cluster.Muster.SchedulingV1alpha1().Queues().Delete(e.ctx, q.Name, metav1.DeleteOptions{})
		want := v1alpha1.QueueSpec{Weight: 1, Reclaimable: ptr.To(true), State: v1alpha1.QueueOpen}
		if diff := cmp.Diff(want, q.Spec); diff != "" {
			t.Errorf("defaulted spec (-want,+got):\n%s", diff)
		}
	})
}

// checkAdmission fails unless err is nil when wantErr is empty, or carries
// wantErr otherwise.
func checkAdmission(t *testing.T, err error, wantErr string) {
	t.Helper()
	switch {
	case wantErr == "" && err != nil:
		t.Fatalf("want the object accepted, got: %v", err)
	case wantErr != "" && err == nil:
		t.Fatalf("want the object refused with %q, it was accepted", wantErr)
	case wantErr != "" && !strings.Contains(err.Error(), wantErr):
		t.Fatalf("refused with:\n  %v\nwant a message containing:\n  %s", err, wantErr)
	}
}

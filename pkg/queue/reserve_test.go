package queue

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/muster-sched/muster/pkg/gang"
)

// TestReserved: an enqueued gang's queue holds its PodGroup's
// minResources, less what it placed, until minMember members exist.
func TestReserved(t *testing.T) {
	cpu := func(q string) v1.ResourceList { return v1.ResourceList{v1.ResourceCPU: resource.MustParse(q)} }
	spec := gang.Spec{MinMember: 3, MinResources: cpu("6")}
	tests := []struct {
		name string
		st   gang.Status
		want Vector
	}{
		{name: "not enqueued", st: gang.Status{Spec: spec}},
		{name: "enqueued, no member yet", st: gang.Status{Spec: spec, Enqueued: true}, want: Vector{v1.ResourceCPU: 6000}},
		{name: "enqueued, one member placed", st: gang.Status{Spec: spec, Enqueued: true, Members: 1, Live: 1, Placed: 1, Allocated: cpu("2")},
			want: Vector{v1.ResourceCPU: 4000}},
		{name: "minMember members exist: admitted as any gang", st: gang.Status{Spec: spec, Enqueued: true, Members: 3, Live: 3}},
		{name: "started", st: gang.Status{Spec: spec, Enqueued: true, Members: 3, Live: 2, Scheduled: 3}},
		{name: "no minResources given", st: gang.Status{Spec: gang.Spec{MinMember: 3}, Enqueued: true}},
		{name: "minMember 0: no gang", st: gang.Status{Spec: gang.Spec{MinResources: cpu("6")}, Enqueued: true}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if diff := cmp.Diff(tt.want, Reserved(&tt.st)); diff != "" {
				t.Errorf("Reserved (-want +got):\n%s", diff)
			}
		})
	}
}

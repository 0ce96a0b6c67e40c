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
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if diff := cmp.Diff(tt.want, Reserved(&tt.st)); diff != "" {
				t.Errorf("Reserved (-want +got):\n%s", diff)
			}
		})
	}
}

// TestOvercommitLeavesReservationsOut: what enqueued gangs reserve is
// bounded by their queues' realCapability alone, and the overcommit bound
// does not count it: two queues that each reserved 80 of an idle 100 cpu
// keep no gang from being admitted. Inqueue that admitted gangs hold does
// count.
func TestOvercommitLeavesReservationsOut(t *testing.T) {
	cpu := func(milli int64) Vector { return Vector{v1.ResourceCPU: milli} }
	tests := []struct {
		name     string
		reserved int64
		want     bool
	}{
		{name: "inqueue reserved by enqueued gangs", reserved: 80000, want: true},
		{name: "inqueue held by admitted gangs", reserved: 0, want: false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			queue := func(name string) *Figures {
				return &Figures{Spec: Spec{Name: name}, Usage: Usage{Inqueue: cpu(80000), Reserved: cpu(tt.reserved)}}
			}
			snap := &Snapshot{Allocatable: cpu(100000), Used: cpu(0), Queues: map[string]*Figures{"a": queue("a"), "b": queue("b")}}
			s := &State{overcommit: DefaultOvercommitFactor}
			if ok, _ := s.overcommitted("c", cpu(10000), snap, false); ok != tt.want {
				t.Errorf("overcommitted = %v, want %v", ok, tt.want)
			}
		})
	}
}

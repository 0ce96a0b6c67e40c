package queue

import (
	"testing"

	v1 "k8s.io/api/core/v1"
)

// TestOvercommitCountsLentRoom: on a full cluster of 40 cpu where queue
// other holds 40 (20 above its deserved 20), a gang of 10 cpu of queue
// tenant (deserved 20, holding nothing) is over 1.2 × allocatable − used
// = 8 cpu, unless what other holds above its share counts: reclaim gives
// it back. Only for a gang within its deserved share, only from
// reclaimable queues, and only above their guarantee.
func TestOvercommitCountsLentRoom(t *testing.T) {
	cpu := func(milli int64) Vector { return Vector{v1.ResourceCPU: milli} }
	tests := []struct {
		name           string
		reclaimable    bool
		guaranteed     bool
		withinDeserved bool
		want           bool
		wantRefusedFor v1.ResourceName
	}{
		{name: "within its deserved share, lent room reclaimable", reclaimable: true, withinDeserved: true, want: true},
		{name: "beyond its deserved share (borrowing)", reclaimable: true, withinDeserved: false, want: false, wantRefusedFor: v1.ResourceCPU},
		{name: "the borrower is not reclaimable", reclaimable: false, withinDeserved: true, want: false, wantRefusedFor: v1.ResourceCPU},
		{name: "the borrower's guarantee covers what it holds", reclaimable: true, guaranteed: true, withinDeserved: true, want: false, wantRefusedFor: v1.ResourceCPU},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			snap := &Snapshot{Allocatable: cpu(40000), Used: cpu(40000), Queues: map[string]*Figures{
				"tenant": {Spec: Spec{Name: "tenant", Reclaimable: true}, Deserved: cpu(20000)},
				"other":  {Spec: Spec{Name: "other", Reclaimable: tt.reclaimable}, Usage: Usage{Allocated: cpu(40000)}, Deserved: cpu(20000)},
			}}
			if tt.guaranteed {
				snap.Queues["other"].Guarantee = cpu(39000)
			}
			s := &State{overcommit: DefaultOvercommitFactor}
			ok, r := s.overcommitted("tenant", cpu(10000), snap, tt.withinDeserved)
			if ok != tt.want || r != tt.wantRefusedFor {
				t.Errorf("overcommitted = %v, %q; want %v, %q", ok, r, tt.want, tt.wantRefusedFor)
			}
		})
	}
}

func TestWithinDeserved(t *testing.T) {
	f := &Figures{Usage: Usage{Allocated: Vector{"cpu": 6000}, Inqueue: Vector{"cpu": 2000}, Elastic: Vector{"cpu": 1000}}, Deserved: Vector{"cpu": 10000}}
	for _, tc := range []struct {
		min  Vector
		want bool
	}{
		{Vector{"cpu": 3000}, true},
		{Vector{"cpu": 3001}, false},
		{Vector{"memory": 1}, false}, // deserved names no memory: none
		{Vector{"memory": 0, "cpu": 1}, true},
	} {
		if got := withinDeserved(f, tc.min); got != tc.want {
			t.Errorf("withinDeserved(%v) = %v, want %v", tc.min, got, tc.want)
		}
	}
}

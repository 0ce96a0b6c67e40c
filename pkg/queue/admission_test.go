package queue

import (
	"testing"

	v1 "k8s.io/api/core/v1"
)

// TestOvercommitCountsLentRoom: on a full cluster of 40 cpu where queue
// other holds 40 (20 above its deserved 20), a gang of 10 cpu of queue
// tenant (deserved 20, holding nothing) is over 1.2 × allocatable − used
// = 8 cpu, unless what other holds above its share counts: reclaim gives
// it back. Only for a gang within its ceiling, and only from reclaimable
// queues.
func TestOvercommitCountsLentRoom(t *testing.T) {
	cpu := func(milli int64) Vector { return Vector{v1.ResourceCPU: milli} }
	tests := []struct {
		name           string
		reclaimable    bool
		withinCeiling  bool
		want           bool
		wantRefusedFor v1.ResourceName
	}{
		{name: "within its ceiling, lent room reclaimable", reclaimable: true, withinCeiling: true, want: true},
		{name: "beyond its ceiling (borrowing)", reclaimable: true, withinCeiling: false, want: false, wantRefusedFor: v1.ResourceCPU},
		{name: "the borrower is not reclaimable", reclaimable: false, withinCeiling: true, want: false, wantRefusedFor: v1.ResourceCPU},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			snap := &Snapshot{Allocatable: cpu(40000), Used: cpu(40000), Queues: map[string]*Figures{
				"tenant": {Spec: Spec{Name: "tenant", Reclaimable: true}, Deserved: cpu(20000)},
				"other":  {Spec: Spec{Name: "other", Reclaimable: tt.reclaimable}, Usage: Usage{Allocated: cpu(40000)}, Deserved: cpu(20000)},
			}}
			s := &State{overcommit: DefaultOvercommitFactor}
			ok, r := s.overcommitted(&GangFigures{Queue: "tenant", MinResources: cpu(10000)}, snap, tt.withinCeiling)
			if ok != tt.want || r != tt.wantRefusedFor {
				t.Errorf("overcommitted = %v, %q; want %v, %q", ok, r, tt.want, tt.wantRefusedFor)
			}
		})
	}
}

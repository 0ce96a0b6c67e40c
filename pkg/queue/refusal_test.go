package queue

import (
	"testing"

	v1 "k8s.io/api/core/v1"

	"github.com/muster-sched/muster/pkg/gang"
)

// TestRefusalRecordsNothing: Refusal says what Decide says of a gang not
// admitted yet, and admits nothing; once Decide admitted the gang it says
// nothing.
func TestRefusalRecordsNothing(t *testing.T) {
	cpu := func(milli int64) Vector { return Vector{v1.ResourceCPU: milli} }
	for _, tc := range []struct {
		name                string
		min                 int64
		wantWhy, wantReason string
	}{
		{name: "over the ceiling", min: 8000, wantWhy: "queue small: cpu 0 allocated+inqueue of 6 realCapability, gang needs 8", wantReason: ReasonOverCeiling},
		{name: "fits", min: 4000},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := &State{overcommit: DefaultOvercommitFactor, admitted: map[gang.Key]bool{}, dirty: map[gang.Key]bool{}}
			snap := &Snapshot{Policy: Capacity, state: s, Allocatable: cpu(40000), Queues: map[string]*Figures{
				"small": {Spec: Spec{Name: "small"}, RealCapability: cpu(6000), Deserved: cpu(6000)},
			}}
			key := gang.Key{Family: gang.FamilyMuster, Namespace: "ns", Name: "g"}
			st := &gang.Status{Key: key, Spec: gang.Spec{MinMember: 2}}
			s.figures.Store(key, &GangFigures{Queue: "small", MinResources: cpu(tc.min)})

			why, reason := s.Refusal(st, snap)
			if why != tc.wantWhy || reason != tc.wantReason {
				t.Errorf("Refusal = %q, %q; want %q, %q", why, reason, tc.wantWhy, tc.wantReason)
			}
			if s.admitted[key] || snap.Gang(key).Admitted {
				t.Fatal("Refusal admitted the gang")
			}
			ok, dwhy, dreason := s.Decide(st, snap)
			if want := tc.wantReason == ""; ok != want || dwhy != why || (!ok && dreason != reason) {
				t.Errorf("Decide = %v, %q, %q; Refusal said %q, %q", ok, dwhy, dreason, why, reason)
			}
			if why, reason := s.Refusal(st, snap); ok && (why != "" || reason != "") {
				t.Errorf("Refusal of an admitted gang = %q, %q; want nothing", why, reason)
			}
		})
	}
}

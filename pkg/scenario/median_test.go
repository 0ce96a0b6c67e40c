package scenario

import (
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestMedianOf(t *testing.T) {
	run := func(podsPerSecond, makespan float64, evictions int, complete bool, cpu float64) *Result {
		return &Result{Profile: "muster", PodsPerSecond: podsPerSecond, MakespanSeconds: makespan, Evictions: evictions,
			Complete: complete, PeakRSSBytes: uint64(evictions) << 20, MeanUtilization: map[string]float64{"cpu": cpu}}
	}
	tests := []struct {
		name string
		runs []*Result
		want *Result
	}{
		{
			name: "one run is returned as it is",
			runs: []*Result{run(300, 9, 2, true, 0.5)},
			want: &Result{Profile: "muster", PodsPerSecond: 300, MakespanSeconds: 9, Evictions: 2, Complete: true,
				PeakRSSBytes: 2 << 20, MeanUtilization: map[string]float64{"cpu": 0.5}, Runs: 1},
		},
		{
			name: "each number its own median; maps from the median pods/s run; complete only if every run was",
			runs: []*Result{run(400, 7, 5, true, 0.4), run(250, 11, 1, false, 0.6), run(300, 9, 3, true, 0.5)},
			want: &Result{Profile: "muster", PodsPerSecond: 300, MakespanSeconds: 9, Evictions: 3, Complete: false,
				PeakRSSBytes: 3 << 20, MeanUtilization: map[string]float64{"cpu": 0.5}, Runs: 3,
				RunsPodsPerSecond: []float64{400, 250, 300}},
		},
		{
			name: "an even count takes the lower middle",
			runs: []*Result{run(400, 7, 5, true, 0.4), run(250, 11, 1, true, 0.6), run(300, 9, 3, true, 0.5), run(350, 8, 4, true, 0.45)},
			want: &Result{Profile: "muster", PodsPerSecond: 300, MakespanSeconds: 8, Evictions: 3, Complete: true,
				PeakRSSBytes: 3 << 20, MeanUtilization: map[string]float64{"cpu": 0.5}, Runs: 4,
				RunsPodsPerSecond: []float64{400, 250, 300, 350}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if diff := cmp.Diff(tt.want, medianOf(tt.runs)); diff != "" {
				t.Errorf("medianOf (-want +got):\n%s", diff)
			}
		})
	}
}

package scenario

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
)

// sampleAt is a sample at second sec with the queues' shares and demands.
func sampleAt(sec float64, shares, demands map[string]float64) sample {
	return sample{at: time.Duration(sec * float64(time.Second)), shares: shares, demands: demands}
}

func TestFairnessIndices(t *testing.T) {
	type fairness struct {
		JainIndex, WeightedJainIndex, ContendedSeconds, MaxShareDeviation float64
	}
	even := map[string]int32{"a": 1, "b": 1}
	full := map[string]float64{"a": 1, "b": 1}
	tests := []struct {
		name    string
		weights map[string]int32
		samples []sample
		want    fairness
	}{
		{
			name:    "every queue at its weighted share",
			weights: map[string]int32{"a": 1, "b": 3},
			samples: []sample{
				sampleAt(0, map[string]float64{"a": 0.25, "b": 0.75}, full),
				sampleAt(1, map[string]float64{"a": 0.25, "b": 0.75}, full),
				sampleAt(2, map[string]float64{"a": 0.25, "b": 0.75}, full),
			},
			want: fairness{JainIndex: 1, WeightedJainIndex: 1, ContendedSeconds: 2},
		},
		{
			// The case for Jain's own definition: a wants 0.2, less than
			// its half, and gets it; b gets the rest. Fair, yet share ÷
			// weight is 0.2 against 0.8.
			name:    "a queue that wants less than its weighted share and gets it",
			weights: even,
			samples: []sample{
				sampleAt(0, map[string]float64{"a": 0.2, "b": 0.8}, map[string]float64{"a": 0.2, "b": 1.5}),
				sampleAt(1, map[string]float64{"a": 0.2, "b": 0.8}, map[string]float64{"a": 0.2, "b": 1.5}),
			},
			want: fairness{JainIndex: 1, WeightedJainIndex: 1 / (2 * (0.04 + 0.64)), ContendedSeconds: 1},
		},
		{
			// One holder of everything (x = 2, 0: J = 0.5) for the second
			// after 0s, fair for the three seconds after that. The first
			// sample has no previous one and weighs nothing.
			name:    "weighted by the time since the previous sample",
			weights: even,
			samples: []sample{
				sampleAt(0, map[string]float64{"a": 1, "b": 0}, full),
				sampleAt(1, map[string]float64{"a": 1, "b": 0}, full),
				sampleAt(4, map[string]float64{"a": 0.5, "b": 0.5}, full),
			},
			want: fairness{
				JainIndex:         (1*0.5 + 3*1) / 4.0,
				WeightedJainIndex: 1 / (2 * (25.0/36 + 1.0/36)), // mean shares 5/6 and 1/6
				ContendedSeconds:  4,
				MaxShareDeviation: 5.0/6 - 0.5,
			},
		},
		{
			name:    "samples without contention count for nothing",
			weights: even,
			samples: []sample{
				sampleAt(0, map[string]float64{"a": 0.3, "b": 0.3}, map[string]float64{"a": 0.3, "b": 0.3}),
				sampleAt(1, map[string]float64{"a": 1, "b": 0}, full),
				sampleAt(2, map[string]float64{"a": 0.3, "b": 0}, map[string]float64{"a": 0.3, "b": 0}),
			},
			want: fairness{JainIndex: 0.5, WeightedJainIndex: 0.5, ContendedSeconds: 1, MaxShareDeviation: 0.5},
		},
		{
			name:    "never contended",
			weights: even,
			samples: []sample{sampleAt(0, nil, map[string]float64{"a": 2}), sampleAt(1, nil, map[string]float64{"a": 2})},
			want:    fairness{JainIndex: 1, WeightedJainIndex: 1},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := &Scenario{}
			for _, q := range sortedKeys(tc.weights) {
				s.Queues = append(s.Queues, Queue{Name: q, Weight: tc.weights[q]})
			}
			r := &Result{}
			r.summarizeFairness(s, &observer{samples: tc.samples})
			got := fairness{r.JainIndex, r.WeightedJainIndex, r.ContendedSeconds, r.MaxShareDeviation}
			if diff := cmp.Diff(tc.want, got, cmpopts.EquateApprox(0, 1e-9)); diff != "" {
				t.Errorf("fairness (-want +got):\n%s", diff)
			}
		})
	}
}

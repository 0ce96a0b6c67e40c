package scenario

import (
	"k8s.io/utils/ptr"
	"strings"
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

func TestTimeToFairShare(t *testing.T) {
	t0 := time.Unix(1000, 0)
	sec := func(s float64) time.Duration { return time.Duration(s * float64(time.Second)) }
	full := map[string]float64{"a": 1, "b": 1}
	fair := map[string]float64{"a": 0.5, "b": 0.5}
	unfair := map[string]float64{"a": 1, "b": 0}
	off6 := map[string]float64{"a": 0.56, "b": 0.44}
	off4 := map[string]float64{"a": 0.54, "b": 0.46}
	uncontended := map[string]float64{"a": 0.3, "b": 0.3}
	// late's four pods arrive at 1s; the last is created at 1.3s.
	late := map[string]float64{"late-0-0": 1, "late-0-1": 1, "late-0-2": 1.1, "late-0-3": 1.3}
	tests := []struct {
		name        string
		tolerance   *float64
		created     map[string]float64 // pod → seconds after the start
		samples     []sample
		want        []FairShareBurst
		wantLongest float64
	}{
		{
			name:    "samples before the burst's pods all exist do not count",
			created: late,
			samples: []sample{
				sampleAt(1.2, fair, full),
				sampleAt(1.4, unfair, full),
				sampleAt(1.8, fair, full),
			},
			want:        []FairShareBurst{{Workload: "late", Queue: "b", ArrivalSeconds: 1, SecondsToFair: 0.8, Reached: true}},
			wantLongest: 0.8,
		},
		{
			name:        "a sample without contention is fair",
			created:     late,
			samples:     []sample{sampleAt(1.4, unfair, uncontended), sampleAt(1.6, unfair, full)},
			want:        []FairShareBurst{{Workload: "late", Queue: "b", ArrivalSeconds: 1, SecondsToFair: 0.4, Reached: true}},
			wantLongest: 0.4,
		},
		{
			name:        "within the default tolerance of 0.05",
			created:     late,
			samples:     []sample{sampleAt(1.4, off6, full), sampleAt(1.6, off4, full)},
			want:        []FairShareBurst{{Workload: "late", Queue: "b", ArrivalSeconds: 1, SecondsToFair: 0.6, Reached: true}},
			wantLongest: 0.6,
		},
		{
			name:        "within the scenario's tolerance",
			tolerance:   ptr.To(0.1),
			created:     late,
			samples:     []sample{sampleAt(1.4, off6, full), sampleAt(1.6, off4, full)},
			want:        []FairShareBurst{{Workload: "late", Queue: "b", ArrivalSeconds: 1, SecondsToFair: 0.4, Reached: true}},
			wantLongest: 0.4,
		},
		{
			name:        "never fair: until the end of the run",
			created:     late,
			samples:     []sample{sampleAt(1.4, unfair, full), sampleAt(2.8, off6, full)},
			want:        []FairShareBurst{{Workload: "late", Queue: "b", ArrivalSeconds: 1, SecondsToFair: 2}},
			wantLongest: 2,
		},
		{
			name:    "the longest of two bursts",
			created: map[string]float64{"late-0-0": 1, "later-0-0": 2},
			samples: []sample{
				sampleAt(1.2, unfair, full),
				sampleAt(1.4, fair, full),
				sampleAt(2.2, unfair, full),
				sampleAt(2.6, off4, full),
			},
			want: []FairShareBurst{
				{Workload: "late", Queue: "b", ArrivalSeconds: 1, SecondsToFair: 0.4, Reached: true},
				{Workload: "later", Queue: "b", ArrivalSeconds: 2, SecondsToFair: 0.6, Reached: true},
			},
			wantLongest: 0.6,
		},
		{
			name:    "a workload whose pods never appeared is no burst",
			samples: []sample{sampleAt(1.4, unfair, full)},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := &Scenario{
				FairShareTolerance: tc.tolerance,
				Queues:             []Queue{{Name: "a", Weight: 1}, {Name: "b", Weight: 1}},
				Workloads: []Workload{
					{Name: "early", Queue: "a", Members: 2}, // arrives at the start: no burst
					{Name: "late", Queue: "b", Members: 4, arrival: sec(1)},
					{Name: "later", Queue: "b", Members: 1, arrival: sec(2)},
					{Name: "unqueued", Members: 1, arrival: sec(1)}, // in no queue: no burst
				},
			}
			o := &observer{start: t0, samples: tc.samples, pods: map[string]*podRecord{
				"early-0-0":    {workload: "early", created: t0.Add(-sec(1))},
				"unqueued-0-0": {workload: "unqueued", created: t0.Add(sec(1))},
			}}
			for name, at := range tc.created {
				o.pods[name] = &podRecord{workload: strings.Split(name, "-")[0], created: t0.Add(sec(at))}
			}
			r := &Result{WallSeconds: 3}
			r.summarizeFairness(s, o)
			if diff := cmp.Diff(tc.want, r.FairShareBursts, cmpopts.EquateApprox(0, 1e-9)); diff != "" {
				t.Errorf("bursts (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.wantLongest, r.TimeToFairShareSeconds, cmpopts.EquateApprox(0, 1e-9)); diff != "" {
				t.Errorf("timeToFairShareSeconds (-want +got):\n%s", diff)
			}
		})
	}
}

func TestFirstArrivalPods(t *testing.T) {
	tests := []struct {
		name string
		w    Workload
		want int
	}{
		{"one copy", Workload{Members: 4}, 4},
		{"copies apart: the first", Workload{Members: 4, Repeat: 3, every: time.Second}, 4},
		{"copies at once: all", Workload{Members: 4, Repeat: 3}, 12},
		{"pods one by one: the first of each copy", Workload{Members: 4, Repeat: 3, memberEvery: time.Millisecond}, 3},
		{"roles", Workload{Roles: []Role{{Members: 1}, {Members: 4}}}, 5},
	}
	for _, tc := range tests {
		if got := tc.w.firstArrivalPods(); got != tc.want {
			t.Errorf("%s: firstArrivalPods = %d, want %d", tc.name, got, tc.want)
		}
	}
}

func TestCheckTimeToFairShare(t *testing.T) {
	bound := 1.5
	tests := []struct {
		name   string
		bursts []FairShareBurst
		want   []string
	}{
		{"within the bound", []FairShareBurst{{Workload: "c", SecondsToFair: 1.5, Reached: true}}, nil},
		{
			name:   "over the bound",
			bursts: []FairShareBurst{{Workload: "c", SecondsToFair: 1.2, Reached: true}, {Workload: "d", SecondsToFair: 1.6, Reached: true}},
			want:   []string{"x/muster: timeToFairShareSeconds after d is 1.60, bound 1.5"},
		},
		{
			name:   "never reached, even when the run ended within the bound",
			bursts: []FairShareBurst{{Workload: "c", SecondsToFair: 0.5}},
			want:   []string{"x/muster: timeToFairShareSeconds after c: never at fair shares (0.50 to the end of the run), bound 1.5"},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := &Scenario{Name: "x", Expect: []Expectation{{Profile: "muster", MaxTimeToFairShare: &bound}}}
			got := Check(s, []*Result{{Profile: "muster", FairShareBursts: tc.bursts}})
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("failures (-want +got):\n%s", diff)
			}
		})
	}
}

package scenario

import (
	"math"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
)

func TestWaterFill(t *testing.T) {
	tests := []struct {
		name          string
		demands       map[string]float64
		weights       map[string]int32
		want          map[string]float64
		wantContended bool
	}{
		{"one queue is never contended", map[string]float64{"a": 3}, nil, nil, false},
		{"demands that fit are not contended", map[string]float64{"a": 0.4, "b": 0.5}, nil, nil, false},
		{"equal weights split evenly", map[string]float64{"a": 1, "b": 1}, nil, map[string]float64{"a": 0.5, "b": 0.5}, true},
		{"weights 3:1", map[string]float64{"a": 1, "b": 1}, map[string]int32{"a": 3, "b": 1}, map[string]float64{"a": 0.75, "b": 0.25}, true},
		{"a small demand leaves the rest to the others", map[string]float64{"a": 0.1, "b": 1, "c": 1}, nil, map[string]float64{"a": 0.1, "b": 0.45, "c": 0.45}, true},
		{"idle queues get nothing", map[string]float64{"a": 2, "b": 2, "c": 0}, nil, map[string]float64{"a": 0.5, "b": 0.5}, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, contended := waterFill(tc.demands, tc.weights)
			if contended != tc.wantContended {
				t.Errorf("contended = %v, want %v", contended, tc.wantContended)
			}
			if diff := cmp.Diff(tc.want, got, cmpopts.EquateApprox(0, 1e-9)); diff != "" {
				t.Errorf("deserved (-want +got):\n%s", diff)
			}
		})
	}
}

func TestJainAndPercentile(t *testing.T) {
	tests := []struct {
		name string
		got  float64
		want float64
	}{
		{"jain of equals", jain([]float64{0.3, 0.3, 0.3}), 1},
		{"jain of one holder among four", jain([]float64{1, 0, 0, 0}), 0.25},
		{"jain of 1 and 3", jain([]float64{1, 3}), 16.0 / 20},
		{"p50 of 1..10", percentile([]float64{10, 9, 8, 7, 6, 5, 4, 3, 2, 1}, 50), 5},
		{"p99 of 1..10", percentile([]float64{1, 2, 3, 4, 5, 6, 7, 8, 9, 10}, 99), 10},
		{"p50 of nothing", percentile(nil, 50), 0},
		{"ratio 0/0", ratioOf(0, 0), 1},
		{"ratio x/0", ratioOf(1, 0), math.Inf(1)},
	}
	for _, tc := range tests {
		if math.Abs(tc.got-tc.want) > 1e-9 && !(math.IsInf(tc.got, 1) && math.IsInf(tc.want, 1)) {
			t.Errorf("%s = %v, want %v", tc.name, tc.got, tc.want)
		}
	}
}

func TestGangOutcome(t *testing.T) {
	t0 := time.Unix(1000, 0)
	at := func(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }
	member := func(created, bound, finished int) *podRecord {
		p := &podRecord{created: at(created)}
		if bound >= 0 {
			p.bound = at(bound)
		}
		if finished >= 0 {
			p.finished = at(finished)
		}
		return p
	}
	tests := []struct {
		name        string
		gang        *gangRecord
		wantLatency float64
		wantBound   int
		wantOK      bool
		wantPartial bool
	}{
		{
			name:        "bound together",
			gang:        &gangRecord{minMember: 2, size: 2, members: []*podRecord{member(0, 500, -1), member(100, 600, -1)}},
			wantLatency: 0.5, wantBound: 2, wantOK: true,
		},
		{
			name:        "one member bound, one never",
			gang:        &gangRecord{minMember: 2, size: 2, members: []*podRecord{member(0, 500, -1), member(0, -1, -1)}},
			wantBound:   1,
			wantPartial: true,
		},
		{
			name:        "a member finished before the last needed one was bound",
			gang:        &gangRecord{minMember: 2, size: 2, members: []*podRecord{member(0, 100, 200), member(0, 300, 400)}},
			wantLatency: 0.3, wantBound: 2, wantOK: true, wantPartial: true,
		},
		{
			name:        "elastic member beyond minMember may come later",
			gang:        &gangRecord{minMember: 1, size: 2, members: []*podRecord{member(0, 100, 200), member(0, 300, 400)}},
			wantLatency: 0.3, wantBound: 2, wantOK: true,
		},
		{
			name: "nothing bound is not partial",
			gang: &gangRecord{minMember: 2, size: 2, members: []*podRecord{member(0, -1, -1), member(0, -1, -1)}},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			lat, bound, ok := gangLatency(tc.gang, t0)
			if math.Abs(lat-tc.wantLatency) > 1e-9 || bound != tc.wantBound || ok != tc.wantOK {
				t.Errorf("gangLatency = %v, %d, %v; want %v, %d, %v", lat, bound, ok, tc.wantLatency, tc.wantBound, tc.wantOK)
			}
			if got := partial(tc.gang, bound); got != tc.wantPartial {
				t.Errorf("partial = %v, want %v", got, tc.wantPartial)
			}
		})
	}
}

func TestCheck(t *testing.T) {
	zero, half, dev := 0, 0.5, 0.02
	s := &Scenario{Name: "x", Expect: []Expectation{
		{Profile: "muster", PartialGangs: &zero, MaxShareDeviation: &dev, Relative: []RelativeBound{{Metric: "makespan", Of: "coscheduling", Max: &half}}},
		{MaxEvictions: &zero},
	}}
	results := []*Result{
		{Profile: "coscheduling", MakespanSeconds: 10, PartialGangs: 3, Evictions: 1},
		{Profile: "muster", MakespanSeconds: 6, PartialGangs: 1, MaxShareDeviation: 0.01},
	}
	got := Check(s, results)
	want := []string{
		"x/muster: partialGangs is 1, bound 0",
		"x/muster: makespan is 0.6 × coscheduling's (6 vs 10), bound ≤ 0.5×",
		"x/coscheduling: evictions is 1, bound 0",
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("failures (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"partialGangs is 1, bound 0", "makespan is 0.6 × coscheduling's (6 vs 10), bound ≤ 0.5×"}, results[1].Failures); diff != "" {
		t.Errorf("muster's recorded failures (-want +got):\n%s", diff)
	}
}

func TestBroken(t *testing.T) {
	t0 := time.Unix(1000, 0)
	at := func(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }
	running := func() *podRecord { return &podRecord{bound: at(0)} }
	evicted := func(ms int) *podRecord { return &podRecord{bound: at(0), deleted: at(ms), evicted: true} }
	tests := []struct {
		name    string
		members []*podRecord
		want    bool
	}{
		{"no eviction", []*podRecord{running(), running(), running()}, false},
		{"one of three evicted, two keep running", []*podRecord{evicted(100), running(), running()}, true},
		{"evicted whole, one member after another", []*podRecord{evicted(100), evicted(101), evicted(102)}, false},
		{"a member that had finished does not survive", []*podRecord{evicted(100), {bound: at(0), finished: at(50)}, evicted(103)}, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := broken(&gangRecord{minMember: 3, size: 3, members: tc.members}); got != tc.want {
				t.Errorf("broken = %v, want %v", got, tc.want)
			}
		})
	}
}

// TestMeasureRates checks the figures throughput is judged by: pods/s from
// the scheduler's start (or the first creation, if later) to the last
// bind, and the time to the first bind from the same point.
func TestMeasureRates(t *testing.T) {
	start := time.Unix(1000, 0)
	at := func(ms int) time.Time { return start.Add(time.Duration(ms) * time.Millisecond) }
	pod := func(created, bound int) *podRecord {
		p := &podRecord{created: at(created), forever: true}
		if bound >= 0 {
			p.bound = at(bound)
		}
		return p
	}
	tests := []struct {
		name                        string
		pods                        []*podRecord
		wantPerSecond, wantFirstSec float64
	}{
		{
			name: "created before the start: measured from the start",
			pods: []*podRecord{pod(-5000, 200), pod(-5000, 700), pod(-5000, 1200), pod(-5000, 1000)},
			// 4 pods in 1.2 s; the first bound 0.2 s after the start.
			wantPerSecond: 4 / 1.2, wantFirstSec: 0.2,
		},
		{
			name:          "created after the start: measured from the first creation",
			pods:          []*podRecord{pod(500, 600), pod(700, 1500)},
			wantPerSecond: 2 / 1.0, wantFirstSec: 0.1,
		},
		{
			name: "nothing bound",
			pods: []*podRecord{pod(0, -1)},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			o := newObserver(&Scenario{}, nil)
			for i, p := range tc.pods {
				o.pods[string(rune('a'+i))] = p
			}
			r := measure(&Scenario{}, o, nil, nil, schedulerCounters{}, start, at(3000))
			if math.Abs(r.PodsPerSecond-tc.wantPerSecond) > 1e-9 || math.Abs(r.FirstBindSeconds-tc.wantFirstSec) > 1e-9 {
				t.Errorf("pods/s %v, first bind %v s; want %v, %v", r.PodsPerSecond, r.FirstBindSeconds, tc.wantPerSecond, tc.wantFirstSec)
			}
		})
	}
}

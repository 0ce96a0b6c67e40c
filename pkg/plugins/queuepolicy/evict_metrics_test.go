package queuepolicy

import (
	"testing"

	basemetrics "k8s.io/component-base/metrics"
	"k8s.io/component-base/metrics/legacyregistry"
	"k8s.io/component-base/metrics/testutil"
	"k8s.io/klog/v2/ktesting"

	"github.com/muster-sched/muster/pkg/gang"
	"github.com/muster-sched/muster/pkg/metrics"
)

// TestCountEvicted: an eviction counts its pods by victim queue and reason,
// once in the victims histogram, and a gang it leaves below minMember (but
// not one taken whole) as broken.
func TestCountEvicted(t *testing.T) {
	metrics.Register()
	a, b := gang.Key{Namespace: "ns", Name: "a"}, gang.Key{Namespace: "ns", Name: "b"}
	statusOf := func(placed, min int32) gang.Status {
		return gang.Status{Placed: placed, Spec: gang.Spec{MinMember: min}}
	}
	tests := []struct {
		name                     string
		byGang                   map[victimGang]int
		before                   map[gang.Key]gang.Status
		wantReclaimed, wantShare float64
		wantBroken               float64
	}{{
		name:          "a whole gang and extras of another: none broken",
		byGang:        map[victimGang]int{{a, "team-a", reclaim}: 4, {b, "team-a", evenShares}: 1},
		before:        map[gang.Key]gang.Status{a: statusOf(4, 4), b: statusOf(5, 4)},
		wantReclaimed: 4, wantShare: 1,
	}, {
		name:          "a gang left below its minimum is broken",
		byGang:        map[victimGang]int{{a, "team-a", reclaim}: 2},
		before:        map[gang.Key]gang.Status{a: statusOf(4, 3)},
		wantReclaimed: 2, wantBroken: 1,
	}}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			logger, _ := ktesting.NewTestContext(t)
			reclaimed, share := metrics.Evictions.WithLabelValues("team-a", "reclaim"), metrics.Evictions.WithLabelValues("team-a", "even_shares")
			r0, s0, b0 := counterValue(t, reclaimed), counterValue(t, share), counterValue(t, metrics.GangsBroken)
			n0 := victimsObserved(t)
			countEvicted(logger, tc.byGang, tc.before)
			if got := counterValue(t, reclaimed) - r0; got != tc.wantReclaimed {
				t.Errorf("reclaimed pods: got %v, want %v", got, tc.wantReclaimed)
			}
			if got := counterValue(t, share) - s0; got != tc.wantShare {
				t.Errorf("even_shares pods: got %v, want %v", got, tc.wantShare)
			}
			if got := counterValue(t, metrics.GangsBroken) - b0; got != tc.wantBroken {
				t.Errorf("broken gangs: got %v, want %v", got, tc.wantBroken)
			}
			if n := victimsObserved(t); n != n0+1 {
				t.Errorf("victims observed %d times, want once", n-n0)
			}
		})
	}
}

func counterValue(t *testing.T, c basemetrics.CounterMetric) float64 {
	t.Helper()
	v, err := testutil.GetCounterMetricValue(c)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// victimsObserved is how many evictions the victims histogram observed.
func victimsObserved(t *testing.T) uint64 {
	t.Helper()
	vec, err := testutil.GetHistogramVecFromGatherer(legacyregistry.DefaultGatherer, "muster_reclaim_victims", nil)
	if err != nil {
		t.Fatal(err)
	}
	return vec.GetAggregatedSampleCount()
}

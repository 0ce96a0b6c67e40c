package integration

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/component-base/metrics/legacyregistry"

	"github.com/muster-sched/muster/pkg/metrics"
)

// TestReclaimMetrics: TestReclaim's scenario seen through Muster's
// metrics, from the scheduler that runs it (the gauges of an earlier test's
// scheduler are replaced): queue qb takes back the four members above
// minMember of qa's gangs in one eviction, by reclaim, breaking no gang;
// five gangs start, each timed once; the gauges show both queues' gangs
// running and qb's allocation.
func TestReclaimMetrics(t *testing.T) {
	metrics.Register()
	e := newEnv(t)
	e.reclaimQueuesOf(musterQueue)
	before := gatherMetrics(t)
	e.fillQueueA(t, musterQueue)
	b := e.gangOf("b", "qb", 4, 4, "2", nil)
	e.waitBoundWithin(10*time.Second, b...)

	want := []struct {
		series string
		delta  bool // the change since the scenario started, not the value
		value  float64
	}{
		{`muster_reclaim_evictions_total{queue="qa",reason="reclaim"}`, true, 4},
		{`muster_reclaim_victims_sum`, true, 4},
		{`muster_reclaim_gangs_broken_total`, true, 0},
		{`muster_gang_scheduling_duration_seconds_count{queue="qa"}`, true, 4},
		{`muster_gang_scheduling_duration_seconds_count{queue="qb"}`, true, 1},
		{`muster_gangs{phase="Running",queue="qa"}`, false, 4},
		{`muster_gangs{phase="Running",queue="qb"}`, false, 1},
		{`muster_queue_allocated{queue="qb",resource="cpu"}`, false, 8},
		{`muster_queue_allocated{queue="qa",resource="cpu"}`, false, 32},
	}
	var mismatch []string
	err := wait.PollUntilContextTimeout(e.ctx, 100*time.Millisecond, 10*time.Second, true, func(context.Context) (bool, error) {
		now := gatherMetrics(t)
		mismatch = nil
		for _, w := range want {
			got := now[w.series]
			if w.delta {
				got -= before[w.series]
			}
			if got != w.value {
				mismatch = append(mismatch, fmt.Sprintf("%s: %v, want %v", w.series, got, w.value))
			}
		}
		return len(mismatch) == 0, nil
	})
	if err != nil {
		t.Fatalf("Muster's metrics do not show the reclaim:\n%s", strings.Join(mismatch, "\n"))
	}
}

// gatherMetrics returns the value of every series of Muster's metrics, by
// its name and labels as Prometheus writes them (a histogram as _sum and
// _count).
func gatherMetrics(t *testing.T) map[string]float64 {
	t.Helper()
	families, err := legacyregistry.DefaultGatherer.Gather()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]float64{}
	for _, f := range families {
		if !strings.HasPrefix(f.GetName(), "muster_") {
			continue
		}
		for _, m := range f.GetMetric() {
			var labels []string
			for _, l := range m.GetLabel() {
				labels = append(labels, fmt.Sprintf("%s=%q", l.GetName(), l.GetValue()))
			}
			series := func(suffix string) string {
				if len(labels) == 0 {
					return f.GetName() + suffix
				}
				return f.GetName() + suffix + "{" + strings.Join(labels, ",") + "}"
			}
			switch f.GetType() {
			case dto.MetricType_COUNTER:
				out[series("")] = m.GetCounter().GetValue()
			case dto.MetricType_GAUGE:
				out[series("")] = m.GetGauge().GetValue()
			case dto.MetricType_HISTOGRAM:
				out[series("_sum")] = m.GetHistogram().GetSampleSum()
				out[series("_count")] = float64(m.GetHistogram().GetSampleCount())
			}
		}
	}
	return out
}

package deploy

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/component-base/metrics/testutil"
	"k8s.io/klog/v2/ktesting"

	"github.com/muster-sched/muster/apis/scheduling/v1alpha1"
	"github.com/muster-sched/muster/pkg/simulator"
)

// TestMetricsScrape runs the built scheduler as the chart deploys it,
// schedules a known scenario and scrapes /metrics as Prometheus would, with
// a token bound to the chart's metrics-reader ClusterRole: two queues, a
// gang in team-a that binds, and one in team-b, capped at 2 cpu, that needs
// 3 and is refused admission.
func TestMetricsScrape(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	const ns = "muster-metrics"
	r := installChart(t, ctx, "muster", ns)
	p := startReplica(t, ctx, r, "replica-0")
	if _, err := p.waitLog(ctx, leaseAcquired(ns+"/muster-scheduler"), 30*time.Second); err != nil {
		t.Fatal(err)
	}
	token := metricsScraper(t, ctx, ns, r.fullname()+"-metrics-reader")

	createQueue(t, ctx, "metrics-team-a", nil)
	createQueue(t, ctx, "metrics-team-b", v1.ResourceList{v1.ResourceCPU: resource.MustParse("2")})
	w := newWorkload(t, ctx, "work-metrics", "muster-scheduler", 2, simulator.NodeShape{CPU: "4", Memory: "16Gi"})
	createQueuedPodGroup(t, w, "binds", 2, "metrics-team-a")
	createQueuedPodGroup(t, w, "refused", 3, "metrics-team-b")
	w.create(w.gangPods("binds", 2, "1", true))
	w.create(w.gangPods("refused", 3, "1", true))
	waitPodGroupPhase(t, ctx, w.ns, "binds", v1alpha1.PodGroupRunning)

	want := []struct {
		name   string
		labels map[string]string
		// value is the value wanted; atLeast only that it is reached.
		value   float64
		atLeast bool
	}{
		{"muster_queue_allocated", map[string]string{"queue": "metrics-team-a", "resource": "cpu"}, 2, false},
		{"muster_queue_allocated", map[string]string{"queue": "metrics-team-a", "resource": "memory"}, 2 * 256 << 20, false},
		{"muster_queue_capability", map[string]string{"queue": "metrics-team-b", "resource": "cpu"}, 2, false},
		{"muster_queue_share", map[string]string{"queue": "metrics-team-a"}, 1, false},
		{"muster_gangs", map[string]string{"queue": "metrics-team-a", "phase": "Running"}, 1, false},
		{"muster_gangs", map[string]string{"queue": "metrics-team-b", "phase": "Pending"}, 1, false},
		{"muster_gangs", map[string]string{"queue": "metrics-team-b", "phase": "Running"}, 0, false},
		{"muster_gang_scheduling_duration_seconds_count", map[string]string{"queue": "metrics-team-a"}, 1, false},
		{"muster_admission_decisions_total", map[string]string{"queue": "metrics-team-a", "result": "admitted", "reason": "Fits"}, 1, true},
		{"muster_admission_decisions_total", map[string]string{"queue": "metrics-team-b", "result": "refused", "reason": "OverCeiling"}, 1, true},
		{"muster_gang_placement_attempts_total", map[string]string{"result": "placed"}, 1, true},
		{"muster_reclaim_gangs_broken_total", nil, 0, false},
	}
	var mismatch []string
	err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		code, body, err := p.get(ctx, "/metrics", token)
		if err != nil || code != http.StatusOK {
			mismatch = []string{fmt.Sprintf("GET /metrics with the reader's token: %d %v %.200q", code, err, body)}
			return false, nil
		}
		got := testutil.NewMetrics()
		if err := testutil.ParseMetrics(body, &got); err != nil {
			return false, err
		}
		mismatch = nil
		for _, m := range want {
			v, ok := sampleValue(got[m.name], m.labels)
			if !ok || v != m.value && !(m.atLeast && v > m.value) {
				mismatch = append(mismatch, fmt.Sprintf("%s%v = %v (present %t), want %v", m.name, m.labels, v, ok, m.value))
			}
		}
		return len(mismatch) == 0, nil
	})
	if err != nil {
		t.Fatalf("the scraped metrics do not show the scenario: %v\n%s", err, strings.Join(mismatch, "\n"))
	}
	p.stop()
	if lines := p.forbidden(); len(lines) > 0 {
		t.Errorf("the chart's RBAC refused the scheduler:\n%s", strings.Join(lines, "\n"))
	}
}

// sampleValue is the value of the sample whose labels include labels.
func sampleValue(samples testutil.Samples, labels map[string]string) (float64, bool) {
	for _, s := range samples {
		if matches(s.Metric, labels) {
			return float64(s.Value), true
		}
	}
	return 0, false
}

func matches(m testutil.Metric, labels map[string]string) bool {
	for k, v := range labels {
		if string(m[testutil.LabelName(k)]) != v {
			return false
		}
	}
	return true
}

// createQueue creates a Queue, deleted when the test ends.
func createQueue(t *testing.T, ctx context.Context, name string, capability v1.ResourceList) {
	t.Helper()
	q := &v1alpha1.Queue{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: v1alpha1.QueueSpec{Capability: capability}}
	if _, err := cluster.Muster.SchedulingV1alpha1().Queues().Create(ctx, q, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cluster.Muster.SchedulingV1alpha1().Queues().Delete(context.Background(), name, metav1.DeleteOptions{})
	})
}

// createQueuedPodGroup creates a Muster PodGroup in a queue.
func createQueuedPodGroup(t *testing.T, w *workload, name string, minMember int32, queue string) {
	t.Helper()
	_, err := cluster.Muster.SchedulingV1alpha1().PodGroups(w.ns).Create(w.ctx, &v1alpha1.PodGroup{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: w.ns},
		Spec:       v1alpha1.PodGroupSpec{MinMember: minMember, Queue: queue},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
}

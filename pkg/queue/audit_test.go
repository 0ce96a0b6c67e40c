package queue

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/component-base/metrics/testutil"
	"k8s.io/klog/v2/ktesting"
	st "k8s.io/kubernetes/pkg/scheduler/testing"

	"github.com/muster-sched/muster/apis/scheduling/v1alpha1"
)

// TestAudit corrupts the accounting's sums and records on purpose and
// checks that the audit reports and repairs each, and finds nothing on an
// accounting that is right.
func TestAudit(t *testing.T) {
	RegisterMetrics()
	plain := st.MakePod().Namespace("ns").Name("plain").UID("plain").
		Req(map[v1.ResourceName]string{v1.ResourceCPU: "1"}).Node("n").Obj()
	plain.Status.Phase = v1.PodRunning
	pods := append(labelGang("g", "q", 2, "n", "n", ""), plain)
	queues := []*v1alpha1.Queue{{ObjectMeta: metav1.ObjectMeta{Name: "q", UID: "q"}, Spec: v1alpha1.QueueSpec{Weight: 1}}}
	logger, _ := ktesting.NewTestContext(t)
	cpu := func(milli int64) Vector { return Vector{v1.ResourceCPU: milli} }
	tests := []struct {
		name    string
		corrupt func(s *State)
		// audits before the drift is repaired: a record is repaired only
		// when it differed at the previous audit too.
		audits int
		want   Drift
		metric string
	}{
		{
			name:    "nothing wrong",
			corrupt: func(*State) {},
			audits:  1,
			want:    Drift{Sums: map[string]Vector{}},
		},
		{
			name: "cluster sum",
			corrupt: func(s *State) {
				s.cluster.mu.Lock()
				s.cluster.unmanaged.own()[v1.ResourceCPU] += 1000
				s.cluster.mu.Unlock()
			},
			audits: 1,
			want:   Drift{Sums: map[string]Vector{"cluster unmanaged": cpu(-1000)}},
			metric: "unmanaged",
		},
		{
			name: "queue usage",
			corrupt: func(s *State) {
				s.mu.Lock()
				s.usage["q"].Allocated[v1.ResourceCPU] += 500
				s.mu.Unlock()
			},
			audits: 1,
			want:   Drift{Sums: map[string]Vector{"queue q allocated": cpu(-500)}},
			metric: "allocated",
		},
		{
			name: "a pod's record lost",
			corrupt: func(s *State) {
				s.cluster.mu.Lock()
				s.cluster.removePodLocked("plain")
				s.cluster.mu.Unlock()
			},
			audits: 2,
			want: Drift{
				Sums:    map[string]Vector{"cluster used": cpu(1000), "cluster unmanaged": cpu(1000)},
				Objects: []string{"pod plain (ns/plain@)"},
			},
			metric: "used",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newLifecycleFixture(t, queues, pods)
			s := f.state
			if d, err := s.Audit(logger); err != nil || !d.Empty() {
				t.Fatalf("first audit of a right accounting: %+v, %v", d, err)
			}
			before := driftCount(t, tt.metric)
			tt.corrupt(s)
			var got Drift
			for i := range tt.audits {
				d, err := s.Audit(logger)
				if err != nil {
					t.Fatal(err)
				}
				if i < tt.audits-1 && (!d.Empty() || len(d.Unconfirmed) == 0) {
					t.Fatalf("audit %d: %+v; want the difference seen, not repaired", i+1, d)
				}
				got = d
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("drift (-want +got):\n%s", diff)
			}
			if tt.metric != "" && driftCount(t, tt.metric) != before+1 {
				t.Errorf("muster_accounting_drift_total{sum=%q,resource=cpu} = %v, want %v", tt.metric, driftCount(t, tt.metric), before+1)
			}
			if d, err := s.Audit(logger); err != nil || !d.Empty() {
				t.Errorf("audit after the repair: %+v, %v", d, err)
			}
		})
	}
}

func driftCount(t *testing.T, sum string) float64 {
	t.Helper()
	if sum == "" {
		return 0
	}
	v, err := testutil.GetCounterMetricValue(driftTotal.WithLabelValues(sum, string(v1.ResourceCPU)))
	if err != nil {
		t.Fatal(err)
	}
	return v
}

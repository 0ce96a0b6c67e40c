package gang

import (
	"testing"

	v1 "k8s.io/api/core/v1"
	"k8s.io/component-base/metrics/legacyregistry"
	"k8s.io/component-base/metrics/testutil"
	st "k8s.io/kubernetes/pkg/scheduler/testing"

	"github.com/muster-sched/muster/apis/scheduling/v1alpha1"
	"github.com/muster-sched/muster/pkg/metrics"
)

// TestGangStartTimed: a gang's scheduling latency is observed once, when
// binds the Manager saw take it to minMember bound; never for a gang with
// a member already bound when first seen (listed after a restart).
func TestGangStartTimed(t *testing.T) {
	metrics.Register()
	member := func(queue, name, node, version string) *v1.Pod {
		p := st.MakePod().Namespace("ns").Name(queue+"-"+name).UID(queue+"-"+name).
			Label(v1alpha1.LabelPodGroup, queue).Label(v1alpha1.LabelMinAvailable, "2").
			Label(v1alpha1.LabelQueue, queue).Node(node).Obj()
		p.ResourceVersion = version
		return p
	}
	tests := []struct {
		name  string
		queue string
		pods  []*v1.Pod // in the order the Manager sees them
		want  uint64
	}{{
		name:  "seen pending, then bound: timed once, not for the extra member",
		queue: "timed",
		pods: []*v1.Pod{
			member("timed", "a", "", "1"), member("timed", "b", "", "1"), member("timed", "c", "", "1"),
			member("timed", "a", "n1", "2"), member("timed", "b", "n1", "2"), member("timed", "c", "n1", "2"),
		},
		want: 1,
	}, {
		name:  "a member bound when first seen: never timed",
		queue: "listed",
		pods:  []*v1.Pod{member("listed", "a", "n1", "1"), member("listed", "b", "", "1"), member("listed", "b", "n1", "2")},
		want:  0,
	}}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			m := newTestManager(t)
			m.LabelQueues(func(q string) string { return q }) // every queue exists
			for _, p := range tc.pods {
				m.updatePod(p)
			}
			vec, err := testutil.GetHistogramVecFromGatherer(legacyregistry.DefaultGatherer, "muster_gang_scheduling_duration_seconds", map[string]string{"queue": tc.queue})
			if err != nil && tc.want > 0 {
				t.Fatal(err)
			}
			if got := vec.GetAggregatedSampleCount(); got != tc.want {
				t.Errorf("observed %d times, want %d", got, tc.want)
			}
		})
	}
}

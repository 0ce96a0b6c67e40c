package queue

import (
	"fmt"
	"testing"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	apitypes "k8s.io/apimachinery/pkg/types"
	st "k8s.io/kubernetes/pkg/scheduler/testing"
	"k8s.io/utils/ptr"

	"github.com/muster-sched/muster/apis/scheduling/v1alpha1"
	"github.com/muster-sched/muster/pkg/gang"
)

// queuePods are n pods of 1 cpu in a queue, the first bound of them bound
// to node n, the rest pending; each is a gang of one.
func queuePods(queue string, n, bound int) []*v1.Pod {
	var out []*v1.Pod
	for i := range n {
		name := fmt.Sprintf("%s-%d", queue, i)
		p := st.MakePod().Namespace("ns").Name(name).UID(name).Label(v1alpha1.LabelQueue, queue).
			Req(map[v1.ResourceName]string{v1.ResourceCPU: "1"}).Obj()
		if i < bound {
			p.Spec.NodeName, p.Status.Phase = "n", v1.PodRunning
		}
		out = append(out, p)
	}
	return out
}

// TestLends: three queues of weight 1 share one node of 16 cpu, so each
// deserves 5⅓, and each has pods of 1 cpu pending.
func TestLends(t *testing.T) {
	open := func(name string, mutate func(*v1alpha1.QueueSpec)) *v1alpha1.Queue {
		spec := v1alpha1.QueueSpec{Weight: 1}
		if mutate != nil {
			mutate(&spec)
		}
		return &v1alpha1.Queue{ObjectMeta: metav1.ObjectMeta{Name: name, UID: apitypes.UID("uid-" + name)}, Spec: spec}
	}
	cpu := func(milli int64) Vector { return Vector{v1.ResourceCPU: milli} }
	tests := []struct {
		name      string
		qa        func(*v1alpha1.QueueSpec)
		bound     [3]int // of qa, qb, qc
		block     string // a gang of qc blocked (State.Block)
		need      Vector
		want      bool
		unclaimed Vector
	}{
		{name: "no queue can claim the last cpu: lent", bound: [3]int{5, 5, 5}, need: cpu(1000), want: true, unclaimed: cpu(1000)},
		{name: "no more than that", bound: [3]int{5, 5, 5}, need: cpu(2000), want: false, unclaimed: cpu(1000)},
		{name: "a queue below its share claims the room", bound: [3]int{5, 5, 3}, need: cpu(1000), want: false, unclaimed: cpu(667)},
		{name: "a queue's own claim is its to use, not others'", bound: [3]int{4, 4, 4}, need: cpu(2000), want: false, unclaimed: cpu(1)},
		{
			name: "a claimant whose gangs cannot use the room claims none", bound: [3]int{5, 5, 3},
			block: "qc", need: cpu(1000), want: true, unclaimed: cpu(3000),
		},
		{
			name: "a queue that is not reclaimable borrows nothing", bound: [3]int{5, 5, 5},
			qa: func(s *v1alpha1.QueueSpec) { s.Reclaimable = ptr.To(false) }, need: cpu(1000), want: false, unclaimed: cpu(1000),
		},
		{
			name: "nor beyond its capability", bound: [3]int{5, 5, 5},
			qa: func(s *v1alpha1.QueueSpec) {
				s.Capability = map[v1.ResourceName]resource.Quantity{v1.ResourceCPU: resource.MustParse("5")}
			}, need: cpu(1000), want: false,
			unclaimed: cpu(1000),
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var pods []*v1.Pod
			for i, q := range []string{"qa", "qb", "qc"} {
				pods = append(pods, queuePods(q, 16, tt.bound[i])...)
			}
			queues := []*v1alpha1.Queue{open("qa", tt.qa), open("qb", nil), open("qc", nil)}
			f := newFixture(t, []*v1.Node{readyNode("n", "16")}, queues, pods)
			if tt.block != "" {
				for i := tt.bound[2]; i < 16; i++ {
					f.state.Block(gang.Key{Namespace: "ns", Name: fmt.Sprintf("%s-%d", tt.block, i), Family: gang.FamilySolo})
				}
			}
			snap := f.state.Refresh()
			if got := snap.Lends("qa", tt.need, nil, false); got != tt.want {
				t.Errorf("Lends(qa, %v) = %v, want %v", tt.need, got, tt.want)
			}
			if diff := cmp.Diff(tt.unclaimed, Vector{v1.ResourceCPU: snap.Unclaimed()[v1.ResourceCPU]}); diff != "" {
				t.Errorf("unclaimed (-want +got):\n%s", diff)
			}
		})
	}
}

package queuepolicy

import (
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	st "k8s.io/kubernetes/pkg/scheduler/testing"

	"github.com/muster-sched/muster/apis/scheduling/v1alpha1"
	"github.com/muster-sched/muster/pkg/placement"
	"github.com/muster-sched/muster/pkg/queue"
)

// TestVictimsByDomain: a gang whose members must share a rack takes its
// victims within one rack, the one where the fewest pods go; a gang with
// only a preferred rack takes them anywhere, as a gang without topology.
func TestVictimsByDomain(t *testing.T) {
	// Two racks of two 4-cpu nodes each.
	racks := []*v1.Node{inRack(node("n1", "4"), "r1"), inRack(node("n2", "4"), "r1"), inRack(node("n3", "4"), "r2"), inRack(node("n4", "4"), "r2")}
	// Racks across the nodes' names: r1 is n1 and n3, r2 is n2 and n4.
	crossed := []*v1.Node{inRack(node("n1", "4"), "r1"), inRack(node("n2", "4"), "r2"), inRack(node("n3", "4"), "r1"), inRack(node("n4", "4"), "r2")}
	queues := []*v1alpha1.Queue{capacityQueue("a", "0", ""), capacityQueue("b", "", "")}
	// one is a gang of one pod of queue a.
	one := func(name, cpu, node string) []*v1.Pod {
		return testGang{name: name, queue: "a", minMember: 1, cpu: cpu}.pods(node)
	}
	// The preemptor needs a whole rack: two members of 4 cpu.
	wholeRack := testGang{name: "p", queue: "b", minMember: 2, cpu: "4", required: v1alpha1.LabelRack}
	tests := []struct {
		name      string
		nodes     []*v1.Node
		pods      []*v1.Pod
		preemptor testGang
		// placed are the preemptor's members bound before, by node; the
		// rest are pending, and placed together.
		placed  []string
		members int
		// protected is the pod-group label value a PodDisruptionBudget
		// allowing no disruption selects.
		protected string
		want      []string
		// wantPlan maps each member to its node.
		wantPlan map[string]string
	}{
		{
			name:  "the rack needing the fewest evictions, though its candidates come later",
			nodes: racks,
			// r1 holds four 2-cpu gangs (first in the candidates' order),
			// r2 two 4-cpu gangs.
			pods: podsOf(one("a1", "2", "n1"), one("a2", "2", "n1"), one("a3", "2", "n2"), one("a4", "2", "n2"),
				one("z1", "4", "n3"), one("z2", "4", "n4")),
			preemptor: wholeRack,
			members:   2,
			want:      []string{"reclaim whole ns/z1 [z1-0] cpu=4", "reclaim whole ns/z2 [z2-0] cpu=4"},
			wantPlan:  map[string]string{"p-0": "n3", "p-1": "n4"},
		},
		{
			name:  "a rack whose pods would cover its lack but leave each node short needs more: the other rack",
			nodes: racks,
			// r1 lacks 5 cpu: a3 and a1 cover it, but a member needs 3 on
			// one node: a1, a2 and a3 go. r2 needs its two pods gone.
			pods: podsOf(one("a1", "2", "n1"), one("a2", "2", "n1"), one("a3", "3", "n2"),
				one("b1", "4", "n3"), one("b2", "4", "n4")),
			preemptor: testGang{name: "p", queue: "b", minMember: 2, cpu: "3", required: v1alpha1.LabelRack},
			members:   2,
			want:      []string{"reclaim whole ns/b1 [b1-0] cpu=4", "reclaim whole ns/b2 [b2-0] cpu=4"},
			wantPlan:  map[string]string{"p-0": "n3", "p-1": "n4"},
		},
		{
			name:  "a gang that fits over two racks and in neither evicts within one",
			nodes: racks,
			// n2 and n3 are free; a1 and z2 each fill their rack's other
			// node: a1 goes first in the candidates' order.
			pods:      podsOf(one("a1", "4", "n1"), one("z2", "4", "n4")),
			preemptor: wholeRack,
			members:   2,
			want:      []string{"reclaim whole ns/a1 [a1-0] cpu=4"},
			wantPlan:  map[string]string{"p-0": "n1", "p-1": "n2"},
		},
		{
			name:      "a preferred rack only: victims anywhere",
			nodes:     crossed,
			pods:      podsOf(one("a1", "4", "n1"), one("a2", "4", "n2"), one("z1", "4", "n3"), one("z2", "4", "n4")),
			preemptor: testGang{name: "p", queue: "b", minMember: 2, cpu: "4", preferred: v1alpha1.LabelRack},
			members:   2,
			want:      []string{"reclaim whole ns/a1 [a1-0] cpu=4", "reclaim whole ns/a2 [a2-0] cpu=4"},
			wantPlan:  map[string]string{"p-0": "n1", "p-1": "n2"},
		},
		{
			name:      "the same cluster, a required rack: the cheapest rack by the candidates' order",
			nodes:     crossed,
			pods:      podsOf(one("a1", "4", "n1"), one("a2", "4", "n2"), one("z1", "4", "n3"), one("z2", "4", "n4")),
			preemptor: wholeRack,
			members:   2,
			want:      []string{"reclaim whole ns/a1 [a1-0] cpu=4", "reclaim whole ns/z1 [z1-0] cpu=4"},
			wantPlan:  map[string]string{"p-0": "n1", "p-1": "n3"},
		},
		{
			name:  "a rack whose victims a budget protects only when another rack needs more pods",
			nodes: racks,
			pods: podsOf(testGang{name: "a1", queue: "a", minMember: 2, cpu: "4"}.pods("n1", "n2"),
				one("z1", "2", "n3"), one("z2", "2", "n3"), one("z3", "2", "n4")),
			protected: "a1",
			preemptor: wholeRack,
			members:   2,
			want:      []string{"reclaim whole ns/z1 [z1-0] cpu=2", "reclaim whole ns/z2 [z2-0] cpu=2", "reclaim whole ns/z3 [z3-0] cpu=2"},
			wantPlan:  map[string]string{"p-0": "n3", "p-1": "n4"},
		},
		{
			name:  "a gang spread over both racks, taken whole when no rack opens without it",
			nodes: racks,
			// x frees n1 in r1 and n3 in r2; r2 then fits, r1 needs a2 too.
			pods:      podsOf(testGang{name: "x", queue: "a", minMember: 2, cpu: "4"}.pods("n1", "n3"), one("a2", "4", "n2")),
			preemptor: wholeRack,
			members:   2,
			want:      []string{"reclaim whole ns/x [x-1 x-0] cpu=8"},
			wantPlan:  map[string]string{"p-0": "n3", "p-1": "n4"},
		},
		{
			name: "a rack of pods of its own before a gang spread over two, though it takes more pods",
			nodes: append(slices.Clone(racks[:2]), inRack(node("n3", "4"), "r2"), inRack(node("n4", "4"), "r2"),
				inRack(node("n5", "4"), "r3"), inRack(node("n6", "4"), "r3")),
			// x spans r1 and r2, whose other nodes are free: evicting x
			// alone would open either. r3 needs three pods gone.
			pods: podsOf(testGang{name: "x", queue: "a", minMember: 2, cpu: "4"}.pods("n1", "n3"),
				one("a5", "4", "n5"), one("a6", "2", "n6"), one("a7", "2", "n6"), one("y2", "4", "n2"), one("y4", "4", "n4")),
			preemptor: wholeRack,
			members:   2,
			want:      []string{"reclaim whole ns/a5 [a5-0] cpu=4", "reclaim whole ns/a6 [a6-0] cpu=2", "reclaim whole ns/a7 [a7-0] cpu=2"},
			wantPlan:  map[string]string{"p-0": "n5", "p-1": "n6"},
		},
		{
			name:  "a member of a spread gang above its minimum, within the rack",
			nodes: racks,
			pods:  podsOf(testGang{name: "x", queue: "a", minMember: 1, cpu: "4"}.pods("n1", "n3"), one("a2", "4", "n2")),
			// x-1 (on n3) is x's extra; r1 would need x whole.
			preemptor: wholeRack,
			members:   2,
			want:      []string{"reclaim extra ns/x [x-1] cpu=4"},
			wantPlan:  map[string]string{"p-0": "n3", "p-1": "n4"},
		},
		{
			name:      "the rack of the members placed before",
			nodes:     racks,
			pods:      podsOf(one("a1", "4", "n1"), one("z2", "4", "n4")),
			preemptor: testGang{name: "p", queue: "b", minMember: 1, cpu: "4", required: v1alpha1.LabelRack},
			placed:    []string{"n3"},
			members:   1,
			want:      []string{"reclaim whole ns/z2 [z2-0] cpu=4"},
			wantPlan:  map[string]string{"p-1": "n4"},
		},
		{
			name:  "nothing when it fits in a rack already",
			nodes: racks,
			// r2 is free: the gang failed for a reason no eviction mends.
			pods:      podsOf(one("a1", "4", "n1"), one("a2", "4", "n2")),
			preemptor: wholeRack,
			members:   2,
		},
		{
			name:      "nothing when no rack can take the gang, whatever is evicted",
			nodes:     racks,
			pods:      podsOf(one("a1", "4", "n1"), one("z1", "4", "n3")),
			preemptor: testGang{name: "p", queue: "b", minMember: 3, cpu: "4", required: v1alpha1.LabelRack},
			members:   3,
		},
		{
			name:      "nodes of no rack are no rack's",
			nodes:     []*v1.Node{node("n1", "4"), node("n2", "4"), inRack(node("n3", "4"), "r2")},
			pods:      podsOf(one("a1", "4", "n1"), one("a2", "4", "n2"), one("z1", "4", "n3")),
			preemptor: wholeRack,
			members:   2,
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			all := tc.preemptor.pods(append(append([]string{}, tc.placed...), make([]string, tc.members)...)...)
			members := all[len(tc.placed):]
			pods := podsOf(tc.pods, all)
			ctx, pl, snap := newTestPlugin(t, testCluster{nodes: tc.nodes, pods: pods, queues: queues}, false)
			if tc.protected != "" {
				sel := labels.SelectorFromSet(labels.Set{v1alpha1.LabelPodGroup: tc.protected})
				pl.pdbs = pdbBlocks(func(string) ([]pdb, error) { return []pdb{{selector: sel, allowed: 0}}, nil })
			}
			st := pl.gangs.Status(tc.preemptor.key())
			need := requestsOf(members)
			units := pl.candidates(snap, st.Key, queue.QueueOf(&st), tc.preemptor.priority, need, false, true)
			victims, plan, err := pl.victimsFor(ctx, snap, pl.records.inFlight(), members, units, &st, need, nil)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, describeUnits(victims)); diff != "" {
				t.Errorf("victims (-want,+got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.wantPlan, planByName(t, members, plan)); diff != "" {
				t.Errorf("plan (-want,+got):\n%s", diff)
			}
		})
	}
}

// planByName maps each member of plan to its node, by name; nil for no
// plan.
func planByName(t *testing.T, members []*v1.Pod, plan map[types.UID]string) map[string]string {
	t.Helper()
	var out map[string]string
	for uid, n := range plan {
		if out == nil {
			out = map[string]string{}
		}
		out[podByUID(t, members, string(uid)).Name] = n
	}
	return out
}

func TestChoiceLess(t *testing.T) {
	tests := []struct {
		name string
		a, b choice
		want bool
	}{
		{"no budget broken before fewer pods", choice{pods: 3}, choice{pods: 1, guarded: true}, true},
		{"fewer pods", choice{pods: 1, ranks: []int{9}}, choice{pods: 2, ranks: []int{1, 0}}, true},
		{"the least preferred victim earlier", choice{pods: 2, ranks: []int{3, 0}}, choice{pods: 2, ranks: []int{4, 1}}, true},
		{"then the next", choice{pods: 2, ranks: []int{4, 0}}, choice{pods: 2, ranks: []int{4, 1}}, true},
		{"equal: not less", choice{pods: 2, ranks: []int{4, 1}}, choice{pods: 2, ranks: []int{4, 1}}, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := tc.a.less(&tc.b); got != tc.want {
				t.Errorf("less = %v, want %v", got, tc.want)
			}
			if tc.want && tc.b.less(&tc.a) {
				t.Errorf("less holds both ways")
			}
		})
	}
}

func TestFewestPods(t *testing.T) {
	pod := func(name, cpu, mem string) unit {
		return unit{pods: []*v1.Pod{st.MakePod().Name(name).UID(name).
			Req(map[v1.ResourceName]string{v1.ResourceCPU: cpu, v1.ResourceMemory: mem}).Obj()}}
	}
	big, small, mem := pod("big", "4", "1Gi"), pod("small", "1", "1Gi"), pod("mem", "1", "8Gi")
	gi := int64(1 << 30)
	tests := []struct {
		name  string
		short placement.Amounts
		units []unit
		want  int
	}{
		{"nothing lacking", placement.Amounts{v1.ResourceCPU: 0}, []unit{big}, 0},
		{"the largest first", placement.Amounts{v1.ResourceCPU: 4000}, []unit{small, big}, 1},
		{"the most any resource needs", placement.Amounts{v1.ResourceCPU: 4000, v1.ResourceMemory: 9 * gi}, []unit{small, big, mem}, 2},
		{"a pod in two units counts once", placement.Amounts{v1.ResourceCPU: 5000}, []unit{big, big, small}, 2},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := fewestPods(tc.short, tc.units); got != tc.want {
				t.Errorf("fewestPods = %d, want %d", got, tc.want)
			}
		})
	}
}

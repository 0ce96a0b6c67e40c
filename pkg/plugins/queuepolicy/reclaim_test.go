package queuepolicy

import (
	"errors"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	corev1helpers "k8s.io/component-helpers/scheduling/corev1"
	st "k8s.io/kubernetes/pkg/scheduler/testing"

	"github.com/muster-sched/muster/apis/scheduling/v1alpha1"
	"github.com/muster-sched/muster/pkg/gang"
	"github.com/muster-sched/muster/pkg/queue"
)

// The preemptor of every case is gang ns/p of queue b.
var preemptorKey = gang.Key{Family: gang.FamilyMuster, Namespace: testNamespace, Name: "p"}

func cpu(milli int64) queue.Vector { return queue.Vector{v1.ResourceCPU: milli} }

func TestCandidates(t *testing.T) {
	// Queue a is over its deserved share (1 cpu) once it holds anything.
	x := testGang{name: "x", queue: "a", minMember: 2, cpu: "1"}
	y := testGang{name: "y", queue: "a", minMember: 1, cpu: "1"}
	// Gangs of the preemptor's queue b; the preemptor has priority 10.
	lower := testGang{name: "l", queue: "b", minMember: 1, cpu: "1", priority: 0}
	higher := testGang{name: "h", queue: "b", minMember: 1, cpu: "1", priority: 20}
	big := testGang{name: "s1", queue: "b", minMember: 1, cpu: "1", priority: 10}
	small := testGang{name: "s2", queue: "b", minMember: 1, cpu: "1", priority: 10}
	nodes := []*v1.Node{node("n1", "8"), node("n2", "8")}
	queues := func(a *v1alpha1.Queue) []*v1alpha1.Queue {
		return []*v1alpha1.Queue{a, capacityQueue("b", "", "")}
	}
	overA := capacityQueue("a", "1", "")

	tests := []struct {
		name        string
		queues      []*v1alpha1.Queue
		pods        []*v1.Pod
		need        queue.Vector
		drf         bool
		withinQueue bool
		notAdmitted bool
		// evicting names pods whose eviction is in flight.
		evicting []string
		// reserved names pending pods reserved a node (waiting at Permit
		// or being bound), by node.
		reserved map[string]string
		// protected is the pod-group label value a PodDisruptionBudget
		// allowing no disruption selects.
		protected string
		want      []string
	}{
		{
			name:   "reclaim extras, reclaim wholes fewest pods first, lower-priority extras and wholes, then same priority by dominant share",
			queues: queues(overA),
			pods: podsOf(
				x.pods("n1", "n1", "n2"), y.pods("n2"),
				lower.pods("n1", "n2"), higher.pods("n1", "n2"),
				big.pods("n1", "n1", "n2"), small.pods("n2", "n2"),
			),
			need: cpu(1000),
			drf:  true,
			want: []string{
				"reclaim extra ns/x [x-2] cpu=1",
				"reclaim whole ns/y [y-0] cpu=1",
				"reclaim whole ns/x [x-2 x-1 x-0] cpu=3",
				"preempt extra ns/l [l-1] cpu=1",
				"preempt whole ns/l [l-1 l-0] cpu=2",
				"evenShares extra ns/s1 [s1-2] cpu=1",
				"evenShares extra ns/s1 [s1-1] cpu=1",
				"evenShares extra ns/s2 [s2-1] cpu=1",
			},
		},
		{
			name:   "a queue at its deserved share gives nothing",
			queues: queues(capacityQueue("a", "3", "")),
			pods:   x.pods("n1", "n1", "n2"),
			need:   cpu(1000),
		},
		{
			name:   "a queue over its deserved share only in what the preemptor does not need gives nothing",
			queues: queues(overA),
			pods:   x.pods("n1", "n1", "n2"),
			need:   queue.Vector{v1.ResourceMemory: 1 << 30},
		},
		{
			name:   "a queue that is not reclaimable gives nothing",
			queues: queues(notReclaimable(capacityQueue("a", "1", ""))),
			pods:   x.pods("n1", "n1", "n2"),
			need:   cpu(1000),
		},
		{
			name:   "a higher-priority gang of the preemptor's queue gives nothing",
			queues: queues(overA),
			pods:   higher.pods("n1", "n2"),
			need:   cpu(1000),
			drf:    true,
		},
		{
			name:   "a gang of the preemptor's priority gives nothing without DRF preemption",
			queues: queues(overA),
			pods:   big.pods("n1", "n1", "n2"),
			need:   cpu(1000),
		},
		{
			name:   "the preemptor's own members are never offered",
			queues: queues(overA),
			pods:   testGang{name: "p", queue: "b", minMember: 1, cpu: "1", priority: 10}.pods("n1", "n2", ""),
			need:   cpu(1000),
			drf:    true,
		},
		{
			name:        "within the queue: other queues give nothing",
			queues:      queues(overA),
			pods:        podsOf(x.pods("n1", "n1", "n2"), lower.pods("n1", "n2")),
			need:        cpu(1000),
			withinQueue: true,
			want: []string{
				"preempt extra ns/l [l-1] cpu=1",
				"preempt whole ns/l [l-1 l-0] cpu=2",
			},
		},
		{
			name:        "a gang its queue did not admit is offered whole gangs only",
			queues:      queues(overA),
			pods:        podsOf(x.pods("n1", "n1", "n2"), lower.pods("n1", "n2"), big.pods("n1", "n1", "n2")),
			need:        cpu(1000),
			drf:         true,
			notAdmitted: true,
			want: []string{
				"reclaim whole ns/x [x-2 x-1 x-0] cpu=3",
				"preempt whole ns/l [l-1 l-0] cpu=2",
			},
		},
		{
			name:     "members being evicted are neither offered nor counted above minMember",
			queues:   queues(overA),
			pods:     podsOf(x.pods("n1", "n1", "n2"), y.pods("n2")),
			need:     cpu(1000),
			evicting: []string{"x-2", "y-0"},
			want:     []string{"reclaim whole ns/x [x-1 x-0] cpu=2"},
		},
		{
			name:     "members reserved and not bound yet are taken with the bound ones",
			queues:   queues(overA),
			pods:     x.pods("n1", "", "n2"),
			need:     cpu(1000),
			reserved: map[string]string{"x-1": "n1"},
			want: []string{
				"reclaim extra ns/x [x-2] cpu=1",
				"reclaim whole ns/x [x-2 x-1 x-0] cpu=3",
			},
		},
		{
			name:      "a gang a disruption budget protects is offered after every other",
			queues:    queues(overA),
			pods:      podsOf(x.pods("n1", "n1", "n2"), y.pods("n2"), lower.pods("n1")),
			need:      cpu(1000),
			protected: "x",
			want: []string{
				"reclaim whole ns/y [y-0] cpu=1",
				"preempt whole ns/l [l-0] cpu=1",
				"reclaim extra ns/x [x-2] cpu=1",
				"reclaim whole ns/x [x-2 x-1 x-0] cpu=3",
			},
		},
		{
			name:   "gangs in kube-system or with a system-critical pod are not offered",
			queues: queues(overA),
			pods: podsOf(
				testGang{namespace: metav1.NamespaceSystem, name: "k", queue: "a", minMember: 1, cpu: "1"}.pods("n1"),
				testGang{name: "c", queue: "a", minMember: 1, cpu: "1", priorityClass: "system-cluster-critical"}.pods("n1"),
				testGang{name: "d", queue: "a", minMember: 1, cpu: "1", priorityClass: "system-node-critical"}.pods("n2"),
				y.pods("n2"),
			),
			need: cpu(1000),
			want: []string{"reclaim whole ns/y [y-0] cpu=1"},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, pl, snap := newTestPlugin(t, testCluster{nodes: nodes, pods: tc.pods, queues: tc.queues}, tc.drf)
			for _, name := range tc.evicting {
				p := podNamed(t, tc.pods, name)
				key, _ := gang.KeyOf(p)
				pl.records.recordEvictions(gang.Key{Family: gang.FamilyMuster, Namespace: testNamespace, Name: "earlier"},
					[]unit{{gang: key, queue: p.Labels[v1alpha1.LabelQueue], pods: []*v1.Pod{p}}})
			}
			for name, node := range tc.reserved {
				p := podNamed(t, tc.pods, name)
				key, _ := gang.KeyOf(p)
				pl.gangs.Reserve(key, p.UID, node, time.Now())
			}
			if len(tc.reserved) > 0 {
				snap = pl.state.Refresh()
			}
			if tc.protected != "" {
				sel := labels.SelectorFromSet(labels.Set{v1alpha1.LabelPodGroup: tc.protected})
				pl.pdbs = pdbBlocks(func(string) ([]pdb, error) { return []pdb{{selector: sel, allowed: 0}}, nil })
			}
			got := pl.candidates(snap, preemptorKey, "b", 10, tc.need, tc.withinQueue, !tc.notAdmitted)
			if diff := cmp.Diff(tc.want, describeUnits(got)); diff != "" {
				t.Errorf("candidates (-want,+got):\n%s", diff)
			}
		})
	}
}

func TestChooseVictims(t *testing.T) {
	nodes := []*v1.Node{node("n1", "4"), node("n2", "4")}
	// x fills both nodes: x-0 and x-1 on n1, x-2 and x-3 on n2.
	x := testGang{name: "x", queue: "a", minMember: 2, cpu: "2"}
	xFull := x.pods("n1", "n1", "n2", "n2")
	tests := []struct {
		name   string
		queues []*v1alpha1.Queue
		pods   []*v1.Pod
		// The preemptor: gang p of queue b, its pending members placed
		// together.
		preemptor testGang
		// preemptorOn, when set, is the only node the members may take
		// (required node affinity).
		preemptorOn string
		members     int
		drf         bool
		withinQueue bool
		// evicting names pods whose eviction is in flight.
		evicting []string
		// protected is the pod-group label value a PodDisruptionBudget
		// allowing no disruption selects.
		protected string
		want      []string
		// wantPlan maps each member to its node.
		wantPlan map[string]string
	}{
		{
			name:   "a gang a disruption budget protects is spared when another choice exists",
			queues: []*v1alpha1.Queue{capacityQueue("a", "0", ""), capacityQueue("b", "", "")},
			pods: podsOf(testGang{name: "x", queue: "a", minMember: 1, cpu: "2"}.pods("n1", "n1"),
				testGang{name: "y", queue: "a", minMember: 1, cpu: "2"}.pods("n2", "n2")),
			protected: "x",
			preemptor: testGang{name: "p", queue: "b", minMember: 1, cpu: "4"},
			members:   1,
			want:      []string{"reclaim whole ns/y [y-1 y-0] cpu=4"},
			wantPlan:  map[string]string{"p-0": "n2"},
		},
		{
			name:      "a gang a disruption budget protects when nothing else lets the gang fit",
			queues:    []*v1alpha1.Queue{capacityQueue("a", "4", ""), capacityQueue("b", "", "")},
			pods:      xFull,
			protected: "x",
			preemptor: testGang{name: "p", queue: "b", minMember: 1, cpu: "2"},
			members:   1,
			want:      []string{"reclaim extra ns/x [x-3] cpu=2"},
			wantPlan:  map[string]string{"p-0": "n2"},
		},
		{
			name:      "a member above minMember is enough",
			queues:    []*v1alpha1.Queue{capacityQueue("a", "4", ""), capacityQueue("b", "", "")},
			pods:      xFull,
			preemptor: testGang{name: "p", queue: "b", minMember: 1, cpu: "2"},
			members:   1,
			want:      []string{"reclaim extra ns/x [x-3] cpu=2"},
			wantPlan:  map[string]string{"p-0": "n2"},
		},
		{
			name:      "the whole gang when its extras are not enough, never its extras with it",
			queues:    []*v1alpha1.Queue{capacityQueue("a", "0", ""), capacityQueue("b", "", "")},
			pods:      xFull,
			preemptor: testGang{name: "p", queue: "b", minMember: 2, cpu: "4"},
			members:   2,
			want:      []string{"reclaim whole ns/x [x-3 x-2 x-1 x-0] cpu=8"},
			wantPlan:  map[string]string{"p-0": "n1", "p-1": "n2"},
		},
		{
			name: "nothing when the victims within the queue's budget leave a member without room",
			// Queue a may lose 4 cpu: x's two extras, which free one node
			// for two members that need one each.
			queues:    []*v1alpha1.Queue{capacityQueue("a", "4", ""), capacityQueue("b", "", "")},
			pods:      xFull,
			preemptor: testGang{name: "p", queue: "b", minMember: 2, cpu: "4"},
			members:   2,
		},
		{
			name: "the budget spent node by node when, spent in order, it leaves each node short",
			// Queue a may lose 4 cpu. The newest four extras, x-7 to x-4,
			// free 3 cpu on n1 and 1 on n2: room for one member of two.
			queues:    []*v1alpha1.Queue{capacityQueue("a", "4", ""), capacityQueue("b", "", "")},
			pods:      testGang{name: "x", queue: "a", minMember: 1, cpu: "1"}.pods("n1", "n2", "n2", "n2", "n1", "n1", "n1", "n2"),
			preemptor: testGang{name: "p", queue: "b", minMember: 2, cpu: "2"},
			members:   2,
			want: []string{
				"reclaim extra ns/x [x-7] cpu=1", "reclaim extra ns/x [x-3] cpu=1",
				"reclaim extra ns/x [x-2] cpu=1", "reclaim extra ns/x [x-1] cpu=1",
			},
			wantPlan: map[string]string{"p-0": "n2", "p-1": "n2"},
		},
		{
			name: "the budget spent node by node on the nodes the members may take first",
			// Queue a may lose 4 cpu; the members may only take n2. In order,
			// and node by node from the first unit's node, it goes to x-7,
			// x-6 and x-5 on n1 first.
			queues:      []*v1alpha1.Queue{capacityQueue("a", "4", ""), capacityQueue("b", "", "")},
			pods:        testGang{name: "x", queue: "a", minMember: 1, cpu: "1"}.pods("n1", "n2", "n2", "n2", "n2", "n1", "n1", "n1"),
			preemptor:   testGang{name: "p", queue: "b", minMember: 2, cpu: "2"},
			preemptorOn: "n2",
			members:     2,
			want: []string{
				"reclaim extra ns/x [x-4] cpu=1", "reclaim extra ns/x [x-3] cpu=1",
				"reclaim extra ns/x [x-2] cpu=1", "reclaim extra ns/x [x-1] cpu=1",
			},
			wantPlan: map[string]string{"p-0": "n2", "p-1": "n2"},
		},
		{
			name:      "nothing when no node can take a member whatever is evicted",
			queues:    []*v1alpha1.Queue{capacityQueue("a", "0", ""), capacityQueue("b", "", "")},
			pods:      xFull,
			preemptor: testGang{name: "p", queue: "b", minMember: 1, cpu: "5"},
			members:   1,
		},
		{
			name:   "an earlier unit the fit does not need is dropped",
			queues: []*v1alpha1.Queue{capacityQueue("a", "0", ""), capacityQueue("b", "", "")},
			pods: podsOf(
				testGang{name: "x", queue: "a", minMember: 1, cpu: "1"}.pods("n1", "n1"),
				testGang{name: "y", queue: "a", minMember: 1, cpu: "4"}.pods("n2"),
			),
			// Candidates: x-1 (extra), y (whole, 1 pod), x (whole, 2 pods).
			preemptor: testGang{name: "p", queue: "b", minMember: 1, cpu: "4"},
			members:   1,
			want:      []string{"reclaim whole ns/y [y-0] cpu=4"},
			wantPlan:  map[string]string{"p-0": "n2"},
		},
		{
			name:      "a whole gang of a queue with no guarantee",
			queues:    []*v1alpha1.Queue{capacityQueue("a", "7", ""), capacityQueue("b", "", "")},
			pods:      testGang{name: "x", queue: "a", minMember: 4, cpu: "2"}.pods("n1", "n1", "n2", "n2"),
			preemptor: testGang{name: "p", queue: "b", minMember: 1, cpu: "2"},
			members:   1,
			want:      []string{"reclaim whole ns/x [x-3 x-2 x-1 x-0] cpu=8"},
			wantPlan:  map[string]string{"p-0": "n1"},
		},
		{
			name: "nothing when the only gang would take its queue below its guarantee",
			// (Queue b's realCapability is 8 cpu less a's guarantee: 2.)
			queues:    []*v1alpha1.Queue{capacityQueue("a", "7", "6"), capacityQueue("b", "", "")},
			pods:      testGang{name: "x", queue: "a", minMember: 4, cpu: "2"}.pods("n1", "n1", "n2", "n2"),
			preemptor: testGang{name: "p", queue: "b", minMember: 1, cpu: "2"},
			members:   1,
		},
		{
			name:   "a whole gang after its extras counts each of its members once against the guarantee",
			queues: []*v1alpha1.Queue{capacityQueue("a", "3", "3"), capacityQueue("b", "", "")},
			pods: podsOf(
				testGang{name: "x", queue: "a", minMember: 2, cpu: "1"}.pods("n1", "n1", "n1", "n1"),
				// 4 cpu of queue a no one may evict.
				testGang{namespace: metav1.NamespaceSystem, name: "k", queue: "a", minMember: 1, cpu: "4"}.pods("n2"),
			),
			// x-3 and x-2 leave n1 short; x whole leaves a 4 cpu, above its
			// 3 cpu guarantee.
			preemptor: testGang{name: "p", queue: "b", minMember: 1, cpu: "4"},
			members:   1,
			want:      []string{"reclaim whole ns/x [x-3 x-2 x-1 x-0] cpu=4"},
			wantPlan:  map[string]string{"p-0": "n1"},
		},
		{
			name:   "the extras a whole gang replaces count once in what its queue lost",
			queues: []*v1alpha1.Queue{capacityQueue("a", "2", ""), capacityQueue("b", "", "")},
			pods: podsOf(
				testGang{name: "x", queue: "a", minMember: 1, cpu: "2"}.pods("n1", "n1"),
				testGang{name: "z", queue: "a", minMember: 3, cpu: "1"}.pods("n2", "n2", "n2"),
			),
			// Candidates: x-1, x whole, z whole. Queue a holds 7 cpu: it is
			// still over its 2 once x is gone (3 left), not had x-1 been
			// counted twice (1 left).
			preemptor: testGang{name: "p", queue: "b", minMember: 2, cpu: "4"},
			members:   2,
			want: []string{
				"reclaim whole ns/x [x-1 x-0] cpu=4",
				"reclaim whole ns/z [z-2 z-1 z-0] cpu=3",
			},
			wantPlan: map[string]string{"p-0": "n1", "p-1": "n2"},
		},
		{
			name:      "nothing when the victims in flight used up the queue's budget",
			queues:    []*v1alpha1.Queue{capacityQueue("a", "6", ""), capacityQueue("b", "", "")},
			pods:      xFull,
			preemptor: testGang{name: "p", queue: "b", minMember: 1, cpu: "2"},
			members:   1,
			evicting:  []string{"x-3"},
		},
		{
			name:      "the same budget without victims in flight",
			queues:    []*v1alpha1.Queue{capacityQueue("a", "6", ""), capacityQueue("b", "", "")},
			pods:      xFull,
			preemptor: testGang{name: "p", queue: "b", minMember: 1, cpu: "2"},
			members:   1,
			want:      []string{"reclaim extra ns/x [x-3] cpu=2"},
			wantPlan:  map[string]string{"p-0": "n2"},
		},
		{
			name:        "a lower-priority member of the preemptor's queue",
			queues:      []*v1alpha1.Queue{capacityQueue("b", "", "")},
			pods:        testGang{name: "l", queue: "b", minMember: 2, cpu: "2"}.pods("n1", "n1", "n2", "n2"),
			preemptor:   testGang{name: "p", queue: "b", minMember: 1, cpu: "2", priority: 10},
			members:     1,
			withinQueue: true,
			want:        []string{"preempt extra ns/l [l-3] cpu=2"},
			wantPlan:    map[string]string{"p-0": "n2"},
		},
		{
			name: "preemption makes room under the preemptor's queue's ceiling",
			// n2 is empty, but queue b may hold 4 cpu and holds 2.
			queues:      []*v1alpha1.Queue{withCapability(capacityQueue("b", "", ""), "4")},
			pods:        testGang{name: "l", queue: "b", minMember: 1, cpu: "2"}.pods("n1"),
			preemptor:   testGang{name: "p", queue: "b", minMember: 1, cpu: "4", priority: 10},
			members:     1,
			withinQueue: true,
			want:        []string{"preempt whole ns/l [l-0] cpu=2"},
			wantPlan:    map[string]string{"p-0": "n1"},
		},
		{
			name:        "nothing when the preemptor's queue stays over its ceiling",
			queues:      []*v1alpha1.Queue{withCapability(capacityQueue("b", "", ""), "3")},
			pods:        testGang{name: "l", queue: "b", minMember: 1, cpu: "2"}.pods("n1"),
			preemptor:   testGang{name: "p", queue: "b", minMember: 1, cpu: "4", priority: 10},
			members:     1,
			withinQueue: true,
		},
		{
			name:   "DRF: a member of a gang whose share stays above the preemptor's",
			queues: []*v1alpha1.Queue{capacityQueue("b", "", "")},
			// s holds the whole cluster (share 1); p will hold 2 of 8 cpu.
			pods:        testGang{name: "s", queue: "b", minMember: 1, cpu: "2", priority: 10}.pods("n1", "n1", "n2", "n2"),
			preemptor:   testGang{name: "p", queue: "b", minMember: 1, cpu: "2", priority: 10},
			members:     1,
			drf:         true,
			withinQueue: true,
			want:        []string{"evenShares extra ns/s [s-3] cpu=2"},
			wantPlan:    map[string]string{"p-0": "n2"},
		},
		{
			name:   "DRF: shares that end equal",
			queues: []*v1alpha1.Queue{capacityQueue("b", "", "")},
			// p will hold 4 of 8 cpu, and s 4 once n2 is emptied.
			pods:        testGang{name: "s", queue: "b", minMember: 1, cpu: "2", priority: 10}.pods("n1", "n1", "n2", "n2"),
			preemptor:   testGang{name: "p", queue: "b", minMember: 1, cpu: "4", priority: 10},
			members:     1,
			drf:         true,
			withinQueue: true,
			want:        []string{"evenShares extra ns/s [s-3] cpu=2", "evenShares extra ns/s [s-2] cpu=2"},
			wantPlan:    map[string]string{"p-0": "n2"},
		},
		{
			name:   "DRF: nothing once the victim's share would fall below the preemptor's",
			queues: []*v1alpha1.Queue{capacityQueue("b", "", "")},
			// p will hold 4 of 8 cpu: s may lose s-2 (down to 4) but not s-1
			// as well (down to 2), and n2 needs both gone.
			pods:        testGang{name: "s", queue: "b", minMember: 1, cpu: "2", priority: 10}.pods("n1", "n2", "n2"),
			preemptor:   testGang{name: "p", queue: "b", minMember: 1, cpu: "4", priority: 10},
			members:     1,
			drf:         true,
			withinQueue: true,
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			members := tc.preemptor.pods(make([]string, tc.members)...)
			if tc.preemptorOn != "" {
				only := st.MakePod().NodeAffinityIn("metadata.name", []string{tc.preemptorOn}, st.NodeSelectorTypeMatchFields).Obj()
				for _, m := range members {
					m.Spec.Affinity = only.Spec.Affinity
				}
			}
			pods := podsOf(tc.pods, members)
			ctx, pl, snap := newTestPlugin(t, testCluster{nodes: nodes, pods: pods, queues: tc.queues}, tc.drf)
			for _, name := range tc.evicting {
				p := podNamed(t, pods, name)
				key, _ := gang.KeyOf(p)
				pl.records.recordEvictions(gang.Key{Family: gang.FamilyMuster, Namespace: testNamespace, Name: "earlier"},
					[]unit{{gang: key, queue: p.Labels[v1alpha1.LabelQueue], pods: []*v1.Pod{p}, usage: queue.FromList(podRequests(p))}})
			}
			if tc.protected != "" {
				sel := labels.SelectorFromSet(labels.Set{v1alpha1.LabelPodGroup: tc.protected})
				pl.pdbs = pdbBlocks(func(string) ([]pdb, error) { return []pdb{{selector: sel, allowed: 0}}, nil })
			}
			st := pl.gangs.Status(tc.preemptor.key())
			need := queue.Vector{}
			for _, m := range members {
				need.Add(queue.FromList(podRequests(m)))
			}
			units := pl.candidates(snap, st.Key, queue.QueueOf(&st), corev1helpers.PodPriority(members[0]), need, tc.withinQueue, true)
			victims, plan, err := pl.chooseVictims(ctx, snap, pl.records.inFlight(), members, units, &st, need, nil, nil)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, describeUnits(victims)); diff != "" {
				t.Errorf("victims (-want,+got):\n%s", diff)
			}
			var gotPlan map[string]string
			for uid, n := range plan {
				if gotPlan == nil {
					gotPlan = map[string]string{}
				}
				gotPlan[podByUID(t, members, string(uid)).Name] = n
			}
			if diff := cmp.Diff(tc.wantPlan, gotPlan); diff != "" {
				t.Errorf("plan (-want,+got):\n%s", diff)
			}
		})
	}
}

func podByUID(t *testing.T, pods []*v1.Pod, uid string) *v1.Pod {
	t.Helper()
	for _, p := range pods {
		if string(p.UID) == uid {
			return p
		}
	}
	t.Fatalf("no pod with UID %s", uid)
	return nil
}

func TestOverDeserved(t *testing.T) {
	f := &queue.Figures{
		Usage:    queue.Usage{Allocated: queue.Vector{v1.ResourceCPU: 4000, v1.ResourceMemory: 1 << 30}},
		Deserved: queue.Vector{v1.ResourceCPU: 2000, v1.ResourceMemory: 1 << 30},
	}
	tests := []struct {
		name string
		need queue.Vector
		want bool
	}{
		{"over in a needed resource", queue.Vector{v1.ResourceCPU: 1000}, true},
		{"at deserved in the only needed resource", queue.Vector{v1.ResourceMemory: 1}, false},
		{"a resource needed at zero does not count", queue.Vector{v1.ResourceCPU: 0, v1.ResourceMemory: 1}, false},
		{"a resource the queue does not hold", queue.Vector{"nvidia.com/gpu": 1}, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := overDeserved(f, tc.need); got != tc.want {
				t.Errorf("overDeserved(%v) = %v, want %v", tc.need, got, tc.want)
			}
		})
	}
}

func TestStillOver(t *testing.T) {
	deserved := queue.Vector{v1.ResourceCPU: 2000, v1.ResourceMemory: 1 << 30}
	cpuPod := st.MakePod().Name("c").Req(map[v1.ResourceName]string{v1.ResourceCPU: "1"}).Obj()
	memPod := st.MakePod().Name("m").Req(map[v1.ResourceName]string{v1.ResourceMemory: "1Gi"}).Obj()
	tests := []struct {
		name    string
		after   queue.Vector
		members []*v1.Pod
		want    bool
	}{
		{"over in what a member requests", queue.Vector{v1.ResourceCPU: 2001}, []*v1.Pod{cpuPod}, true},
		{"at deserved", queue.Vector{v1.ResourceCPU: 2000}, []*v1.Pod{cpuPod}, false},
		{"over only in what no member requests", queue.Vector{v1.ResourceCPU: 4000}, []*v1.Pod{memPod}, false},
		{"over in what another member requests", queue.Vector{v1.ResourceCPU: 4000}, []*v1.Pod{memPod, cpuPod}, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := stillOver(tc.after, deserved, tc.members); got != tc.want {
				t.Errorf("stillOver(%v) = %v, want %v", tc.after, got, tc.want)
			}
		})
	}
}

func TestSystemCritical(t *testing.T) {
	plain := st.MakePod().Namespace(testNamespace).Name("plain").Obj()
	system := st.MakePod().Namespace(metav1.NamespaceSystem).Name("system").Obj()
	critical := func(class string) *v1.Pod {
		p := st.MakePod().Namespace(testNamespace).Name(class).Obj()
		p.Spec.PriorityClassName = class
		return p
	}
	tests := []struct {
		name string
		pods []*v1.Pod
		want bool
	}{
		{"plain", []*v1.Pod{plain}, false},
		{"kube-system", []*v1.Pod{plain, system}, true},
		{"system-cluster-critical", []*v1.Pod{critical("system-cluster-critical")}, true},
		{"system-node-critical", []*v1.Pod{critical("system-node-critical")}, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := systemCritical(tc.pods); got != tc.want {
				t.Errorf("systemCritical = %v, want %v", got, tc.want)
			}
		})
	}
}

func TestPDBBlocks(t *testing.T) {
	plain := st.MakePod().Namespace(testNamespace).Name("plain").Label("app", "web").Obj()
	plain2 := st.MakePod().Namespace(testNamespace).Name("plain2").Label("app", "web").Obj()
	other := st.MakePod().Namespace(testNamespace).Name("other").Label("app", "db").Obj()
	web := labels.SelectorFromSet(labels.Set{"app": "web"})
	budgets := func(list ...pdb) func([]*v1.Pod) bool {
		return pdbBlocks(func(string) ([]pdb, error) { return list, nil })
	}
	tests := []struct {
		name string
		pods []*v1.Pod
		pdbs func([]*v1.Pod) bool
		want bool
	}{
		{"no budget", []*v1.Pod{plain}, budgets(), false},
		{"a budget allowing no disruption selects the pod", []*v1.Pod{plain}, budgets(pdb{selector: web, allowed: 0}), true},
		{"a budget allowing no disruption selects another pod", []*v1.Pod{other}, budgets(pdb{selector: web, allowed: 0}), false},
		{"a budget allowing a disruption", []*v1.Pod{plain}, budgets(pdb{selector: web, allowed: 1}), false},
		{"a budget allowing one disruption, two pods it selects", []*v1.Pod{plain, plain2}, budgets(pdb{selector: web, allowed: 1}), true},
		{"a budget allowing one disruption, one pod of two it selects", []*v1.Pod{plain, other}, budgets(pdb{selector: web, allowed: 1}), false},
		{"a budget allowing two disruptions, two pods", []*v1.Pod{plain, plain2}, budgets(pdb{selector: web, allowed: 2}), false},
		{"budgets that cannot be listed", []*v1.Pod{plain}, pdbBlocks(func(string) ([]pdb, error) { return nil, errors.New("lister down") }), true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := tc.pdbs(tc.pods); got != tc.want {
				t.Errorf("blocked = %v, want %v", got, tc.want)
			}
		})
	}
}

func TestExtraUnits(t *testing.T) {
	key := gang.Key{Family: gang.FamilyMuster, Namespace: testNamespace, Name: "x"}
	g := &queue.GangFigures{Queue: "a"}
	member := func(name, role string) *v1.Pod {
		return st.MakePod().Namespace(testNamespace).Name(name).UID(name).Label(v1alpha1.LabelRole, role).
			Req(map[v1.ResourceName]string{v1.ResourceCPU: "1"}).Node("n1").Obj()
	}
	// Newest first, as PlacedMembers lists them.
	bound := []*v1.Pod{member("w-2", "worker"), member("ps-1", "ps"), member("w-1", "worker"), member("ps-0", "ps"), member("w-0", "worker")}
	tests := []struct {
		name string
		spec *gang.Spec
		want []string
	}{
		{
			name: "not admitted: no extras",
		},
		{
			name: "members above minMember, newest first",
			spec: &gang.Spec{MinMember: 3},
			want: []string{"w-2", "ps-1"},
		},
		{
			name: "a role at its minimum keeps its members; another role gives instead",
			spec: &gang.Spec{MinMember: 3, MinTaskMember: map[string]int32{"ps": 2}},
			want: []string{"w-2", "w-1"},
		},
		{
			name: "every role at its minimum: fewer extras than members above minMember",
			spec: &gang.Spec{MinMember: 2, MinTaskMember: map[string]int32{"ps": 2, "worker": 2}},
			want: []string{"w-2"},
		},
		{
			name: "minMember reached: nothing",
			spec: &gang.Spec{MinMember: 5},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var got []string
			for _, u := range extraUnits(key, g, bound, tt.spec, reclaim) {
				if u.whole || len(u.pods) != 1 {
					t.Fatalf("extra unit %v: want one member, not whole", u)
				}
				got = append(got, u.pods[0].Name)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("extras (-want +got):\n%s", diff)
			}
		})
	}
}

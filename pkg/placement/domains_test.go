package placement

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/sets"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework"
	st "k8s.io/kubernetes/pkg/scheduler/testing"
)

const (
	rackKey  = "topology.muster.dev/rack"
	blockKey = "topology.muster.dev/block"
	gpu      = v1.ResourceName("nvidia.com/gpu")
)

// rackNode is a node of 64 cpu, 8 GPUs and the labels, running pods.
func rackNode(name string, labels map[string]string, pods ...*v1.Pod) fwk.NodeInfo {
	n := st.MakeNode().Name(name).Capacity(map[v1.ResourceName]string{v1.ResourceCPU: "64", gpu: "8", v1.ResourcePods: "110"}).Obj()
	n.Labels = labels
	info := framework.NewNodeInfo(pods...)
	info.SetNode(n)
	return info
}

func gpuPod(name string, gpus string) *v1.Pod {
	return st.MakePod().Name(name).UID(name).Req(map[v1.ResourceName]string{v1.ResourceCPU: "1", gpu: gpus}).Obj()
}

func names(ds []Domain) []string {
	var out []string
	for _, d := range ds {
		out = append(out, d.Name)
	}
	return out
}

func TestDomainsAndRank(t *testing.T) {
	in := func(rack, block string) map[string]string {
		return map[string]string{rackKey: rack, blockKey: block}
	}
	nodes := []fwk.NodeInfo{
		// r1: 16 GPUs, 4 of them used.
		rackNode("r1-0", in("r1", "b1"), gpuPod("p0", "4")),
		rackNode("r1-1", in("r1", "b1")),
		// r2: 16 GPUs, none used.
		rackNode("r2-0", in("r2", "b1")),
		rackNode("r2-1", in("r2", "b1")),
		// r3: 24 GPUs, one node cordoned: 16 count.
		rackNode("r3-0", in("r3", "b2")),
		rackNode("r3-1", in("r3", "b2")),
		rackNode("r3-2", in("r3", "b2")),
		// No rack.
		rackNode("loose", nil),
	}
	nodes[6].Node().Spec.Unschedulable = true
	tests := []struct {
		name             string
		key, required    string
		need             Amounts
		wantFit          []string
		wantWhy          string
		wantNodesOfFirst int
	}{
		{name: "the tightest rack first", key: rackKey, need: Amounts{gpu: 12, v1.ResourceCPU: 12000},
			wantFit: []string{"r1", "r2", "r3"}, wantNodesOfFirst: 2},
		{name: "only racks with the room", key: rackKey, need: Amounts{gpu: 16, v1.ResourceCPU: 2000},
			wantFit: []string{"r2", "r3"}, wantNodesOfFirst: 2},
		{name: "none fits: the closest and what it lacks", key: rackKey, need: Amounts{gpu: 20, v1.ResourceCPU: 2000},
			wantWhy: "needs 20 nvidia.com/gpu in one topology.muster.dev/rack; the best (r2) has 16 nvidia.com/gpu free"},
		{name: "within the required block", key: rackKey, required: blockKey, need: Amounts{gpu: 8},
			wantFit: []string{"b1/r1", "b1/r2", "b2/r3"}, wantNodesOfFirst: 2},
		{name: "no node has the label", key: "example.com/pod", need: Amounts{gpu: 1},
			wantWhy: "no node has label example.com/pod"},
		{name: "ties on the dominant share go by name", key: rackKey, need: Amounts{gpu: 16, v1.ResourceCPU: 100000},
			wantFit: []string{"r2", "r3"}, wantNodesOfFirst: 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fit, why := Rank(Domains(nodes, tt.key, tt.required, nil, tt.need, nil), tt.need, tt.key)
			if diff := cmp.Diff(tt.wantFit, names(fit)); diff != "" {
				t.Errorf("domains that fit (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tt.wantWhy, why); diff != "" {
				t.Errorf("why (-want +got):\n%s", diff)
			}
			if len(fit) > 0 && fit[0].Nodes.Len() != tt.wantNodesOfFirst {
				t.Errorf("the first domain has %d nodes, want %d", fit[0].Nodes.Len(), tt.wantNodesOfFirst)
			}
		})
	}
}

// TestDomainsCountTakers: the room of nodes no member can take (tainted
// against them, outside their node selector) is not counted, and such a
// node stays in its domain.
func TestDomainsCountTakers(t *testing.T) {
	rack := func(r string) map[string]string { return map[string]string{rackKey: r, "pool": "gpu"} }
	tainted := rackNode("r1-0", rack("r1"))
	tainted.Node().Spec.Taints = []v1.Taint{{Key: "team", Value: "x", Effect: v1.TaintEffectNoSchedule}}
	preferNot := rackNode("r1-1", rack("r1"))
	preferNot.Node().Spec.Taints = []v1.Taint{{Key: "team", Value: "x", Effect: v1.TaintEffectPreferNoSchedule}}
	otherPool := rackNode("r2-0", map[string]string{rackKey: "r2", "pool": "cpu"})
	nodes := []fwk.NodeInfo{tainted, preferNot, otherPool, rackNode("r2-1", rack("r2"))}
	plain := gpuPod("m", "4")
	selective := gpuPod("s", "4")
	selective.Spec.NodeSelector = map[string]string{"pool": "gpu"}
	tolerant := gpuPod("t", "4")
	tolerant.Spec.Tolerations = []v1.Toleration{{Key: "team", Operator: v1.TolerationOpEqual, Value: "x", Effect: v1.TaintEffectNoSchedule}}
	need := Amounts{gpu: 16}
	tests := []struct {
		name    string
		members []*v1.Pod
		wantFit []string
		wantWhy string
	}{
		{name: "no members: every schedulable node", wantFit: []string{"r1", "r2"}},
		{name: "a taint the members do not tolerate", members: []*v1.Pod{plain, plain},
			wantFit: []string{"r2"}},
		{name: "a node selector", members: []*v1.Pod{selective, selective},
			wantWhy: "needs 16 nvidia.com/gpu in one topology.muster.dev/rack; the best (r1) has 8 nvidia.com/gpu free"},
		{name: "one member tolerates it", members: []*v1.Pod{plain, tolerant},
			wantFit: []string{"r1", "r2"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			domains := Domains(nodes, rackKey, "", tt.members, need, nil)
			for _, d := range domains {
				if d.Nodes.Len() != 2 {
					t.Errorf("domain %s has nodes %v, want 2", d.Name, sets.List(d.Nodes))
				}
			}
			fit, why := Rank(domains, need, rackKey)
			if diff := cmp.Diff(tt.wantFit, names(fit)); diff != "" {
				t.Errorf("domains that fit (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tt.wantWhy, why); diff != "" {
				t.Errorf("why (-want +got):\n%s", diff)
			}
		})
	}
}

// TestDomainsCountRemoved: the room of victims taken off their nodes is
// free in their domain.
func TestDomainsCountRemoved(t *testing.T) {
	victim := gpuPod("v", "8")
	nodes := []fwk.NodeInfo{rackNode("r1-0", map[string]string{rackKey: "r1"}, victim)}
	need := Amounts{gpu: 8}
	if fit, why := Rank(Domains(nodes, rackKey, "", nil, need, nil), need, rackKey); len(fit) != 0 {
		t.Fatalf("a full rack fits: %v", names(fit))
	} else if want := "needs 8 nvidia.com/gpu in one topology.muster.dev/rack; the best (r1) has 0 nvidia.com/gpu free"; why != want {
		t.Errorf("why = %q, want %q", why, want)
	}
	removed := []PodOnNode{{Pod: victim, Node: "r1-0"}}
	if fit, _ := Rank(Domains(nodes, rackKey, "", nil, need, removed), need, rackKey); len(fit) != 1 {
		t.Errorf("the rack does not fit with its victim removed")
	}
}

// TestAdvertised: a resource no node has allocatable (one devices
// provide) is left to the trial placement.
func TestAdvertised(t *testing.T) {
	nodes := []fwk.NodeInfo{rackNode("n", nil)}
	got := Advertised(Amounts{gpu: 8, "example.com/dra": 1, v1.ResourceCPU: 1000}, nodes)
	if diff := cmp.Diff(Amounts{gpu: 8, v1.ResourceCPU: 1000}, got); diff != "" {
		t.Errorf("advertised (-want +got):\n%s", diff)
	}
}

// TestRankDominant: the domain where the gang takes the largest share of
// some resource goes first: a rack whose GPUs the gang fills exactly beats
// one with twice the GPUs, however much cpu the first has left over.
func TestRankDominant(t *testing.T) {
	domains := []Domain{
		{Name: "big", free: Amounts{gpu: 32, v1.ResourceCPU: 70000}},
		{Name: "exact", free: Amounts{gpu: 16, v1.ResourceCPU: 1000000}},
	}
	fit, _ := Rank(domains, Amounts{gpu: 16, v1.ResourceCPU: 64000}, rackKey)
	if diff := cmp.Diff([]string{"exact", "big"}, names(fit)); diff != "" {
		t.Errorf("order (-want +got):\n%s", diff)
	}
}

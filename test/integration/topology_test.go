package integration

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/utils/ptr"
	vcv1beta1 "volcano.sh/apis/pkg/apis/scheduling/v1beta1"

	"github.com/muster-sched/muster/apis/scheduling/v1alpha1"
	"github.com/muster-sched/muster/pkg/placement"
	"github.com/muster-sched/muster/pkg/simulator"
)

// topologyGang is a gang of some kind with a topology constraint, expressed
// as the kind expresses it: Muster's PodGroup spec, Volcano's
// networkTopology (tier 1 is the rack level), annotations on the members
// of the others.
type topologyGang struct {
	kindGang
	annotations map[string]string
}

func (e *env) topologyGang(k groupKind, name string, min int32, topology v1alpha1.TopologySpec) topologyGang {
	e.t.Helper()
	spec := v1alpha1.PodGroupSpec{MinMember: min}
	g := topologyGang{kindGang: kindGang{e: e, kind: k, name: name, spec: spec}}
	switch k.name {
	case musterKind.name:
		spec.Topology = &topology
		e.podGroup(name, spec)
	case "volcano":
		if topology.Required != "" && topology.Required != v1alpha1.LabelRack || topology.Preferred != "" && topology.Preferred != v1alpha1.LabelRack {
			e.t.Fatalf("a Volcano gang's tier 1 is the rack, not %+v", topology)
		}
		mode := vcv1beta1.HardNetworkTopologyMode
		if topology.Required == "" {
			mode = vcv1beta1.SoftNetworkTopologyMode
		}
		pg := &vcv1beta1.PodGroup{
			ObjectMeta: metav1.ObjectMeta{Name: name},
			Spec: vcv1beta1.PodGroupSpec{MinMember: min,
				NetworkTopology: &vcv1beta1.NetworkTopologySpec{Mode: mode, HighestTierAllowed: ptr.To(1)}},
		}
		if _, err := volcanoClient(e.t).SchedulingV1beta1().PodGroups(e.ns).Create(e.ctx, pg, metav1.CreateOptions{}); err != nil {
			e.t.Fatal(err)
		}
	default:
		if k.create != nil {
			k.create(e, name, spec)
		}
		setMeta(&g.annotations, v1alpha1.AnnotationTopologyRequired, topology.Required,
			v1alpha1.AnnotationTopologyPreferred, topology.Preferred)
	}
	return g
}

// members creates n members requesting cpu, named <gang>-<i>.
func (g topologyGang) members(n int, cpu string) []string {
	names := names(g.name, n)
	for _, name := range names {
		p := g.member(name, cpu, "")
		for k, v := range g.annotations {
			setMeta(&p.Annotations, k, v)
		}
		g.e.create(p)
	}
	return names
}

// racks creates racks r1, r2, … of n nodes of 4 cpu each, named
// <rack>-<i>, all in block b1.
func (e *env) racks(racks, n int) {
	for r := 1; r <= racks; r++ {
		rack := "r" + string(rune('0'+r))
		e.nodes(rack, n, simulator.NodeShape{CPU: "4", Memory: "16Gi",
			Labels: map[string]string{v1alpha1.LabelRack: rack, v1alpha1.LabelBlock: "b1"}})
	}
}

// rackOf is the rack of a node the racks made.
func rackOf(node string) string { return strings.SplitN(node, "-", 2)[0] }

// racksOf are the distinct racks of the members' nodes.
func racksOf(placed map[string]string, members []string) []string {
	seen := map[string]bool{}
	var out []string
	for _, m := range members {
		if r := rackOf(placed[m]); !seen[r] {
			seen[r] = true
			out = append(out, r)
		}
	}
	return out
}

// TestTopologyRequired: for every gang source, a gang with a required rack
// is placed within one rack, the tightest that takes it whole; a gang that
// fits no rack binds nothing, says what it needs and what the best rack
// has, and binds within 2 s once a rack frees, in that rack.
func TestTopologyRequired(t *testing.T) {
	required := v1alpha1.TopologySpec{Required: v1alpha1.LabelRack}
	for _, k := range groupKinds(t) {
		t.Run(k.name, func(t *testing.T) {
			e := newEnv(t)
			e.racks(2, 2)
			// A node in no rack, so that the queue admits c below.
			e.nodes("spare", 1, simulator.NodeShape{CPU: "4", Memory: "16Gi"})
			filler := e.pod("filler", map[v1.ResourceName]string{v1.ResourceCPU: "2"})
			filler.Spec.NodeName = "r1-0"
			e.create(filler)
			e.startScheduler(k.config(t))

			// r1 has 6 cpu free, r2 8: the tighter r1 takes the gang.
			a := e.topologyGang(k, "a", 2, required).members(2, "2")
			if got := racksOf(e.waitBound(a...), a); len(got) != 1 || got[0] != "r1" {
				t.Fatalf("gang a is in racks %v, want r1 alone (the tightest that fits)", got)
			}
			// Only r2 takes 2 × 4 cpu.
			b := e.topologyGang(k, "b", 2, required).members(2, "4")
			if got := racksOf(e.waitBound(b...), b); len(got) != 1 || got[0] != "r2" {
				t.Fatalf("gang b is in racks %v, want r2", got)
			}
			// 2 cpu are free in r1, none in r2, 4 in no rack: c (4 cpu)
			// waits.
			cg := e.topologyGang(k, "c", 2, required)
			c := cg.members(2, "2")
			cg.waitWhy(c[0], "Unschedulable", "needs 4 cpu in one topology.muster.dev/rack; the best (r1) has 2 cpu free")
			if bound := e.bound(); bound[c[0]] != "" || bound[c[1]] != "" {
				t.Fatalf("a member of gang c bound while no rack fits it: %v", bound)
			}
			e.deletePods(b...)
			if got := racksOf(e.waitBoundWithin(2*time.Second, c...), c); len(got) != 1 || got[0] != "r2" {
				t.Fatalf("gang c is in racks %v, want r2", got)
			}
		})
	}
}

// TestTopologyPreferred: for every gang source, a gang preferring a rack
// is placed within one rack where one takes it, and falls back to the
// block when none does, where a required rack would wait.
func TestTopologyPreferred(t *testing.T) {
	preferred := v1alpha1.TopologySpec{Preferred: v1alpha1.LabelRack}
	for _, k := range groupKinds(t) {
		t.Run(k.name, func(t *testing.T) {
			e := newEnv(t)
			e.racks(2, 3)
			e.startScheduler(k.config(t))

			a := e.topologyGang(k, "a", 2, preferred).members(2, "3")
			if got := racksOf(e.waitBound(a...), a); len(got) != 1 {
				t.Fatalf("gang a is in racks %v, want one", got)
			}
			// One 3-cpu member fits per node, and a rack has 3 nodes: no
			// rack takes 4, the block does.
			b := e.topologyGang(k, "b", 4, preferred).members(4, "3")
			if got := racksOf(e.waitBound(b...), b); len(got) != 2 {
				t.Fatalf("gang b is in racks %v, want both (the block)", got)
			}
		})
	}
}

// TestTopologyQueueDefault: a gang that gives no constraint of its own
// takes its queue's. Least-allocated scoring alone would spread the two
// members over the racks' emptier nodes.
func TestTopologyQueueDefault(t *testing.T) {
	e := newEnv(t)
	e.racks(2, 2)
	for _, node := range []string{"r1-0", "r2-0"} {
		filler := e.pod("filler-"+node, map[v1.ResourceName]string{v1.ResourceCPU: "1"})
		filler.Spec.NodeName = node
		e.create(filler)
	}
	e.queue("racked", v1alpha1.QueueSpec{Topology: &v1alpha1.TopologySpec{Required: v1alpha1.LabelRack}})
	e.startScheduler(gangConfig(t))
	labels := musterLabels("g", 2)
	labels[v1alpha1.LabelQueue] = "racked"
	g := e.members("g", 2, "3", labels)
	if got := racksOf(e.waitBound(g...), g); len(got) != 1 {
		t.Fatalf("gang g is in racks %v, want one (its queue's required rack)", got)
	}
}

// TestTopologyElastic: the members of an elastic gang (minMember 1) stay
// in the required rack of the first one placed, and never go to a node in
// no rack, though the spreading scores would choose the big one there: a
// third 3-cpu member finds no room in a rack of two 4-cpu nodes and
// waits.
func TestTopologyElastic(t *testing.T) {
	e := newEnv(t)
	e.racks(2, 2)
	e.nodes("spare", 1, simulator.NodeShape{CPU: "16", Memory: "64Gi"})
	e.startScheduler(gangConfig(t))
	g := e.topologyGang(musterKind, "g", 1, v1alpha1.TopologySpec{Required: v1alpha1.LabelRack})
	members := g.members(3, "3")
	var bound map[string]string
	var placed []string
	err := wait.PollUntilContextTimeout(e.ctx, 50*time.Millisecond, 30*time.Second, true, func(context.Context) (bool, error) {
		bound, placed = e.bound(), nil
		for _, m := range members {
			if bound[m] != "" {
				placed = append(placed, m)
			}
		}
		return len(placed) >= 2, nil
	})
	if err != nil {
		t.Fatalf("members bound: %v; want two", bound)
	}
	time.Sleep(time.Second) // the third member would have bound by now
	bound = e.bound()
	if got := racksOf(bound, placed); len(bound) != 2 || len(got) != 1 || got[0] == "spare" {
		t.Fatalf("members bound %v, in racks %v; want two, in one rack", bound, got)
	}
}

// TestTopologyTaintedRacks: racks whose nodes the gang does not tolerate
// count no room, so they neither rank first nor use up the domains a
// placement tries. Nine such racks are each tighter for the gang than the
// one rack it may use; were they counted, the eight tried would all fail.
func TestTopologyTaintedRacks(t *testing.T) {
	e := newEnv(t)
	for i := 1; i <= placement.MaxDomainTries+1; i++ {
		rack := fmt.Sprintf("t%d", i)
		e.nodes(rack, 2, simulator.NodeShape{CPU: "4", Memory: "16Gi",
			Labels: map[string]string{v1alpha1.LabelRack: rack},
			Taints: []v1.Taint{{Key: "team", Value: "other", Effect: v1.TaintEffectNoSchedule}}})
	}
	e.nodes("ok", 3, simulator.NodeShape{CPU: "4", Memory: "16Gi", Labels: map[string]string{v1alpha1.LabelRack: "ok"}})
	e.startScheduler(gangConfig(t))
	g := e.topologyGang(musterKind, "g", 2, v1alpha1.TopologySpec{Required: v1alpha1.LabelRack}).members(2, "3")
	if got := racksOf(e.waitBound(g...), g); len(got) != 1 || got[0] != "ok" {
		t.Fatalf("gang g is in racks %v, want ok", got)
	}
}

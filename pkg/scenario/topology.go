package scenario

import (
	"fmt"
	"sort"
	"strings"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation"

	musterv1alpha1 "github.com/muster-sched/muster/apis/scheduling/v1alpha1"
)

// node is the group's i-th node, with its rack and block labels.
func (g *NodeGroup) node(i int) (*v1.Node, error) {
	n, err := g.nodeShape().Node(fmt.Sprintf("%s-%d", g.Name, i))
	if err != nil {
		return nil, err
	}
	for k, v := range g.topologyLabels(i) {
		n.Labels[k] = v
	}
	return n, nil
}

// topologyLabels are the rack and block labels of the group's i-th node;
// nil without a topology.
func (g *NodeGroup) topologyLabels(i int) map[string]string {
	t := g.Topology
	if t == nil || t.NodesPerRack < 1 {
		return nil
	}
	rack := i / t.NodesPerRack
	out := map[string]string{musterv1alpha1.LabelRack: fmt.Sprintf("%s-rack-%d", g.Name, rack)}
	if t.RacksPerBlock > 0 {
		out[musterv1alpha1.LabelBlock] = fmt.Sprintf("%s-block-%d", g.Name, rack/t.RacksPerBlock)
	}
	return out
}

// racks is the number of racks of the group; 0 without a topology.
func (g *NodeGroup) racks() int {
	if g.Topology == nil || g.Topology.NodesPerRack < 1 {
		return 0
	}
	return (g.Count + g.Topology.NodesPerRack - 1) / g.Topology.NodesPerRack
}

// Racks is the number of racks of the cluster.
func (s *Scenario) Racks() int {
	n := 0
	for i := range s.Cluster.Nodes {
		n += s.Cluster.Nodes[i].racks()
	}
	return n
}

// nodeLabelKeys are the label keys some node of the cluster carries.
func (s *Scenario) nodeLabelKeys() map[string]bool {
	keys := map[string]bool{v1.LabelHostname: true, LabelNodeGroup: true}
	for i := range s.Cluster.Nodes {
		g := &s.Cluster.Nodes[i]
		for k := range g.Labels {
			keys[k] = true
		}
		for k := range g.topologyLabels(0) {
			keys[k] = true
		}
	}
	return keys
}

// validateNodeTopology checks a node group's racks and blocks: whole racks
// of nodes, whole blocks of racks, and no label of its own in their way.
func (v *validator) validateNodeTopology(p path, g *NodeGroup) {
	t := g.Topology
	if t == nil {
		return
	}
	for _, key := range []string{musterv1alpha1.LabelRack, musterv1alpha1.LabelBlock} {
		if _, set := g.Labels[key]; set {
			v.errorf(p.with("labels", key), "is set by topology: leave it out of labels, or drop topology")
		}
	}
	p = p.with("topology")
	if t.NodesPerRack < 1 {
		v.errorf(p.with("nodesPerRack"), "must be at least 1 (got %d)", t.NodesPerRack)
		return
	}
	if g.Count > 0 && g.Count%t.NodesPerRack != 0 {
		v.errorf(p.with("nodesPerRack"), "must divide the group's count (%d) into whole racks (got %d)", g.Count, t.NodesPerRack)
		return
	}
	if t.RacksPerBlock < 0 {
		v.errorf(p.with("racksPerBlock"), "must not be negative (got %d)", t.RacksPerBlock)
	} else if racks := g.racks(); t.RacksPerBlock > 0 && racks%t.RacksPerBlock != 0 {
		v.errorf(p.with("racksPerBlock"), "must divide the group's %d racks into whole blocks (got %d)", racks, t.RacksPerBlock)
	}
}

// validateGangTopology checks a workload's topology: only gangs have one,
// and each key is a label key some node carries.
func (s *Scenario) validateGangTopology(v *validator, p path, w *Workload, nodeKeys map[string]bool) {
	t := w.Topology
	if t == nil {
		return
	}
	p = p.with("topology")
	if w.Kind != KindGang {
		v.errorf(p, "only a gang has a topology")
		return
	}
	if t.Required == "" && t.Preferred == "" {
		v.errorf(p, "set required, preferred or both")
	}
	for _, f := range []struct{ name, key string }{{"required", t.Required}, {"preferred", t.Preferred}} {
		if f.key == "" {
			continue
		}
		if errs := validation.IsQualifiedName(f.key); len(errs) > 0 {
			v.errorf(p.with(f.name), "must be a node label key such as %s (got %q: %s)", musterv1alpha1.LabelRack, f.key, strings.Join(errs, "; "))
		} else if !nodeKeys[f.key] {
			v.errorf(p.with(f.name), "no node carries the label %q (the nodes have %s)", f.key, strings.Join(sortedKeys(nodeKeys), ", "))
		}
	}
}

// topologyAnnotations are the gang's constraint as annotations on each
// member, for gangs whose group object has no field for it.
func (w *Workload) topologyAnnotations() map[string]string {
	if w.Kind != KindGang || w.Topology == nil {
		return nil
	}
	out := map[string]string{}
	if w.Topology.Required != "" {
		out[musterv1alpha1.AnnotationTopologyRequired] = w.Topology.Required
	}
	if w.Topology.Preferred != "" {
		out[musterv1alpha1.AnnotationTopologyPreferred] = w.Topology.Preferred
	}
	return out
}

// musterTopology is the gang's constraint as a Muster PodGroup's.
func (w *Workload) musterTopology() *musterv1alpha1.TopologySpec {
	if w.Topology == nil {
		return nil
	}
	return &musterv1alpha1.TopologySpec{Required: w.Topology.Required, Preferred: w.Topology.Preferred}
}

// placement counts the placed gangs with a constraint on one key and
// those of them whose members all run in one domain of it.
type placement struct {
	gangs, inDomain int
}

func (p placement) share() float64 {
	if p.gangs == 0 {
		return 0
	}
	return float64(p.inDomain) / float64(p.gangs)
}

// add counts a gang constrained on key if it was placed: at least
// minMember members bound.
func (p *placement) add(g *gangRecord, key string, nodeLabels map[string]map[string]string) {
	if key == "" {
		return
	}
	bound := 0
	for _, m := range g.members {
		if !m.bound.IsZero() {
			bound++
		}
	}
	if bound == 0 || bound < g.minMember {
		return
	}
	p.gangs++
	if inOneDomain(g.members, key, nodeLabels) {
		p.inDomain++
	}
}

// inOneDomain says whether every bound member ran on nodes with one value
// of key; a node without the key is a domain apart.
func inOneDomain(members []*podRecord, key string, nodeLabels map[string]map[string]string) bool {
	domain := ""
	for _, m := range members {
		if m.bound.IsZero() {
			continue
		}
		d, ok := nodeLabels[m.node][key]
		if !ok || domain != "" && d != domain {
			return false
		}
		domain = d
	}
	return true
}

// FreeCapacity is what the cluster could still give a gang of whole GPU
// nodes at one moment: GPU nodes with every GPU free and their GPUs (of
// all free GPUs: the rest are fragments), and within one rack the most
// such nodes and the most free GPUs.
type FreeCapacity struct {
	WholeNodes     int `json:"wholeFreeNodes"`
	WholeNodeGPUs  int `json:"wholeFreeNodeGPUs"`
	FreeGPUs       int `json:"freeGPUs"`
	RackWholeNodes int `json:"rackWholeFreeNodes,omitempty"`
	RackFreeGPUs   int `json:"rackFreeGPUs,omitempty"`
}

// gpuNode is a node with GPUs, for FreeCapacity.
type gpuNode struct {
	name string
	rack string // "" when the node is in no rack
	gpus int
}

// gpuNodes are the scenario's nodes with GPUs, in name order.
func (s *Scenario) gpuNodes() []gpuNode {
	var out []gpuNode
	for i := range s.Cluster.Nodes {
		g := &s.Cluster.Nodes[i]
		if g.GPUs < 1 {
			continue
		}
		for k := range g.Count {
			out = append(out, gpuNode{name: fmt.Sprintf("%s-%d", g.Name, k), rack: g.topologyLabels(k)[musterv1alpha1.LabelRack], gpus: g.GPUs})
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].name < out[j].name })
	return out
}

// freeCapacity measures FreeCapacity from the GPUs in use per node.
func freeCapacity(nodes []gpuNode, used map[string]int) FreeCapacity {
	var fc FreeCapacity
	rackWhole, rackFree := map[string]int{}, map[string]int{}
	for _, n := range nodes {
		free := max(0, n.gpus-used[n.name])
		fc.FreeGPUs += free
		whole := free == n.gpus
		if whole {
			fc.WholeNodes++
			fc.WholeNodeGPUs += n.gpus
		}
		if n.rack == "" {
			continue
		}
		rackFree[n.rack] += free
		if whole {
			rackWhole[n.rack]++
		}
	}
	for _, v := range rackWhole {
		fc.RackWholeNodes = max(fc.RackWholeNodes, v)
	}
	for _, v := range rackFree {
		fc.RackFreeGPUs = max(fc.RackFreeGPUs, v)
	}
	return fc
}

// validateTopologyBounds checks an expectation's topology bounds: shares
// from 0 to 1 of gangs the scenario has, and whole free nodes of a cluster
// with GPUs.
func (s *Scenario) validateTopologyBounds(v *validator, p path, e *Expectation) {
	var required, preferred bool
	for i := range s.Workloads {
		if t := s.Workloads[i].Topology; t != nil && s.Workloads[i].Kind == KindGang {
			required = required || t.Required != ""
			preferred = preferred || t.Preferred != ""
		}
	}
	for _, b := range []struct {
		name  string
		bound *float64
		has   bool
		what  string
	}{
		{"minRequiredPlacement", e.MinRequiredPlacement, required, "required"},
		{"minPreferredPlacement", e.MinPreferredPlacement, preferred, "preferred"},
	} {
		switch {
		case b.bound == nil:
		case *b.bound < 0 || *b.bound > 1:
			v.errorf(p.with(b.name), "must be a share from 0 to 1, such as 1 for every gang (got %v)", *b.bound)
		case !b.has:
			v.errorf(p.with(b.name), "no gang has a %s topology", b.what)
		}
	}
	if b := e.MinWholeFreeNodes; b != nil {
		if *b < 0 {
			v.errorf(p.with("minWholeFreeNodes"), "must not be negative (got %v)", *b)
		} else if len(s.gpuNodes()) == 0 {
			v.errorf(p.with("minWholeFreeNodes"), "no node group has GPUs")
		}
	}
}

package gangscheduling

import (
	"k8s.io/apimachinery/pkg/util/sets"

	"github.com/muster-sched/muster/pkg/gang"
)

// placedNodes are the nodes of the gang's members placed (bound, or
// reserved by this scheduler).
func (pl *Plugin) placedNodes(key gang.Key) sets.Set[string] {
	nodes := sets.New[string]()
	for _, p := range pl.manager.PlacedMembers(key) {
		nodes.Insert(p.Spec.NodeName)
	}
	return nodes
}

// requiredDomain is the nodes a member placed after the gang's first ones
// (or the one member of a gang of one) may take: those sharing the value
// of required with a placed member's node, or, when none has one, every
// node with the label.
func (pl *Plugin) requiredDomain(key gang.Key, required string) (sets.Set[string], error) {
	all, err := pl.handle.SnapshotSharedLister().NodeInfos().List()
	if err != nil {
		return nil, err
	}
	placed := pl.placedNodes(key)
	value, anchored := "", false
	for _, n := range all {
		if v, ok := n.Node().Labels[required]; ok && placed.Has(n.Node().Name) {
			value, anchored = v, true
			break
		}
	}
	nodes := sets.New[string]()
	for _, n := range all {
		if v, ok := n.Node().Labels[required]; ok && (!anchored || v == value) {
			nodes.Insert(n.Node().Name)
		}
	}
	return nodes, nil
}

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

// domainOfPlaced is the nodes of the required domain the gang's placed
// members are in, for the members placed after them; nil when there is
// no required key or no member placed, or the node of the first is gone.
func (pl *Plugin) domainOfPlaced(key gang.Key, required string) sets.Set[string] {
	if required == "" {
		return nil
	}
	placed := pl.manager.PlacedMembers(key)
	if len(placed) == 0 {
		return nil
	}
	lister := pl.handle.SnapshotSharedLister().NodeInfos()
	first, err := lister.Get(placed[0].Spec.NodeName)
	if err != nil {
		return nil
	}
	value, ok := first.Node().Labels[required]
	if !ok {
		return nil
	}
	all, err := lister.List()
	if err != nil {
		return nil
	}
	nodes := sets.New[string]()
	for _, n := range all {
		if v, ok := n.Node().Labels[required]; ok && v == value {
			nodes.Insert(n.Node().Name)
		}
	}
	return nodes
}

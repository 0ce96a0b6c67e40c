// Package placement places a set of pods on the scheduler's current
// snapshot as the profile would, one after another, each seeing the ones
// before it (their nodes' room, and the devices and volumes they were
// given), and keeps nothing reserved once done: the trial placement
// behind gang scheduling and gang-aware reclaim. It runs in the
// scheduling goroutine (a gang's PreFilter, reclaim's PostFilter), so no
// other scheduling cycle sees what it reserves while it runs.
package placement

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework"
)

// Placer places pods with a profile's plugins.
type Placer struct {
	Handle    fwk.Handle
	Framework framework.Framework
	// next is where the next search for feasible nodes starts, so that
	// successive searches spread over the cluster as kube-scheduler's do.
	next atomic.Uint64
}

// As kube-scheduler (schedule_one.go): a search for feasible nodes stops
// once it found this many of a large cluster.
const (
	minFeasibleNodesToFind           = 100
	minFeasibleNodesPercentageToFind = 5
)

// numFeasibleNodesToFind is kube-scheduler's rule: the profile's
// percentageOfNodesToScore, else the adaptive default. (The global
// percentageOfNodesToScore of the configuration is not visible to plugins;
// set it per profile to change what trial placements search.)
func (pl *Placer) numFeasibleNodesToFind(all int) int {
	if all < minFeasibleNodesToFind {
		return all
	}
	var percentage int
	if p := pl.Framework.PercentageOfNodesToScore(); p != nil {
		percentage = int(*p)
	}
	if percentage == 0 {
		percentage = max(50-all/125, minFeasibleNodesPercentageToFind)
	}
	return max(all*percentage/100, minFeasibleNodesToFind)
}

// PodOnNode is a pod and its node: a victim taken off it, or a member
// planned on it.
type PodOnNode struct {
	Pod  *v1.Pod
	Node string
	// Info is the pod's PodInfo, if one was made (Place makes one for each
	// member it places): reused, it keeps the pod's summed requests.
	Info fwk.PodInfo
}

// Result is where a trial placed its members, in order.
type Result []PodOnNode

// Nodes maps each member placed to its node; nil when there is none.
func (r Result) Nodes() map[types.UID]string {
	if len(r) == 0 {
		return nil
	}
	out := make(map[types.UID]string, len(r))
	for _, p := range r {
		out[p.Pod.UID] = p.Node
	}
	return out
}

// Trial is what Place places, and on what.
type Trial struct {
	// Members are placed in this order.
	Members []*v1.Pod
	// Removed are taken off their nodes first (victims of reclaim): their
	// room is freed, not their devices or volumes, as in kube-scheduler's
	// preemption. Planned are added to theirs (members a plan placed
	// before), with their devices and volumes taken again (see trial).
	Removed, Planned []PodOnNode
	// Placed (members placed before, Planned among them) and MinMember
	// only shape the message ("placeable 3/4: …").
	Placed, MinMember int32
	// Budget, when not zero, bounds the time Place spends: once it is
	// used up, Place returns the members placed so far (at least one).
	Budget time.Duration
	// Nodes, when not nil, are the only nodes members may go to (a
	// topology domain).
	Nodes sets.Set[string]
}

// Place finds a node for each member, in order, on this cycle's snapshot
// with the trial's removed pods taken off their nodes, its planned ones
// added, and the members placed before it added: the profile's own
// PreFilter, Filter and Score plugins decide, as they would for each
// member alone. Members with devices or volumes are reserved as they are
// placed, so that the next ones see them taken, and unreserved before
// Place returns (see trial). It returns where it placed the members (a
// prefix of them when the budget ran out), or a message saying why the
// members do not all fit.
func (pl *Placer) Place(ctx context.Context, t Trial) (Result, string, error) {
	start := time.Now()
	nodeInfos, err := pl.Handle.SnapshotSharedLister().NodeInfos().List()
	if err != nil {
		return nil, "", err
	}
	if t.Nodes != nil {
		within := make([]fwk.NodeInfo, 0, t.Nodes.Len())
		for _, n := range nodeInfos {
			if t.Nodes.Has(n.Node().Name) {
				within = append(within, n)
			}
		}
		nodeInfos = within
	}
	tr := &trial{pl: pl, t: t, overlay: map[string]fwk.NodeInfo{}}
	defer tr.unreserve(ctx)
	tr.removeVictims(klog.FromContext(ctx))
	if msg, err := tr.addPlanned(ctx); msg != "" || err != nil {
		return nil, msg, err
	}
	members := t.Members
	plan := make(Result, 0, len(members))

	// A member identical to the one before it (members made from one
	// template, without an index) shares its cycle state: the pods added
	// are added to it once each, not once per member that follows them.
	// A member that reserves has a state of its own.
	var (
		state  fwk.CycleState
		result *fwk.PreFilterResult
		added  int // how many of tr.added state holds
	)
	for i, member := range members {
		if t.Budget > 0 && i > 0 && time.Since(start) >= t.Budget {
			break
		}
		placed := t.Placed + int32(i)
		reserves := pl.reserves(member)
		if state == nil || reserves || !samePreFilter(members[i-1], member) {
			var rejected *fwk.Status
			if state, result, rejected, err = tr.newState(ctx, member); err != nil {
				return nil, "", err
			} else if rejected != nil {
				return nil, placeable(placed, t.MinMember, member, rejected.Message()), nil
			}
			added = 0
		}
		if err := tr.addPods(ctx, state, member, added); err != nil {
			return nil, "", err
		}
		added = len(tr.added)
		nodes := nodeInfos
		if result != nil && result.NodeNames != nil {
			nodes = nil
			for _, n := range nodeInfos {
				if result.NodeNames.Has(n.Node().Name) {
					nodes = append(nodes, n)
				}
			}
		}
		feasible, reasons := pl.feasibleNodes(ctx, state, member, nodes, tr.overlay)
		if len(feasible) == 0 {
			return nil, placeable(placed, t.MinMember, member, summarize(reasons, len(nodes))), nil
		}
		best, err := pl.bestNode(ctx, state, member, feasible)
		if err != nil {
			return nil, "", err
		}
		node := best.Node().Name
		if reserves {
			if why, err := tr.reserve(ctx, state, member, node); err != nil {
				return nil, "", err
			} else if why != "" {
				return nil, placeableAs(placed, t.MinMember, member, "cannot be reserved on node "+node+": "+why), nil
			}
		}
		info, err := framework.NewPodInfo(member)
		if err != nil {
			return nil, "", err
		}
		n, _ := tr.nodeCopy(node)
		tr.add(n, info)
		plan = append(plan, PodOnNode{Pod: member, Node: node, Info: info})
	}
	return plan, "", nil
}

// feasibleNodes runs the filters for member (with the planned members
// added), in parallel, until it found as many feasible nodes as
// kube-scheduler would look for, starting where the last search stopped;
// it counts the reasons of rejections. Only when too few nodes fit does it
// visit them all, so a member that fits anywhere is found.
func (pl *Placer) feasibleNodes(ctx context.Context, state fwk.CycleState, member *v1.Pod, nodes []fwk.NodeInfo, overlay map[string]fwk.NodeInfo) ([]fwk.NodeInfo, map[string]int) {
	if len(nodes) == 0 {
		return nil, nil
	}
	want := int32(pl.numFeasibleNodesToFind(len(nodes)))
	fits := make([]fwk.NodeInfo, want)
	var found, visited atomic.Int32
	var mu sync.Mutex
	reasons := map[string]int{}
	start := int(pl.next.Load() % uint64(len(nodes)))
	searchCtx, stop := context.WithCancel(ctx)
	defer stop()
	pl.Handle.Parallelizer().Until(searchCtx, len(nodes), func(i int) {
		n := nodes[(start+i)%len(nodes)]
		if o, ok := overlay[n.Node().Name]; ok {
			n = o
		}
		s := pl.Framework.RunFilterPluginsWithNominatedPods(searchCtx, state, member, n)
		visited.Add(1)
		if s.IsSuccess() {
			k := found.Add(1)
			if k > want {
				stop()
				found.Add(-1)
				return
			}
			fits[k-1] = n
			if k == want {
				stop()
			}
			return
		}
		mu.Lock()
		for _, r := range s.Reasons() {
			reasons[r]++
		}
		mu.Unlock()
	}, "MusterPlacement")
	pl.next.Add(uint64(visited.Load()))
	return fits[:found.Load()], reasons
}

// bestNode scores the feasible nodes with the profile's score plugins and
// returns the highest; ties go to the first node by name.
func (pl *Placer) bestNode(ctx context.Context, state fwk.CycleState, member *v1.Pod, feasible []fwk.NodeInfo) (fwk.NodeInfo, error) {
	if len(feasible) == 1 {
		return feasible[0], nil
	}
	if s := pl.Framework.RunPreScorePlugins(ctx, state, member, feasible); !s.IsSuccess() {
		return nil, s.AsError()
	}
	scores, s := pl.Framework.RunScorePlugins(ctx, state, member, feasible)
	if !s.IsSuccess() {
		return nil, s.AsError()
	}
	if err := ctx.Err(); err != nil {
		return nil, err // scoring stopped part-way: the scores name no node
	}
	best := 0
	for i := range scores {
		if scores[i].TotalScore > scores[best].TotalScore ||
			scores[i].TotalScore == scores[best].TotalScore && scores[i].Name < scores[best].Name {
			best = i
		}
	}
	for _, n := range feasible {
		if n.Node().Name == scores[best].Name {
			return n, nil
		}
	}
	return nil, fmt.Errorf("scored node %q is not among the feasible nodes", scores[best].Name)
}

// placeable says how far the gang got: "placeable 3/4: member m fits no
// node: …".
func placeable(placeable, minMember int32, member *v1.Pod, why string) string {
	return placeableAs(placeable, minMember, member, "fits no node: "+why)
}

// placeableAs says how far the gang got: "placeable 3/4: member m …".
func placeableAs(placeable, minMember int32, member *v1.Pod, what string) string {
	return fmt.Sprintf("placeable %d/%d: member %s %s", placeable, minMember, member.Name, what)
}

// summarize renders reason counts as kube-scheduler does: "3 Insufficient
// cpu, 1 node(s) had untolerated taint(s)".
func summarize(reasons map[string]int, nodes int) string {
	if nodes == 0 {
		return "no node is eligible"
	}
	parts := make([]string, 0, len(reasons))
	for r, n := range reasons {
		parts = append(parts, fmt.Sprintf("%d %s", n, r))
	}
	sort.Strings(parts)
	return strings.Join(parts, ", ")
}

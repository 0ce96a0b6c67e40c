// Package placement places a set of pods on the scheduler's current
// snapshot as the profile would, one after another, each seeing the ones
// before it, without reserving anything: the trial placement behind gang
// scheduling and gang-aware reclaim.
package placement

import (
	"context"
	"fmt"
	"maps"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	v1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework"

	"github.com/muster-sched/muster/pkg/gang"
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
	// Removed are taken off their nodes first (victims of reclaim); Planned
	// are added to theirs (members a plan placed before).
	Removed, Planned []PodOnNode
	// Placed (members placed before, Planned among them) and MinMember
	// only shape the message ("placeable 3/4: …").
	Placed, MinMember int32
	// Budget, when not zero, bounds the time Place spends: once it is
	// used up, Place returns the members placed so far (at least one).
	Budget time.Duration
}

// Place finds a node for each member, in order, on this cycle's snapshot
// with the trial's removed pods taken off their nodes, its planned ones
// added, and the members placed before it added: the profile's own
// PreFilter, Filter and Score plugins decide, as they would for each
// member alone. It returns where it placed the members (a prefix of them
// when the budget ran out), or a message saying why the members do not
// all fit.
func (pl *Placer) Place(ctx context.Context, t Trial) (Result, string, error) {
	start := time.Now()
	nodeInfos, err := pl.Handle.SnapshotSharedLister().NodeInfos().List()
	if err != nil {
		return nil, "", err
	}
	// overlay holds copies of the nodes that pods were removed from or
	// planned members added to.
	overlay := map[string]fwk.NodeInfo{}
	logger := klog.FromContext(ctx)
	copyOf := func(node string) (fwk.NodeInfo, bool) {
		if o, ok := overlay[node]; ok {
			return o, true
		}
		n, err := pl.Handle.SnapshotSharedLister().NodeInfos().Get(node)
		if err != nil {
			return nil, false
		}
		overlay[node] = n.Snapshot()
		return overlay[node], true
	}
	for _, r := range t.Removed {
		n, ok := copyOf(r.Node)
		if !ok {
			continue
		}
		if err := n.RemovePod(logger, r.Pod); err != nil {
			// Not on the node in this snapshot: the gang state and the
			// scheduler's cache may disagree for a moment. Nothing to free.
			logger.V(4).Info("Trial placement: victim not on its node", "pod", klog.KObj(r.Pod), "node", r.Node)
		}
	}
	type plannedPod struct {
		info fwk.PodInfo
		node string
	}
	var plannedPods []plannedPod
	for _, p := range t.Planned {
		n, ok := copyOf(p.Node)
		if !ok {
			continue // the node is gone: the members planned next see it gone too
		}
		info := p.Info
		if info == nil {
			var err error
			if info, err = framework.NewPodInfo(p.Pod); err != nil {
				return nil, "", err
			}
		}
		n.AddPodInfo(info)
		plannedPods = append(plannedPods, plannedPod{info: info, node: p.Node})
	}
	members := t.Members
	plan := make(Result, 0, len(members))

	// A member identical to the one before it (members made from one
	// template, without an index) shares its cycle state: the planned members are added to it once
	// each, not once per member that follows them.
	var (
		state  fwk.CycleState
		result *fwk.PreFilterResult
		added  int // how many of plannedPods state holds
	)
	for i, member := range members {
		if t.Budget > 0 && i > 0 && time.Since(start) >= t.Budget {
			break
		}
		if state == nil || !samePreFilter(members[i-1], member) {
			state = framework.NewCycleState()
			gang.MarkTrial(state)
			var status *fwk.Status
			result, status, _ = pl.Framework.RunPreFilterPlugins(ctx, state, member)
			if !status.IsSuccess() && !status.IsSkip() {
				if status.IsRejected() {
					return nil, placeable(t.Placed+int32(i), t.MinMember, member, status.Message()), nil
				}
				return nil, "", status.AsError()
			}
			for _, r := range t.Removed {
				if n, ok := overlay[r.Node]; ok {
					info, err := framework.NewPodInfo(r.Pod)
					if err != nil {
						return nil, "", err
					}
					if s := pl.Framework.RunPreFilterExtensionRemovePod(ctx, state, member, info, n); !s.IsSuccess() {
						return nil, "", s.AsError()
					}
				}
			}
			added = 0
		}
		for _, p := range plannedPods[added:] {
			if s := pl.Framework.RunPreFilterExtensionAddPod(ctx, state, member, p.info, overlay[p.node]); !s.IsSuccess() {
				return nil, "", s.AsError()
			}
		}
		added = len(plannedPods)
		nodes := nodeInfos
		if result != nil && result.NodeNames != nil {
			nodes = nil
			for _, n := range nodeInfos {
				if result.NodeNames.Has(n.Node().Name) {
					nodes = append(nodes, n)
				}
			}
		}
		feasible, reasons := pl.feasibleNodes(ctx, state, member, nodes, overlay)
		if len(feasible) == 0 {
			return nil, placeable(t.Placed+int32(i), t.MinMember, member, summarize(reasons, len(nodes))), nil
		}
		node, err := pl.bestNode(ctx, state, member, feasible)
		if err != nil {
			return nil, "", err
		}
		info, err := framework.NewPodInfo(member)
		if err != nil {
			return nil, "", err
		}
		n, _ := copyOf(node.Node().Name)
		n.AddPodInfo(info)
		plannedPods = append(plannedPods, plannedPod{info: info, node: node.Node().Name})
		plan = append(plan, PodOnNode{Pod: member, Node: node.Node().Name, Info: info})
	}
	return plan, "", nil
}

// samePreFilter reports whether b's PreFilter state equals a's: the same
// namespace, labels and spec, and no claim named after the pod (resource
// claims, whose names are in each pod's status; generic ephemeral
// volumes, whose claims take the pod's name). Members that differ in a
// label or their hostname (an indexed Job's) do not share.
func samePreFilter(a, b *v1.Pod) bool {
	return a.Namespace == b.Namespace && len(a.Spec.ResourceClaims) == 0 && !hasEphemeralVolume(a) &&
		maps.Equal(a.Labels, b.Labels) && apiequality.Semantic.DeepEqual(a.Spec, b.Spec)
}

func hasEphemeralVolume(p *v1.Pod) bool {
	for _, v := range p.Spec.Volumes {
		if v.Ephemeral != nil {
			return true
		}
	}
	return false
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

// placeable says how far the gang got: "placeable 3/4: …".
func placeable(placeable, minMember int32, member *v1.Pod, why string) string {
	return fmt.Sprintf("placeable %d/%d: member %s fits no node: %s", placeable, minMember, member.Name, why)
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

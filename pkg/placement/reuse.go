package placement

import (
	"context"
	"fmt"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/sets"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework/plugins/names"

	"github.com/muster-sched/muster/pkg/plugins/binpack"
)

// Members made from one template are placed one after another on the same
// snapshot. Placing one changes only its node, so when the verdicts and
// scores the profile gives such a pod depend on each node alone, the next
// member's scores elsewhere are what the last full search found: only the
// node just used is filtered and scored again, and the scores normalized
// anew. This is kube-scheduler's opportunistic batching (KEP 5598) within a
// trial, and it decides as a full search of the same nodes would.

// nodeLocal are the Filter and Score plugins whose result for a pod on a
// node depends on that node alone, for a pod with no pod (anti-)affinity:
// InterPodAffinity then only matches the pod against the terms of pods
// already running, which planned members do not add to. A plugin not
// listed here that is not skipped for the pod (topology spread, volumes,
// claims, any out-of-tree plugin) turns the reuse off.
var nodeLocal = sets.New(
	names.NodeResourcesFit, names.NodeResourcesBalancedAllocation, names.NodeAffinity,
	names.NodeName, names.NodePorts, names.NodeUnschedulable, names.TaintToleration,
	names.ImageLocality, names.NodeDeclaredFeatures, names.InterPodAffinity, binpack.Name,
)

// scoresFiltered are the Score plugins that score what their Filter found
// on each node (volumes to bind, devices to allocate): with their Filter
// skipped, for a pod with nothing of theirs, every node scores 0.
var scoresFiltered = sets.New(names.VolumeBinding, names.DynamicResources)

// candidates are the scored feasible nodes of the last full search, less
// the ones members were planned onto since.
type candidates struct {
	infos  []fwk.NodeInfo
	scores []fwk.NodePluginScores // parallel to infos; RawScores are kept
}

// reusable reports whether member's results may be reused for the
// identical members after it: state is its cycle state after PreFilter and
// PreScore.
func (pl *Placer) reusable(state fwk.CycleState, member *v1.Pod) bool {
	if a := member.Spec.Affinity; a != nil && (a.PodAffinity != nil || a.PodAntiAffinity != nil) {
		return false
	}
	plugins := pl.Framework.ListPlugins()
	if plugins == nil {
		return false
	}
	skipFilter, skipScore := state.GetSkipFilterPlugins(), state.GetSkipScorePlugins()
	for _, p := range plugins.Filter.Enabled {
		if !skipFilter.Has(p.Name) && !nodeLocal.Has(p.Name) {
			return false
		}
	}
	for _, p := range plugins.Score.Enabled {
		if !skipScore.Has(p.Name) && !nodeLocal.Has(p.Name) &&
			!(scoresFiltered.Has(p.Name) && skipFilter.Has(p.Name)) {
			return false
		}
	}
	return true
}

// keep makes the candidates of a full search: the scored feasible nodes
// but the chosen one.
func keep(feasible []fwk.NodeInfo, scores []fwk.NodePluginScores, chosen string) *candidates {
	c := &candidates{infos: make([]fwk.NodeInfo, 0, len(feasible)), scores: make([]fwk.NodePluginScores, 0, len(scores))}
	byName := make(map[string]fwk.NodeInfo, len(feasible))
	for _, n := range feasible {
		byName[n.Node().Name] = n
	}
	for _, s := range scores {
		if s.Name != chosen {
			c.infos = append(c.infos, byName[s.Name])
			c.scores = append(c.scores, s)
		}
	}
	return c
}

// reuse places member, identical to the member planned onto last (its node
// with that member added), among the candidates and last: last is filtered
// and scored again, every node's scores normalized anew, and the best node
// taken out of the candidates. It returns nil when no candidate is left.
func (pl *Placer) reuse(ctx context.Context, state fwk.CycleState, member *v1.Pod, c *candidates, last fwk.NodeInfo) (fwk.NodeInfo, error) {
	s := pl.Framework.RunFilterPluginsWithNominatedPods(ctx, state, member, last)
	lastFits := s.IsSuccess()
	if !lastFits && !s.IsRejected() {
		return nil, s.AsError()
	}
	infos := c.infos
	if lastFits {
		infos = append(infos, last)
	}
	if len(infos) == 0 {
		return nil, nil
	}
	if s := pl.Framework.RunPreScorePlugins(ctx, state, member, infos); !s.IsSuccess() {
		return nil, s.AsError()
	}
	scores := c.scores
	if lastFits {
		raw, s := pl.Framework.RunRawScorePlugins(ctx, state, member, last)
		if !s.IsSuccess() {
			return nil, s.AsError()
		}
		scores = append(scores, fwk.NodePluginScores{Name: last.Node().Name, RawScores: raw})
	}
	if s := pl.Framework.NormalizeScores(ctx, state, member, scores); !s.IsSuccess() {
		return nil, s.AsError()
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	best := highest(scores)
	node := infos[best]
	if node.Node().Name != scores[best].Name {
		return nil, fmt.Errorf("candidate %q is out of step with its scores (%q)", node.Node().Name, scores[best].Name)
	}
	end := len(infos) - 1
	infos[best], scores[best] = infos[end], scores[end]
	c.infos, c.scores = infos[:end], scores[:end]
	return node, nil
}

// highest is the index of the highest total score; ties go to the first
// node by name, as in bestNode.
func highest(scores []fwk.NodePluginScores) int {
	best := 0
	for i := range scores {
		if scores[i].TotalScore > scores[best].TotalScore ||
			scores[i].TotalScore == scores[best].TotalScore && scores[i].Name < scores[best].Name {
			best = i
		}
	}
	return best
}

package gangscheduling

import (
	"context"
	"fmt"
	"maps"
	"slices"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"

	"github.com/muster-sched/muster/pkg/gang"
	"github.com/muster-sched/muster/pkg/metrics"
	"github.com/muster-sched/muster/pkg/placement"
)

// PreFilter decides a gang's placement as a whole. The first member of a
// gang that is not ready plans every member still needed, on this cycle's
// snapshot, or as much of them as one plan step allows (the members tried
// next go on with it); if the gang cannot be placed whole, the member is
// rejected and nothing is reserved. Once the plan is whole, members are
// filtered on their planned node only.
func (pl *Plugin) PreFilter(ctx context.Context, state fwk.CycleState, pod *v1.Pod, _ []fwk.NodeInfo) (*fwk.PreFilterResult, *fwk.Status) {
	key, ok := pl.keyOf(pod)
	now := pl.now()
	// Every pod, and every trial placement of a member, is kept off the
	// room other gangs' plans promise (see Filter).
	rest := pl.readPromises(state, pod, key, now)
	if !ok || gang.IsTrial(state) {
		return nil, rest
	}
	logger := klog.FromContext(ctx)
	s := pl.manager.Status(key)
	if s.Invalid != "" {
		return nil, fwk.NewStatus(fwk.UnschedulableAndUnresolvable, gangMessage(key, s.Invalid))
	}
	keys, required := pl.batch.Topology(pl.framework.ProfileName(), &s)
	if s.Ready() || s.Spec.MinMember == 1 && len(s.Spec.MinTaskMember) == 0 {
		// An elastic member, or a gang of one: placed like any pod, within
		// the required domain of the members placed.
		if required == "" {
			return nil, rest
		}
		nodes, err := pl.requiredDomain(key, required)
		if err != nil {
			return nil, fwk.AsStatus(err)
		}
		if len(nodes) == 0 {
			return nil, fwk.NewStatus(fwk.UnschedulableAndUnresolvable, gangMessage(key, "no node has label "+required))
		}
		return &fwk.PreFilterResult{NodeNames: nodes}, nil
	}
	if node, planned, hasPlan := pl.manager.PlannedNode(key, pod.UID, now); planned {
		return &fwk.PreFilterResult{NodeNames: sets.New(node)}, nil
	} else if hasPlan {
		return nil, waitForPlan(state, key, "waiting for the members planned before this one")
	}
	// Every member plans afresh on its own cycle's snapshot: a sibling
	// rejected on an earlier failure could wait on stale grounds, with no
	// event left to retry it. A plan that takes longer than the plan step
	// is made over several members' cycles, so that pods in no gang are
	// scheduled in between; the room planned so far is promised meanwhile.
	nodes, infos, todo, unfinished := pl.manager.UnfinishedPlan(key, now)
	if len(keys) > 0 {
		// A topology gang is planned in one cycle; a plan made over several
		// before the constraint applied knows no domain.
		nodes, infos, unfinished = nil, nil, false
	}
	var planned []placement.PodOnNode
	if unfinished {
		planned = make([]placement.PodOnNode, 0, len(infos))
		for _, info := range infos {
			p := info.GetPod()
			planned = append(planned, placement.PodOnNode{Pod: p, Node: nodes[p.UID], Info: info})
		}
	} else {
		// An expired plan promises nothing, but its promises are still
		// recorded: drop it before planning afresh.
		pl.manager.DropPlan(key)
		todo = gang.PickMembers(pod, pl.manager.PendingMembers(key), &s)
	}
	trial := placement.Trial{
		Members: todo, Planned: planned,
		Placed: s.Placed + int32(len(planned)), MinMember: s.Spec.MinMember,
		Budget: pl.planStep,
	}
	var (
		placed placement.Result
		msg    string
		err    error
	)
	if len(keys) > 0 {
		// The domain is chosen for the whole gang: a plan made over
		// several cycles could not move to another domain.
		trial.Budget = 0
		placed, msg, err = pl.placer.PlaceInDomains(ctx, trial, keys, required, pl.placedNodes(key))
	} else {
		placed, msg, err = pl.placer.Place(ctx, trial)
	}
	if err != nil {
		return nil, fwk.AsStatus(err)
	}
	if msg != "" {
		logger.V(3).Info("Gang cannot be placed whole", "gang", key, "reason", msg)
		pl.manager.RecordFailure(key, msg, now)
		metrics.PlacementAttempts.WithLabelValues(metrics.Unschedulable).Inc()
		return nil, fwk.NewStatus(fwk.UnschedulableAndUnresolvable, gangMessage(key, msg))
	}
	plan := make(map[types.UID]string, len(nodes)+len(placed))
	maps.Copy(plan, nodes)
	infos = slices.Clip(infos)
	for _, p := range placed {
		plan[p.Pod.UID] = p.Node
		infos = append(infos, p.Info)
	}
	todo = todo[len(placed):]
	pl.manager.SetPlan(key, plan, infos, todo, now) // activates the pending members
	if len(todo) > 0 {
		logger.V(4).Info("Gang placement under way", "gang", key, "planned", len(plan), "todo", len(todo))
		return nil, waitForPlan(state, key, fmt.Sprintf("waiting while the gang's plan is made (%d of %d members planned)", len(plan), len(plan)+len(todo)))
	}
	logger.V(4).Info("Gang placement planned", "gang", key, "members", len(plan))
	metrics.PlacementAttempts.WithLabelValues(metrics.Placed).Inc()
	if node, ok := plan[pod.UID]; ok {
		return &fwk.PreFilterResult{NodeNames: sets.New(node)}, nil
	}
	return nil, waitForPlan(state, key, "waiting for the members planned before this one")
}

// waitForPlanKey marks a cycle in which the pod only waits for its gang's
// planned members: nothing failed, so PostFilter must not undo the plan.
const waitForPlanKey fwk.StateKey = Name + "/wait-for-plan"

type waitMarker struct{}

func (waitMarker) Clone() fwk.StateData { return waitMarker{} }

// waitForPlan rejects a member while its gang's plan is being made, or
// when the plan does not place it (an extra member of a gang being
// placed). SetPlan activates the pending members after each step; an
// extra is retried once the gang is ready (Reserve).
func waitForPlan(state fwk.CycleState, key gang.Key, why string) *fwk.Status {
	state.Write(waitForPlanKey, waitMarker{})
	return fwk.NewStatus(fwk.UnschedulableAndUnresolvable, gangMessage(key, why))
}

// PreFilterExtensions is nil: what Filter reads is fixed for the cycle.
func (pl *Plugin) PreFilterExtensions() fwk.PreFilterExtensions { return nil }

// PostFilter runs when a member could not be placed: its waiting siblings
// are released at once and the plan is dropped, so the gang holds nothing
// and is planned afresh when the cluster changes. Stock preemption is not
// attempted for a member alone; pods in no gang are left to it.
func (pl *Plugin) PostFilter(ctx context.Context, state fwk.CycleState, pod *v1.Pod, _ fwk.NodeToStatusReader) (*fwk.PostFilterResult, *fwk.Status) {
	key, ok := pl.keyOf(pod)
	if !ok {
		return nil, fwk.NewStatus(fwk.Unschedulable)
	}
	if _, err := state.Read(waitForPlanKey); err == nil {
		return nil, fwk.NewStatus(fwk.UnschedulableAndUnresolvable)
	}
	pl.manager.DropPlan(key)
	if released := pl.releaseWaiting(ctx, key, fmt.Sprintf("member %s could not be placed", pod.Name)); released > 0 {
		return nil, fwk.NewStatus(fwk.UnschedulableAndUnresolvable, gangMessage(key, fmt.Sprintf("released %d waiting members", released)))
	}
	return nil, fwk.NewStatus(fwk.UnschedulableAndUnresolvable)
}

func gangMessage(key gang.Key, msg string) string {
	return fmt.Sprintf("gang %s/%s: %s", key.Namespace, key.Name, msg)
}

package gang

import (
	"context"
	"fmt"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework"

	"github.com/muster-sched/muster/pkg/gang"
)

// PreFilter decides a gang's placement as a whole. The first member of a
// gang that is not ready gets a plan for every member still needed, made on
// this cycle's snapshot; if the gang cannot be placed whole, the member is
// rejected and nothing is reserved. Members with a plan are filtered on
// their planned node only.
func (pl *Gang) PreFilter(ctx context.Context, state fwk.CycleState, pod *v1.Pod, _ []fwk.NodeInfo) (*framework.PreFilterResult, *fwk.Status) {
	if gang.IsTrial(state) {
		return nil, fwk.NewStatus(fwk.Skip)
	}
	key, ok := keyOf(pod)
	if !ok {
		return nil, fwk.NewStatus(fwk.Skip)
	}
	logger := klog.FromContext(ctx)
	s := pl.manager.Status(key)
	if s.Invalid != "" {
		return nil, fwk.NewStatus(fwk.UnschedulableAndUnresolvable, gangMessage(key, s.Invalid))
	}
	if s.Ready() || s.Spec.MinMember == 1 && len(s.Spec.MinTaskMember) == 0 {
		// An elastic member, or a gang of one: placed like any pod.
		return nil, fwk.NewStatus(fwk.Skip)
	}
	now := pl.now()
	if node, planned, hasPlan := pl.manager.PlannedNode(key, pod.UID, now); planned {
		return &framework.PreFilterResult{NodeNames: sets.New(node)}, nil
	} else if hasPlan {
		return nil, fwk.NewStatus(fwk.Unschedulable, gangMessage(key, "waiting for the members planned before this one"))
	}
	if msg, failed := pl.manager.FailedThisEpoch(key); failed {
		return nil, fwk.NewStatus(fwk.UnschedulableAndUnresolvable, gangMessage(key, msg))
	}

	members := pickMembers(pod, pl.manager.PendingMembers(key), &s)
	plan, msg, err := pl.place(ctx, members, s.Placed, s.Spec.MinMember)
	if err != nil {
		return nil, fwk.AsStatus(err)
	}
	if msg != "" {
		logger.V(3).Info("Gang cannot be placed whole", "gang", key, "reason", msg)
		pl.manager.RecordFailure(key, msg, now)
		return nil, fwk.NewStatus(fwk.UnschedulableAndUnresolvable, gangMessage(key, msg))
	}
	logger.V(4).Info("Gang placement planned", "gang", key, "members", len(plan))
	pl.manager.SetPlan(key, plan, now)
	activateSiblings(state, pod, members)
	if node, ok := plan[pod.UID]; ok {
		return &framework.PreFilterResult{NodeNames: sets.New(node)}, nil
	}
	return nil, fwk.NewStatus(fwk.Unschedulable, gangMessage(key, "waiting for the members planned before this one"))
}

// PreFilterExtensions is nil: Gang keeps no per-node state in the cycle.
func (pl *Gang) PreFilterExtensions() framework.PreFilterExtensions { return nil }

// PostFilter runs when a member could not be placed: its waiting siblings
// are released at once and the plan is dropped, so the gang holds nothing
// and is planned afresh when the cluster changes. Stock preemption is not
// attempted for a member alone; pods in no gang are left to it.
func (pl *Gang) PostFilter(ctx context.Context, _ fwk.CycleState, pod *v1.Pod, _ framework.NodeToStatusReader) (*framework.PostFilterResult, *fwk.Status) {
	key, ok := keyOf(pod)
	if !ok {
		return nil, fwk.NewStatus(fwk.Unschedulable)
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

// pickMembers chooses which pending members the plan places: pod first if
// it is needed, enough of each role to meet its minimum, then any member up
// to minMember.
func pickMembers(pod *v1.Pod, pending []*v1.Pod, s *gang.Status) []*v1.Pod {
	need := s.Spec.MinMember - s.Placed
	roleNeed := map[string]int32{}
	for role, min := range s.Spec.MinTaskMember {
		if n := min - s.PlacedByRole[role]; n > 0 {
			roleNeed[role] = n
		}
	}
	candidates := make([]*v1.Pod, 0, len(pending))
	candidates = append(candidates, pod)
	for _, p := range pending {
		if p.UID != pod.UID {
			candidates = append(candidates, p)
		}
	}
	picked := sets.New[int]()
	var out []*v1.Pod
	take := func(i int) {
		picked.Insert(i)
		out = append(out, candidates[i])
		need--
		if r := gang.RoleOf(candidates[i]); roleNeed[r] > 0 {
			roleNeed[r]--
		}
	}
	for i, p := range candidates { // roles short of their minimum first
		if need > 0 && roleNeed[gang.RoleOf(p)] > 0 {
			take(i)
		}
	}
	var roleShort int32
	for _, n := range roleNeed {
		roleShort += n
	}
	for i := range candidates { // then anyone, leaving room for short roles
		if need-roleShort <= 0 {
			break
		}
		if !picked.Has(i) {
			take(i)
		}
	}
	return out
}

// activateSiblings moves the planned siblings to the active queue, so that
// members parked after an earlier rejection follow the plan now.
func activateSiblings(state fwk.CycleState, pod *v1.Pod, members []*v1.Pod) {
	c, err := state.Read(framework.PodsToActivateKey)
	if err != nil {
		return
	}
	s, ok := c.(*framework.PodsToActivate)
	if !ok {
		return
	}
	s.Lock()
	defer s.Unlock()
	for _, p := range members {
		if p.UID != pod.UID {
			s.Map[p.Namespace+"/"+p.Name] = p
		}
	}
}

package gang

import v1 "k8s.io/api/core/v1"

// PickMembers chooses which pending members the plan places: pod first if
// it is needed, enough of each role to meet its minimum, then any member up
// to minMember.
func PickMembers(pod *v1.Pod, pending []*v1.Pod, s *Status) []*v1.Pod {
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
	picked := map[int]bool{}
	var out []*v1.Pod
	take := func(i int) {
		picked[i] = true
		out = append(out, candidates[i])
		need--
		if r := RoleOf(candidates[i]); roleNeed[r] > 0 {
			roleNeed[r]--
		}
	}
	for i, p := range candidates { // roles short of their minimum first
		if need > 0 && roleNeed[RoleOf(p)] > 0 {
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
		if !picked[i] {
			take(i)
		}
	}
	return out
}

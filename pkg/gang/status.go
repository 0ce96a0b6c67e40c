package gang

import (
	"fmt"
	"maps"
	"slices"
	"sort"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	corev1helpers "k8s.io/component-helpers/scheduling/corev1"
)

// Status is a consistent view of one gang: its spec and where its members
// are. Counting members: placed = bound, or reserved by this scheduler and
// not yet seen bound; scheduled = bound (running and finished included).
// The Manager caches it: its maps and resource lists are shared, read only.
type Status struct {
	Key  Key
	Spec Spec
	// Invalid says why the gang cannot be scheduled as specified (bad or
	// conflicting labels, a missing PodGroup, too few members); empty when
	// it can.
	Invalid string
	// Members counts every member pod; Live those neither failed nor being
	// deleted.
	Members, Live                 int32
	Scheduled, Running, Succeeded int32
	Failed, Placed                int32
	// LiveByRole and PlacedByRole count by role, for the roles of
	// MinTaskMember only (nil without).
	LiveByRole, PlacedByRole map[string]int32
	// Waiting says why the gang's pending members last failed to place.
	Waiting string
	// Tried says that the scheduler attempted to place the gang: it has a
	// plan, or its last attempt failed.
	Tried bool

	// MinResources is what the gang needs to start: the spec's, else the
	// summed requests of minMember members (each role its minimum).
	MinResources v1.ResourceList
	// Allocated sums the requests of members placed and not finished;
	// Bound those of members bound and not finished; Pending those of
	// members neither placed nor finished. nil when there are none.
	Allocated, Bound, Pending v1.ResourceList
	// Priority is the highest priority among the live members.
	Priority int32
}

// Started reports whether at least minMember members are bound.
func (s *Status) Started() bool { return s.Scheduled >= s.Spec.MinMember }

// Ready reports whether enough members are placed that none need wait: at
// least minMember, and each role its minimum.
func (s *Status) Ready() bool {
	return s.Invalid == "" && s.reached(s.Placed, s.PlacedByRole)
}

// reached reports whether count and byRole meet the gang's minimum count
// and each role's minimum.
func (s *Status) reached(count int32, byRole map[string]int32) bool {
	if count < s.Spec.MinMember {
		return false
	}
	for role, min := range s.Spec.MinTaskMember {
		if byRole[role] < min {
			return false
		}
	}
	return true
}

func sortedRoles(m map[string]int32) []string {
	roles := make([]string, 0, len(m))
	for r := range m {
		roles = append(roles, r)
	}
	sort.Strings(roles)
	return roles
}

// computeStatus counts the members of a gang whose spec resolved (or failed
// to, with specErr); requests holds each member's resource requests.
func computeStatus(key Key, spec Spec, specErr error, members map[types.UID]*v1.Pod, reserved map[types.UID]string, requests map[types.UID]v1.ResourceList) Status {
	s := Status{Key: key, Spec: spec}
	byRole := len(spec.MinTaskMember) > 0
	if byRole {
		s.LiveByRole, s.PlacedByRole = map[string]int32{}, map[string]int32{}
	}
	var allocated, bound, pending resourceSum
	for uid, p := range members {
		finished := p.Status.Phase == v1.PodSucceeded || p.Status.Phase == v1.PodFailed
		_, isReserved := reserved[uid]
		switch {
		case finished || p.DeletionTimestamp != nil:
		case p.Spec.NodeName != "":
			bound.add(requests[uid])
			allocated.add(requests[uid])
		case isReserved:
			allocated.add(requests[uid])
		default:
			pending.add(requests[uid])
		}
		s.Members++
		role := ""
		if byRole {
			role = RoleOf(p)
		}
		switch p.Status.Phase {
		case v1.PodFailed:
			s.Failed++
		case v1.PodSucceeded:
			s.Succeeded++
		case v1.PodRunning:
			s.Running++
		}
		live := p.Status.Phase != v1.PodFailed && p.DeletionTimestamp == nil
		if live {
			if prio := corev1helpers.PodPriority(p); s.Live == 0 || prio > s.Priority {
				s.Priority = prio
			}
			s.Live++
			if byRole {
				s.LiveByRole[role]++
			}
		}
		bound := p.Spec.NodeName != ""
		if bound {
			s.Scheduled++
		}
		if _, ok := reserved[uid]; (bound || ok) && live {
			s.Placed++
			if byRole {
				s.PlacedByRole[role]++
			}
		}
	}
	s.Allocated, s.Bound, s.Pending = allocated.list, bound.list, pending.list
	s.MinResources = spec.MinResources
	if len(s.MinResources) == 0 && specErr == nil {
		s.MinResources = deriveMinResources(members, spec, requests)
	}
	switch {
	case specErr != nil:
		s.Invalid = specErr.Error()
	case s.Live < s.Spec.MinMember:
		s.Invalid = fmt.Sprintf("%d members exist, minMember %d", s.Live, s.Spec.MinMember)
	default:
		for _, role := range sortedRoles(s.Spec.MinTaskMember) {
			if min := s.Spec.MinTaskMember[role]; s.LiveByRole[role] < min {
				s.Invalid = fmt.Sprintf("role %s: %d members exist, minTaskMember %d", role, s.LiveByRole[role], min)
				break
			}
		}
	}
	return s
}

// deriveMinResources sums the requests of the members a gang needs to
// start: each role's minimum, then the oldest others up to minMember.
func deriveMinResources(members map[types.UID]*v1.Pod, spec Spec, requests map[types.UID]v1.ResourceList) v1.ResourceList {
	live := make([]*v1.Pod, 0, len(members))
	for _, p := range members {
		if p.Status.Phase != v1.PodFailed && p.DeletionTimestamp == nil {
			live = append(live, p)
		}
	}
	slices.SortFunc(live, compareMembers)
	var out resourceSum
	need := spec.MinMember
	var taken map[types.UID]bool
	if len(spec.MinTaskMember) > 0 {
		roleNeed := maps.Clone(spec.MinTaskMember)
		taken = map[types.UID]bool{}
		for _, p := range live {
			if r := RoleOf(p); need > 0 && roleNeed[r] > 0 {
				roleNeed[r]--
				need--
				taken[p.UID] = true
				out.add(requests[p.UID])
			}
		}
	}
	for _, p := range live {
		if need <= 0 {
			break
		}
		if !taken[p.UID] {
			need--
			out.add(requests[p.UID])
		}
	}
	return out.list
}

// resourceSum sums resource lists. A sum of one list is that list, not a
// copy: like the rest of a Status, it is read only, and most gangs are a
// pod of their own. nil when nothing was added.
type resourceSum struct {
	list  v1.ResourceList
	owned bool
}

func (s *resourceSum) add(add v1.ResourceList) {
	switch {
	case len(add) == 0:
		return
	case s.list == nil:
		s.list = add
		return
	case !s.owned:
		s.list, s.owned = s.list.DeepCopy(), true
	}
	for name, q := range add {
		cur := s.list[name]
		cur.Add(q)
		s.list[name] = cur
	}
}

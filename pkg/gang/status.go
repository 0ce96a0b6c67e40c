package gang

import (
	"fmt"
	"sort"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
)

// Status is a consistent view of one gang: its spec and where its members
// are. Counting members: placed = bound, or reserved by this scheduler and
// not yet seen bound; scheduled = bound (running and finished included).
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
	LiveByRole, PlacedByRole      map[string]int32
	// Waiting says why the gang's pending members last failed to place.
	Waiting string
}

// Ready reports whether enough members are placed that none need wait: at
// least minMember, and each role its minimum.
func (s *Status) Ready() bool {
	return s.Invalid == "" && s.shortfall(s.Placed, s.PlacedByRole) == ""
}

// shortfall says which minimum count and byRole miss, or "".
func (s *Status) shortfall(count int32, byRole map[string]int32) string {
	if count < s.Spec.MinMember {
		return fmt.Sprintf("%d/%d", count, s.Spec.MinMember)
	}
	for _, role := range sortedRoles(s.Spec.MinTaskMember) {
		if min := s.Spec.MinTaskMember[role]; byRole[role] < min {
			return fmt.Sprintf("role %s %d/%d", role, byRole[role], min)
		}
	}
	return ""
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
// to, with specErr).
func computeStatus(key Key, spec Spec, specErr error, members map[types.UID]*v1.Pod, reserved map[types.UID]string) Status {
	s := Status{Key: key, Spec: spec, LiveByRole: map[string]int32{}, PlacedByRole: map[string]int32{}}
	for uid, p := range members {
		s.Members++
		role := RoleOf(p)
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
			s.Live++
			s.LiveByRole[role]++
		}
		bound := p.Spec.NodeName != ""
		if bound {
			s.Scheduled++
		}
		if _, ok := reserved[uid]; (bound || ok) && live {
			s.Placed++
			s.PlacedByRole[role]++
		}
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

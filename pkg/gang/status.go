package gang

import (
	"fmt"
	"maps"
	"slices"
	"sort"
	"time"

	v1 "k8s.io/api/core/v1"
	schedulingv1beta1 "k8s.io/api/scheduling/v1beta1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/cache"
	corev1helpers "k8s.io/component-helpers/scheduling/corev1"
	spv1alpha1 "sigs.k8s.io/scheduler-plugins/apis/scheduling/v1alpha1"

	"github.com/muster-sched/muster/apis/scheduling/v1alpha1"
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

// Status returns the gang's current status.
func (m *Manager) Status(key Key) Status {
	m.mu.RLock()
	defer m.mu.RUnlock()
	return m.statusLocked(key)
}

// statusLocked returns the gang's status, from the cache when it is fresh.
// Its maps and lists are shared by every caller: read only. m.mu held, for
// reading at least.
func (m *Manager) statusLocked(key Key) Status { return *m.statusRefLocked(key, m.groups[key]) }

// statusRefLocked is statusLocked of the gang key, whose group is g (nil:
// not known), without the copy: the cached status itself, read only. m.mu
// held, for reading at least.
func (m *Manager) statusRefLocked(key Key, g *group) *Status {
	if g == nil {
		s := m.computeStatusLocked(key, &group{})
		return &s
	}
	if s := g.status.Load(); s != nil {
		return s
	}
	s := m.computeStatusLocked(key, g)
	g.status.Store(&s)
	return &s
}

func (m *Manager) computeStatusLocked(key Key, g *group) Status {
	var live []*v1.Pod
	for _, p := range g.members {
		if p.Status.Phase != v1.PodFailed && p.DeletionTimestamp == nil {
			live = append(live, p)
		}
	}
	src := m.sourceObjects(key)
	spec, err := resolveSpec(key, live, src)
	s := computeStatus(key, spec, err, g.members, g.reserved, g.requests)
	if err == nil && s.Live < s.Spec.MinMember {
		g.short.Store(s.Spec.MinMember)
	} else {
		g.short.Store(0)
	}
	s.Waiting = g.failure.message
	s.Tried = g.failure.message != "" || g.plan != nil
	if s.Waiting == "" {
		s.Waiting = g.note
	}
	return s
}

// invalidLocked is the gang's status's Invalid, without computing the
// whole status while the gang is short of members (see group.short). m.mu
// held, for reading at least.
func (m *Manager) invalidLocked(key Key) string {
	if g := m.groups[key]; g != nil && g.status.Load() == nil {
		if need := g.short.Load(); need > 0 && g.live < need {
			return fmt.Sprintf("%d members exist, minMember %d", g.live, need)
		}
	}
	return m.statusRefLocked(key, m.groups[key]).Invalid
}

// sourceObjects returns the PodGroup object that may define the gang.
func (m *Manager) sourceObjects(key Key) sources {
	src := sources{spInstalled: m.spLister != nil}
	switch key.Family {
	case FamilyMuster:
		src.muster = lookup[*v1alpha1.PodGroup](m.pgStore, key)
	case FamilySchedulerPlugins:
		src.schedulerPlugins = lookup[*spv1alpha1.PodGroup](m.spStore, key)
	case FamilyUpstream:
		src.upstream = lookup[*schedulingv1beta1.PodGroup](m.upStore, key)
	}
	return src
}

// lookup returns the object of the gang's name in store (nil: none, or
// no store).
func lookup[T *v1alpha1.PodGroup | *spv1alpha1.PodGroup | *schedulingv1beta1.PodGroup](store cache.Store, key Key) T {
	if store == nil {
		return nil
	}
	obj, exists, _ := store.GetByKey(key.Namespace + "/" + key.Name)
	if !exists {
		return nil
	}
	t, _ := obj.(T)
	return t
}

// Statuses returns the status of every gang, each consistent on its own.
// The lock is taken gang by gang: computing every status at once would
// hold up the scheduling cycle's Reserve, which writes, for as long.
func (m *Manager) Statuses() []Status {
	keys := m.Keys()
	out := make([]Status, 0, len(keys))
	for _, k := range keys {
		out = append(out, m.Status(k))
	}
	return out
}

// CreationTime orders gangs in the scheduling queue: the PodGroup's creation
// time, else the earliest member's.
func (m *Manager) CreationTime(key Key) time.Time {
	m.mu.RLock()
	defer m.mu.RUnlock()
	return m.creationTimeLocked(key, m.groups[key])
}

// creationTimeLocked is CreationTime of the gang key, whose group is g
// (nil: not known), from g's cache when it is fresh. m.mu held, for
// reading at least.
func (m *Manager) creationTimeLocked(key Key, g *group) time.Time {
	if g == nil {
		return creationTime(m.podGroup(key), nil)
	}
	if t := g.createdAt.Load(); t != nil {
		return *t
	}
	t := creationTime(m.podGroup(key), g)
	g.createdAt.Store(&t)
	return t
}

// creationTime is the PodGroup's creation time, else the earliest
// member's (zero for a gang not known yet).
func creationTime(pg *v1alpha1.PodGroup, g *group) time.Time {
	switch {
	case pg != nil:
		return pg.CreationTimestamp.Time
	case g != nil:
		return g.created
	}
	return time.Time{}
}

// podGroup is the Muster PodGroup of a gang of that family, if it exists.
func (m *Manager) podGroup(key Key) *v1alpha1.PodGroup {
	if key.Family != FamilyMuster {
		return nil
	}
	return lookup[*v1alpha1.PodGroup](m.pgStore, key)
}

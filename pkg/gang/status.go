package gang

import (
	"fmt"
	"maps"
	"slices"
	"sort"
	"time"

	v1 "k8s.io/api/core/v1"
	schedulingv1 "k8s.io/api/scheduling/v1"
	schedulingv1beta1 "k8s.io/api/scheduling/v1beta1"
	"k8s.io/apimachinery/pkg/types"
	quotav1 "k8s.io/apiserver/pkg/quota/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/ptr"
	spv1alpha1 "sigs.k8s.io/scheduler-plugins/apis/scheduling/v1alpha1"
	vcv1beta1 "volcano.sh/apis/pkg/apis/scheduling/v1beta1"

	"github.com/muster-sched/muster/apis/scheduling/v1alpha1"
)

// Status is a consistent view of one gang: its spec and where its members
// are. Counting members: placed = bound, or reserved by this scheduler and
// not yet seen bound; scheduled = bound (running and finished included).
// Its resource lists are shared with the gang state: read only.
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
	// Priority is the gang's: its PodGroup's priority class, else the
	// highest priority among the live members.
	Priority int32
	// Enqueued says that the gang's PodGroup is Volcano's and Inqueue: it
	// was enqueued, often before any member existed, and its queue holds
	// its minResources for the members to come (see queue.Reserved).
	Enqueued bool
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

// shape is what a gang's members' labels and its PodGroup say: its spec,
// or why it has none, and what it needs to start. It moves only when
// members come or go, turn live or not, or change labels or requests, or
// the PodGroup changes; not when members are reserved, bound or run.
type shape struct {
	spec         Spec
	err          error
	minResources v1.ResourceList
}

// shapeOf resolves the shape of the gang key whose live members are live.
func shapeOf(key Key, live []*v1.Pod, src sources, requests map[types.UID]v1.ResourceList) *shape {
	spec, err := resolveSpec(key, live, src)
	sh := &shape{spec: spec, err: err, minResources: spec.MinResources}
	if len(sh.minResources) == 0 && err == nil {
		sh.minResources = deriveMinResources(live, spec, requests)
	}
	return sh
}

// shapeMoved reports whether a member's update from old to pod (requests
// oldReq to req) can move its gang's shape.
func shapeMoved(old, pod *v1.Pod, oldReq, req v1.ResourceList) bool {
	return isLive(old) != isLive(pod) ||
		!maps.Equal(old.Labels, pod.Labels) ||
		RoleOf(old) != RoleOf(pod) ||
		old.Annotations[v1alpha1.AnnotationTopologyRequired] != pod.Annotations[v1alpha1.AnnotationTopologyRequired] ||
		old.Annotations[v1alpha1.AnnotationTopologyPreferred] != pod.Annotations[v1alpha1.AnnotationTopologyPreferred] ||
		!quotav1.Equals(oldReq, req)
}

// invalid says why a gang of that shape and tally cannot be scheduled as
// specified; "" when it can.
func invalid(sh *shape, t *tally) string {
	switch {
	case sh.err != nil:
		return sh.err.Error()
	case t.live < sh.spec.MinMember:
		return fmt.Sprintf("%d members exist, minMember %d", t.live, sh.spec.MinMember)
	}
	for _, role := range sortedRoles(sh.spec.MinTaskMember) {
		if min, n := sh.spec.MinTaskMember[role], t.liveByRole[role]; n < min {
			return fmt.Sprintf("role %s: %d members exist, minTaskMember %d", role, n, min)
		}
	}
	return ""
}

// deriveMinResources sums the requests of the members a gang needs to
// start: each role's minimum, then the oldest others up to minMember.
func deriveMinResources(live []*v1.Pod, spec Spec, requests map[types.UID]v1.ResourceList) v1.ResourceList {
	live = slices.Clone(live)
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
	return m.statusLocked(key, m.groups[key])
}

// StatusAndPending is Status and PendingMembers read at once: every
// pending member is one the status counted.
func (m *Manager) StatusAndPending(key Key) (Status, []*v1.Pod) {
	m.mu.RLock()
	defer m.mu.RUnlock()
	g := m.groups[key]
	s := m.statusLocked(key, g)
	if g == nil {
		return s, nil
	}
	return s, g.pendingLocked()
}

// statusLocked is the status of the gang key, whose group is g (nil: not
// known). m.mu held, for reading at least.
func (m *Manager) statusLocked(key Key, g *group) Status {
	if g == nil {
		g = &group{}
	}
	sh, t := m.shapeLocked(key, g), &g.tally
	s := Status{
		Key: key, Spec: sh.spec, Invalid: invalid(sh, t),
		Members: t.members, Live: t.live, Scheduled: t.scheduled, Running: t.running,
		Succeeded: t.succeeded, Failed: t.failed, Placed: t.placed,
		MinResources: sh.minResources, Allocated: t.allocated, Bound: t.bound, Pending: t.pending,
		Priority: t.priority(),
		Waiting:  g.failure.message, Tried: g.failure.message != "" || g.plan != nil,
	}
	if sh.spec.Priority != nil {
		s.Priority = *sh.spec.Priority
	}
	if len(sh.spec.MinTaskMember) > 0 {
		s.LiveByRole, s.PlacedByRole = cloneCounts(t.liveByRole), cloneCounts(t.placedByRole)
	}
	if s.Waiting == "" {
		s.Waiting = g.note
	}
	if key.Family == FamilyVolcano {
		if pg := lookup[*vcv1beta1.PodGroup](m.vcStore, key); pg != nil {
			s.Enqueued = pg.Status.Phase == vcv1beta1.PodGroupInqueue
		}
	}
	return s
}

func cloneCounts(m map[string]int32) map[string]int32 {
	out := make(map[string]int32, len(m))
	maps.Copy(out, m)
	return out
}

// shapeLocked is the gang's shape, resolved again only after it may have
// moved (see shape). m.mu held, for reading at least: readers may race to
// resolve it, and any of their results will do.
func (m *Manager) shapeLocked(key Key, g *group) *shape {
	if sh := g.shape.Load(); sh != nil {
		return sh
	}
	live := make([]*v1.Pod, 0, len(g.members))
	for _, p := range g.members {
		if isLive(p) {
			live = append(live, p)
		}
	}
	sh := shapeOf(key, live, m.sourceObjects(key), g.requests)
	if sh.err == nil && g.tally.live < sh.spec.MinMember {
		g.short.Store(sh.spec.MinMember)
	} else {
		g.short.Store(0)
	}
	if g.members != nil {
		g.shape.Store(sh)
	}
	return sh
}

// invalidLocked is the gang's status's Invalid, without resolving its
// shape while the gang is short of members (see group.short). m.mu held,
// for reading at least.
func (m *Manager) invalidLocked(key Key) string {
	g := m.groups[key]
	if g == nil {
		g = &group{}
	} else if g.shape.Load() == nil {
		if need := g.short.Load(); need > 0 && g.tally.live < need {
			return fmt.Sprintf("%d members exist, minMember %d", g.tally.live, need)
		}
	}
	return invalid(m.shapeLocked(key, g), &g.tally)
}

// sourceObjects returns the PodGroup object that may define the gang.
func (m *Manager) sourceObjects(key Key) sources {
	src := sources{spInstalled: m.spLister != nil, vcInstalled: m.vcStore != nil}
	switch key.Family {
	case FamilyMuster:
		src.muster = lookup[*v1alpha1.PodGroup](m.pgStore, key)
	case FamilySchedulerPlugins:
		src.schedulerPlugins = lookup[*spv1alpha1.PodGroup](m.spStore, key)
	case FamilyUpstream:
		src.upstream = lookup[*schedulingv1beta1.PodGroup](m.upStore, key)
	case FamilyVolcano:
		src.volcano = lookup[*vcv1beta1.PodGroup](m.vcStore, key)
	}
	src.priorityClass = m.priorityClass(m.className(key))
	return src
}

// className is the PriorityClass the gang's Muster or Volcano PodGroup
// names; "" when it names none or does not exist.
func (m *Manager) className(key Key) string {
	switch key.Family {
	case FamilyMuster:
		if pg := lookup[*v1alpha1.PodGroup](m.pgStore, key); pg != nil {
			return pg.Spec.PriorityClassName
		}
	case FamilyVolcano:
		if pg := lookup[*vcv1beta1.PodGroup](m.vcStore, key); pg != nil {
			return pg.Spec.PriorityClassName
		}
	}
	return ""
}

// priorityClass is the PriorityClass of that name; nil for "" or a class
// that does not exist.
func (m *Manager) priorityClass(name string) *schedulingv1.PriorityClass {
	if name == "" || m.pcStore == nil {
		return nil
	}
	obj, ok, _ := m.pcStore.GetByKey(name)
	if !ok {
		return nil
	}
	pc, _ := obj.(*schedulingv1.PriorityClass)
	return pc
}

// classPriority is the value of the priority class the gang's PodGroup
// names (see Spec.Priority), read from the stores without resolving the
// gang's shape: QueueSort reads it.
func (m *Manager) classPriority(key Key) *int32 {
	if pc := m.priorityClass(m.className(key)); pc != nil {
		return ptr.To(pc.Value)
	}
	return nil
}

// lookup returns the object of the gang's name in store (nil: none, or
// no store).
func lookup[T *v1alpha1.PodGroup | *spv1alpha1.PodGroup | *schedulingv1beta1.PodGroup | *vcv1beta1.PodGroup](store cache.Store, key Key) T {
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

// Package gang resolves pods to gangs and keeps, for every gang, its members,
// the members this scheduler has placed, and the placement plan its pending
// members follow. All of it is rebuilt from informers after a restart except
// reservations and plans, which live only as long as the scheduling cycles
// that made them.
//
// One Manager holds it all under one lock, Manager.mu. By concern:
// membership.go says which gang a pod is in and answers member queries;
// pods.go takes pods in from the scheduler's informer, the Manager's watch
// of terminated pods and PreEnqueue; tally.go keeps each gang's running
// sums as its members change, and status.go reads a gang's Status from
// them and from its shape (spec and minimum); plans.go keeps what scheduling cycles record (reservations, plans,
// failures, queue notes); position.go is what QueueSort reads; events.go
// tells listeners what changed.
package gang

import (
	"cmp"
	"fmt"
	"slices"
	"strconv"
	"strings"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	podutil "k8s.io/kubernetes/pkg/api/v1/pod"

	"github.com/muster-sched/muster/apis/scheduling/v1alpha1"
)

// Family is the label family through which a pod names its gang. Families
// are resolved in this order when a pod carries several.
type Family string

const (
	// FamilyMuster: muster.dev/pod-group, naming a Muster PodGroup or, with
	// muster.dev/min-available, a label-only group.
	FamilyMuster Family = "muster"
	// FamilyUpstream: the pod field spec.schedulingGroup.podGroupName,
	// naming a scheduling.k8s.io/v1beta1 PodGroup with a gang policy. The
	// pod cannot change the field: it is the strongest signal after
	// Muster's own label.
	FamilyUpstream Family = "upstream"
	// FamilyLegacy: pod-group.scheduling.sigs.k8s.io/{name,min-available}.
	FamilyLegacy Family = "legacy"
	// FamilySchedulerPlugins: scheduling.x-k8s.io/pod-group, naming a
	// scheduler-plugins PodGroup.
	FamilySchedulerPlugins Family = "scheduler-plugins"
	// FamilyVolcano: the annotation scheduling.k8s.io/group-name (or
	// scheduling.volcano.sh/group-name), naming a Volcano PodGroup.
	FamilyVolcano Family = "volcano"
	// FamilySolo: a pod in no group that names a queue with
	// muster.dev/queue (or Volcano's scheduling.volcano.sh/queue-name
	// annotation). It is managed as a gang of one, keyed by its name.
	FamilySolo Family = "solo"
)

// Key identifies a gang.
type Key struct {
	Family    Family
	Namespace string
	Name      string
}

func (k Key) String() string { return fmt.Sprintf("%s/%s (%s)", k.Namespace, k.Name, k.Family) }

// Less orders keys by namespace, name and family: a stable order where
// nothing else decides.
func (k Key) Less(o Key) bool {
	return cmp.Or(cmp.Compare(k.Namespace, o.Namespace), cmp.Compare(k.Name, o.Name), cmp.Compare(k.Family, o.Family)) < 0
}

// membership is what a pod's labels say about its gang.
type membership struct {
	key Key
	// minAvailable is the pod's min-available label; hasMin says whether it
	// carries one.
	minAvailable string
	hasMin       bool
}

// UpstreamGang reports whether the scheduling.k8s.io PodGroup of that
// namespace and name makes its pods a gang: it has the gang policy, or it
// is not known yet (its pods wait for it, as kube-scheduler's would). A
// basic-policy PodGroup is no gang: its pods schedule one by one.
type UpstreamGang func(namespace, name string) bool

// membershipOf reads the pod's gang from its labels and, where upstream is
// not nil, its spec.schedulingGroup; ok is false for a pod in no gang.
func membershipOf(pod *v1.Pod, upstream UpstreamGang) (m membership, ok bool) {
	l := pod.Labels
	if name := l[v1alpha1.LabelPodGroup]; name != "" {
		min, hasMin := l[v1alpha1.LabelMinAvailable]
		return membership{key: Key{FamilyMuster, pod.Namespace, name}, minAvailable: min, hasMin: hasMin}, true
	}
	if sg := pod.Spec.SchedulingGroup; upstream != nil && sg != nil && sg.PodGroupName != nil && *sg.PodGroupName != "" {
		if name := *sg.PodGroupName; upstream(pod.Namespace, name) {
			return membership{key: Key{FamilyUpstream, pod.Namespace, name}}, true
		}
	}
	if name := l[v1alpha1.LegacyLabelPodGroup]; name != "" {
		min, hasMin := l[v1alpha1.LegacyLabelMinAvailable]
		return membership{key: Key{FamilyLegacy, pod.Namespace, name}, minAvailable: min, hasMin: hasMin}, true
	}
	if name := l[v1alpha1.SchedulerPluginsLabelPodGroup]; name != "" {
		return membership{key: Key{FamilySchedulerPlugins, pod.Namespace, name}}, true
	}
	if name := volcanoGroup(pod.Annotations); name != "" {
		return membership{key: Key{FamilyVolcano, pod.Namespace, name}}, true
	}
	if _, ok := l[v1alpha1.LabelQueue]; ok {
		return membership{key: Key{FamilySolo, pod.Namespace, pod.Name}}, true
	}
	if _, ok := pod.Annotations[v1alpha1.VolcanoAnnotationQueueName]; ok {
		return membership{key: Key{FamilySolo, pod.Namespace, pod.Name}}, true
	}
	return membership{}, false
}

// volcanoGroup is the Volcano PodGroup the annotations name, "" for none.
func volcanoGroup(a map[string]string) string {
	if name := a[v1alpha1.VolcanoAnnotationGroupName]; name != "" {
		return name
	}
	return a[v1alpha1.VolcanoAnnotationGroupNameAlt]
}

// KeyOf returns the gang the pod's labels put it in, if any: every pod
// Muster manages has one (a pod that only names a queue is a gang of one).
// It does not know scheduling.k8s.io PodGroups: the scheduler asks the
// Manager (Manager.KeyOf), which does.
func KeyOf(pod *v1.Pod) (Key, bool) {
	m, ok := membershipOf(pod, nil)
	return m.key, ok
}

// parseMinAvailable reads a min-available label value.
func parseMinAvailable(label, value string) (int32, error) {
	n, err := strconv.ParseInt(value, 10, 32)
	if err != nil || n < 1 {
		return 0, fmt.Errorf("label %s=%q is not a whole number >= 1", label, value)
	}
	return int32(n), nil
}

// RoleOf returns the pod's role in its gang: the muster.dev/role label, else
// Volcano's volcano.sh/task-spec annotation, else "".
func RoleOf(pod *v1.Pod) string {
	if r := pod.Labels[v1alpha1.LabelRole]; r != "" {
		return r
	}
	return pod.Annotations[v1alpha1.VolcanoAnnotationTaskSpec]
}

// QueueWaiters returns the first pending member of every gang that waits
// for its queue (SetWaiting), or with all of every gang that has one:
// trying that member again tries the gang's admission, and a plan made
// then activates its siblings.
func (m *Manager) QueueWaiters(all bool) []*v1.Pod {
	m.mu.RLock()
	defer m.mu.RUnlock()
	var out []*v1.Pod
	for _, g := range m.groups {
		if g.note == "" && !all {
			continue
		}
		if pending := g.pendingLocked(); len(pending) > 0 {
			out = append(out, pending[0])
		}
	}
	return out
}

// PlacedMembers returns the live members that hold room on a node, newest
// first: those bound, and those this scheduler reserved a node for (waiting
// at Permit or being bound), each then a copy whose spec.nodeName is the
// reserved node. Evicting a gang takes all of them: the bound ones alone
// would leave the reserved ones to bind into a gang below its minimum.
func (m *Manager) PlacedMembers(key Key) []*v1.Pod {
	m.mu.RLock()
	defer m.mu.RUnlock()
	g := m.groups[key]
	if g == nil {
		return nil
	}
	var out []*v1.Pod
	for uid, p := range g.members {
		if p.DeletionTimestamp != nil || podutil.IsPodTerminal(p) {
			continue
		}
		if p.Spec.NodeName == "" {
			node, reserved := g.reserved[uid]
			if !reserved {
				continue
			}
			p = p.DeepCopy()
			p.Spec.NodeName = node
		}
		out = append(out, p)
	}
	slices.SortFunc(out, func(a, b *v1.Pod) int { return compareMembers(b, a) })
	return out
}

// IsAllocated reports whether the gang's allocation counts member uid: it
// is bound or reserved, and neither finished nor being deleted.
func (m *Manager) IsAllocated(key Key, uid types.UID) bool {
	m.mu.RLock()
	defer m.mu.RUnlock()
	g := m.groups[key]
	if g == nil {
		return false
	}
	p, ok := g.members[uid]
	if !ok || p.DeletionTimestamp != nil || podutil.IsPodTerminal(p) {
		return false
	}
	_, reserved := g.reserved[uid]
	return reserved || p.Spec.NodeName != ""
}

// HasMember reports whether the gang state still counts pod uid in the
// gang.
func (m *Manager) HasMember(key Key, uid types.UID) bool {
	m.mu.RLock()
	defer m.mu.RUnlock()
	g := m.groups[key]
	if g == nil {
		return false
	}
	_, ok := g.members[uid]
	return ok
}

// Requests returns member uid's resource requests (shared: read only).
func (m *Manager) Requests(key Key, uid types.UID) (v1.ResourceList, bool) {
	m.mu.RLock()
	defer m.mu.RUnlock()
	g := m.groups[key]
	if g == nil {
		return nil, false
	}
	r, ok := g.requests[uid]
	return r, ok
}

// PendingMembers returns the live members that are neither bound nor
// reserved, oldest first.
func (m *Manager) PendingMembers(key Key) []*v1.Pod {
	m.mu.RLock()
	defer m.mu.RUnlock()
	g := m.groups[key]
	if g == nil {
		return nil
	}
	return g.pendingLocked()
}

func (g *group) pendingLocked() []*v1.Pod {
	var out []*v1.Pod
	for uid, p := range g.members {
		if _, reserved := g.reserved[uid]; reserved || p.Spec.NodeName != "" || p.DeletionTimestamp != nil || podutil.IsPodTerminal(p) {
			continue
		}
		out = append(out, p)
	}
	slices.SortFunc(out, compareMembers)
	return out
}

// MemberBefore is the order of a gang's members: oldest first, then by
// name. Pending members are ranked in it, and QueueSort orders the members
// of one gang by it: a member's projected share counts the members ranked
// ahead of it, so placing members in any other order would move the
// projections of members already in the scheduling queue.
func MemberBefore(a, b *v1.Pod) bool { return compareMembers(a, b) < 0 }

// compareMembers orders members as MemberBefore does: −1, 0 or 1.
func compareMembers(a, b *v1.Pod) int {
	return cmp.Or(a.CreationTimestamp.Compare(b.CreationTimestamp.Time), strings.Compare(a.Name, b.Name))
}

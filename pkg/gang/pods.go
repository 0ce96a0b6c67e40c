package gang

import (
	"maps"
	"slices"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/types"
	quotav1 "k8s.io/apiserver/pkg/quota/v1"
	"k8s.io/client-go/tools/cache"
	corev1helpers "k8s.io/component-helpers/scheduling/corev1"
	podutil "k8s.io/kubernetes/pkg/api/v1/pod"

	"github.com/muster-sched/muster/pkg/requests"
)

// How pods come into the gang state and leave it: the scheduler's informer of
// live pods, the Manager's of terminated ones, and PreEnqueue's Observe.

// terminated selects the pods that finished: the scheduler's informer drops
// them, and a gang counts its succeeded and failed members.
var terminated = fields.AndSelectors(
	fields.OneTermNotEqualSelector("status.phase", string(v1.PodPending)),
	fields.OneTermNotEqualSelector("status.phase", string(v1.PodRunning)),
	fields.OneTermNotEqualSelector("status.phase", string(v1.PodUnknown)),
).String()

// finishGrace is how long a bound member that left the live pods without
// being deleted (it finished, most likely) keeps its last state, waiting
// for the watch of terminated pods to deliver it finished: the two watches
// are not ordered, and a gang must not lose a member in between.
const finishGrace = time.Second

// trimTerminated trims a terminated pod to what the Manager reads: for a
// pod in no gang, its identity alone (the Manager only learns that it is
// in none); for a member, all but its managed fields, as the scheduler's
// own pod informer does. Less memory, less GC.
func (m *Manager) trimTerminated(obj any) (any, error) {
	pod, ok := obj.(*v1.Pod)
	if !ok {
		return obj, nil
	}
	if _, managed := m.KeyOf(pod); !managed {
		return &v1.Pod{ObjectMeta: metav1.ObjectMeta{
			Namespace: pod.Namespace, Name: pod.Name, UID: pod.UID, ResourceVersion: pod.ResourceVersion,
		}}, nil
	}
	pod.ManagedFields = nil
	return pod, nil
}

// Observe takes in a pod the scheduler is about to consider. The
// scheduler's informer may be ahead of the Manager's, and the pod must
// count in its gang and queue when it is checked. The copy taken is the
// informer's store's, which is at least as fresh as what either listener
// was told: the scheduling queue's copy may also be behind the Manager's
// (a member moved to another gang, then put back by its stale copy).
//
// Change listeners are told at once when the pod is new to the gang state
// (the queue accounting must count the pod before it is checked); the
// Manager's informer has told them of a version it delivered first.
// OnWake listeners on another goroutine: the
// scheduling queue calls PreEnqueue with its lock held, and they activate
// pods in it.
//
// It returns why the gang, with the pod in it, is invalid ("" when it is
// valid). A gang invalid now is remembered, so that its refused members
// are woken once it turns valid. The pod that makes it valid wakes them
// itself: another PreEnqueue plugin (a scheduling gate) may still hold
// that pod back, and the Manager's informer, bringing the version
// observed here, then sees nothing new.
func (m *Manager) Observe(pod *v1.Pod) (key Key, invalid string, ok bool) {
	if latest := m.latest(pod); latest != nil {
		pod = latest
	}
	key, ok, c := m.upsert(pod)
	if !ok {
		return Key{}, "", false
	}
	m.mu.Lock()
	invalid = m.invalidLocked(key)
	wake := invalid == "" && m.refused[key]
	if invalid != "" {
		m.refused[key] = true
	} else {
		delete(m.refused, key)
	}
	m.mu.Unlock()
	m.notifyChange(key, c)
	if wake {
		go m.wake(key)
	}
	return key, invalid, true
}

// latest is the scheduler's informer's copy of the pod, nil when it has
// none of that UID.
func (m *Manager) latest(pod *v1.Pod) *v1.Pod {
	if len(m.podStores) == 0 {
		return nil
	}
	obj, exists, err := m.podStores[0].Get(pod)
	if err != nil || !exists {
		return nil
	}
	if p, ok := obj.(*v1.Pod); ok && p.UID == pod.UID {
		return p
	}
	return nil
}

func (m *Manager) updatePod(obj any) {
	pod, ok := obj.(*v1.Pod)
	if !ok {
		return
	}
	if _, ok := m.KeyOf(pod); !ok && !m.isMember(pod.UID) {
		return // unmanaged: most pods of a cluster
	}
	if key, ok, c := m.upsert(pod); ok && c != unchanged {
		m.notify(key, c)
	}
}

func (m *Manager) isMember(uid types.UID) bool {
	m.mu.RLock()
	defer m.mu.RUnlock()
	_, ok := m.memberOf[uid]
	return ok
}

// upsert records the pod as a member of its gang and returns the gang,
// and what changed: nothing when it holds this version of the pod already.
// A pod that left every gang is removed instead.
func (m *Manager) upsert(pod *v1.Pod) (key Key, ok bool, c change) {
	key, ok = m.KeyOf(pod)
	if !ok {
		// The label was removed: the pod left its gang.
		m.deletePod(pod)
		return Key{}, false, unchanged
	}
	m.mu.Lock()
	if prev, ok := m.memberOf[pod.UID]; ok && prev != key {
		// Relabelled into another gang: it leaves the one it was in,
		// which may turn valid (the pod disagreed with its other members).
		// Waking is not done here: Observe runs under the scheduling
		// queue's lock. Relabels are rare.
		m.removeLocked(prev, pod.UID)
		defer func() {
			m.notifyChange(prev, releaseChange)
			go m.checkValid(prev)
		}()
	}
	m.memberOf[pod.UID] = key
	g := m.groupLocked(key)
	old := g.members[pod.UID]
	if old != nil && old.ResourceVersion == pod.ResourceVersion && pod.ResourceVersion != "" {
		// The same version again: the informer's, then Observe's (or
		// the other way round), or a relist.
		m.mu.Unlock()
		return key, true, unchanged
	}
	g.changed()
	requests := requests.Of(pod)
	if old == nil || shapeMoved(old, pod, g.requests[pod.UID], requests) {
		g.shape.Store(nil)
	}
	if old != nil && !maps.Equal(old.Labels, pod.Labels) {
		g.short.Store(0) // the labels may say another spec
	}
	c = statusChange
	switch {
	case old != nil && counts(old) && !counts(pod):
		c = releaseChange
	case old == nil || usageMoved(old, pod, g.requests[pod.UID], requests):
		c = usageChange
	}
	g.retally(pod.UID, func() {
		g.members[pod.UID] = pod
		g.requests[pod.UID] = requests
		if pod.Spec.NodeName != "" {
			delete(g.reserved, pod.UID)
		}
	})
	if c := pod.CreationTimestamp.Time; g.created.IsZero() || c.Before(g.created) {
		g.created = c
	}
	if !g.startTimed && pod.Spec.NodeName != "" {
		m.observeStart(key, g, old)
	}
	m.mu.Unlock()
	return key, true, c
}

// usageMoved reports whether a member's update from old to pod (requests
// oldReq to req) can change its gang's usage (see usageChange): anything
// its part of the tally or the gang's shape reads but the Running phase.
func usageMoved(old, pod *v1.Pod, oldReq, req v1.ResourceList) bool {
	return old.Spec.NodeName != pod.Spec.NodeName ||
		(old.DeletionTimestamp == nil) != (pod.DeletionTimestamp == nil) ||
		finishedAs(old) != finishedAs(pod) ||
		corev1helpers.PodPriority(old) != corev1helpers.PodPriority(pod) ||
		RoleOf(old) != RoleOf(pod) ||
		!maps.Equal(old.Labels, pod.Labels) ||
		!quotav1.Equals(oldReq, req)
}

// counts reports whether a member holds or asks for anything: it has not
// finished and is not being deleted.
func counts(pod *v1.Pod) bool { return pod.DeletionTimestamp == nil && finishedAs(pod) == "" }

// finishedAs is the phase of a finished pod, "" for a live one.
func finishedAs(pod *v1.Pod) v1.PodPhase {
	if p := pod.Status.Phase; p == v1.PodSucceeded || p == v1.PodFailed {
		return p
	}
	return ""
}

// unlistPod handles a pod that left one of the Manager's informers:
// deleted, finished (it leaves the scheduler's live pods) or relabelled. A
// copy another informer lists is the pod as it is now.
func (m *Manager) unlistPod(obj any) {
	if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = d.Obj
	}
	pod, ok := obj.(*v1.Pod)
	if !ok || !m.isMember(pod.UID) || m.relist(pod) {
		return
	}
	if pod.DeletionTimestamp == nil && pod.Spec.NodeName != "" && !podutil.IsPodTerminal(pod) {
		// A running pod gone without being deleted first has finished,
		// unless it was force-deleted: its terminated copy is on its way.
		time.AfterFunc(finishGrace, func() {
			if !m.relist(pod) {
				m.deletePod(pod)
			}
		})
		return
	}
	m.deletePod(pod)
}

// relist takes in the copy of the pod that one of the Manager's informers
// lists, and reports whether there was one.
func (m *Manager) relist(pod *v1.Pod) bool {
	for _, store := range m.podStores {
		if o, exists, _ := store.Get(pod); exists {
			if p, ok := o.(*v1.Pod); ok && p.UID == pod.UID {
				m.updatePod(p)
				return true
			}
		}
	}
	return false
}

// deletePod removes the pod from the gang it is a member of.
func (m *Manager) deletePod(pod *v1.Pod) {
	m.mu.Lock()
	key, ok := m.memberOf[pod.UID]
	if ok {
		m.removeLocked(key, pod.UID)
	}
	m.mu.Unlock()
	if ok {
		m.notify(key, releaseChange)
	}
}

// removeLocked removes member uid from the gang key, and the gang once it
// has no member left. m.mu held for writing.
func (m *Manager) removeLocked(key Key, uid types.UID) {
	delete(m.memberOf, uid)
	g := m.groups[key]
	if g == nil {
		return
	}
	g.changed()
	g.shape.Store(nil)
	g.short.Store(0) // the member may have been the one that disagreed
	g.retally(uid, func() {
		delete(g.members, uid)
		delete(g.reserved, uid)
		delete(g.requests, uid)
	})
	if g.plan != nil {
		_, planned := g.plan.Nodes[uid]
		if planned || slices.ContainsFunc(g.plan.Todo, func(p *v1.Pod) bool { return p.UID == uid }) {
			m.replacePlanLocked(key, g, nil)
		}
	}
	if len(g.members) == 0 {
		delete(m.groups, key)
		delete(m.refused, key)
	}
}

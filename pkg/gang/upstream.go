package gang

import (
	"fmt"
	"maps"

	v1 "k8s.io/api/core/v1"
	schedulingv1beta1 "k8s.io/api/scheduling/v1beta1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"

	"github.com/muster-sched/muster/apis/scheduling/v1alpha1"
)

// KeyOf returns the pod's gang, if it has one: what its labels say (see
// the package function KeyOf) and, where Muster schedules them, the
// scheduling.k8s.io PodGroup its spec.schedulingGroup names. A nil
// Manager knows no such PodGroups.
func (m *Manager) KeyOf(pod *v1.Pod) (Key, bool) {
	var upstream UpstreamGang
	if m != nil && m.upStore != nil {
		upstream = m.upstreamGang
	}
	mem, ok := membershipOf(pod, upstream)
	return mem.key, ok
}

// upstreamGang is UpstreamGang over the PodGroups the Manager watches.
func (m *Manager) upstreamGang(namespace, name string) bool {
	obj, exists, _ := m.upStore.GetByKey(namespace + "/" + name)
	if !exists {
		return true // its pods wait for it
	}
	pg, ok := obj.(*schedulingv1beta1.PodGroup)
	return !ok || pg.Spec.SchedulingPolicy.Basic == nil
}

// upstreamHandler handles the events of scheduling.k8s.io PodGroups. Their
// policy decides membership (UpstreamGang), so a PodGroup that appears,
// changes or goes re-resolves the pods that name it: the pods of a
// basic-policy PodGroup leave the gang they waited in for it. Those pods
// and the gang's pending members are woken: they may have been parked
// against the PodGroup as it was. Updates that change neither the spec nor
// the labels (status, which Muster writes) change nothing.
func (m *Manager) upstreamHandler() cache.ResourceEventHandler {
	changed := func(obj any) {
		if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
			obj = d.Obj
		}
		o, ok := obj.(metav1.Object)
		if !ok {
			return
		}
		key := Key{FamilyUpstream, o.GetNamespace(), o.GetName()}
		m.mu.Lock()
		var members []*v1.Pod
		if g := m.groups[key]; g != nil {
			g.changed()
			g.shape.Store(nil)
			g.short.Store(0)
			for _, p := range g.members {
				members = append(members, p)
			}
		}
		m.mu.Unlock()
		var wake []*v1.Pod
		for _, p := range members {
			if k, ok := m.KeyOf(p); !ok || k != key {
				m.updatePod(p)
				if p.Spec.NodeName == "" {
					wake = append(wake, p)
				}
			}
		}
		m.notify(key, releaseChange)
		wake = append(wake, m.PendingMembers(key)...)
		if len(wake) == 0 {
			return
		}
		m.listenersMu.Lock()
		ws := m.onWake
		m.listenersMu.Unlock()
		for _, f := range ws {
			f(key, wake)
		}
	}
	return cache.ResourceEventHandlerFuncs{
		AddFunc: changed,
		UpdateFunc: func(oldObj, newObj any) {
			old, okOld := oldObj.(*schedulingv1beta1.PodGroup)
			pg, okNew := newObj.(*schedulingv1beta1.PodGroup)
			if okOld && okNew && equality.Semantic.DeepEqual(old.Spec, pg.Spec) && maps.Equal(old.Labels, pg.Labels) {
				return
			}
			changed(newObj)
		},
		DeleteFunc: changed,
	}
}

// UpstreamInstalled reports whether Muster schedules the pods of
// scheduling.k8s.io PodGroups.
func (m *Manager) UpstreamInstalled() bool { return m.upStore != nil }

// upstreamSpec is the spec of a gang defined by a scheduling.k8s.io
// PodGroup: its gang policy's minCount, and the queue its muster.dev/queue
// label names, else the one its members' labels agree on.
func upstreamSpec(key Key, members []*v1.Pod, pg *schedulingv1beta1.PodGroup) (Spec, error) {
	if pg == nil {
		return Spec{}, fmt.Errorf("PodGroup %s/%s (scheduling.k8s.io) does not exist", key.Namespace, key.Name)
	}
	g := pg.Spec.SchedulingPolicy.Gang
	if g == nil || g.MinCount < 1 {
		return Spec{}, fmt.Errorf("PodGroup %s/%s (scheduling.k8s.io) has no gang policy with minCount >= 1", key.Namespace, key.Name)
	}
	queue, err := agreedQueue(members)
	if err != nil {
		return Spec{}, err
	}
	if q := pg.Labels[v1alpha1.LabelQueue]; q != "" {
		if queue != "" && queue != q {
			return Spec{}, fmt.Errorf("PodGroup %s/%s names queue %q and its members %q", key.Namespace, key.Name, q, queue)
		}
		queue = q
	}
	return Spec{MinMember: g.MinCount, Queue: queue, Topology: upstreamTopology(pg)}, nil
}

// UpstreamPodGroup is the scheduling.k8s.io PodGroup of an upstream gang,
// nil when it does not exist (or Muster does not schedule them).
func (m *Manager) UpstreamPodGroup(key Key) *schedulingv1beta1.PodGroup {
	if key.Family != FamilyUpstream {
		return nil
	}
	return lookup[*schedulingv1beta1.PodGroup](m.upStore, key)
}

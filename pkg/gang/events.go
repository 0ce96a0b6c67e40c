package gang

import (
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/tools/cache"
	vcv1beta1 "volcano.sh/apis/pkg/apis/scheduling/v1beta1"
)

// The gang state's events: the scheduler's pod events it forwards to other
// listeners, and the changes of gangs it reports.

// schedulerPods handles the events of the scheduler's pod informer: the
// Manager's own handler, then the handlers added with AddPodHandler.
type schedulerPods struct {
	m   *Manager
	own cache.ResourceEventHandler
}

func (s schedulerPods) OnAdd(obj any, initial bool) {
	s.own.OnAdd(obj, initial)
	s.m.forward(func(h cache.ResourceEventHandler) { h.OnAdd(obj, initial) })
}

func (s schedulerPods) OnUpdate(oldObj, newObj any) {
	s.own.OnUpdate(oldObj, newObj)
	s.m.forward(func(h cache.ResourceEventHandler) { h.OnUpdate(oldObj, newObj) })
}

func (s schedulerPods) OnDelete(obj any) {
	s.own.OnDelete(obj)
	s.m.forward(func(h cache.ResourceEventHandler) { h.OnDelete(obj) })
}

func (m *Manager) forward(f func(cache.ResourceEventHandler)) {
	m.podHandlersMu.RLock()
	defer m.podHandlersMu.RUnlock()
	for _, h := range m.podHandlers {
		f(h)
	}
}

// AddPodHandler has h told of the events of the scheduler's pod informer
// on the Manager's listener, after the Manager took each in: the API server
// and the informer wake one goroutine per watcher and listener for every
// pod event, so Muster listens once. h is told first of every pod the
// informer holds already; events on their way may then bring it older
// versions, each followed by the newer ones.
func (m *Manager) AddPodHandler(h cache.ResourceEventHandler) {
	m.podHandlersMu.Lock()
	defer m.podHandlersMu.Unlock()
	for _, obj := range m.podStores[0].List() { // the scheduler's informer
		h.OnAdd(obj, true)
	}
	m.podHandlers = append(m.podHandlers, h)
}

// change is what an event changed of a gang.
type change int

const (
	unchanged change = iota
	// statusChange: the gang's status moved but not its usage, e.g. a
	// member started running, or a plan or note was recorded.
	statusChange
	// usageChange: what the gang holds or asks for may have moved: its
	// members, their requests, placement, priority, role or liveness, its
	// spec, or its reservations.
	usageChange
	// releaseChange: a usage change that may have given something back:
	// a member stopped counting (finished, being deleted, gone, moved to
	// another gang), a reservation was undone, or the PodGroup changed.
	releaseChange
)

// listener is called with the gangs whose change is at least at.
type listener struct {
	f  func(Key)
	at change
}

// OnChange registers f to be called with the key of every gang whose
// status may have changed: its members or their state, its spec, its
// reservations, plan or notes.
func (m *Manager) OnChange(f func(Key)) { m.addListener(listener{f: f, at: statusChange}) }

// OnUsageChange registers f to be called with the key of every gang whose
// usage may have changed (see usageChange), which is what queue accounting
// reads: not for a member that only started running. Most pod updates in
// a busy cluster are such status updates.
func (m *Manager) OnUsageChange(f func(Key)) { m.addListener(listener{f: f, at: usageChange}) }

// OnRelease registers f to be called with the key of every gang that may
// have given something back (see releaseChange): room, queue usage or
// admission that another gang may be waiting for.
func (m *Manager) OnRelease(f func(Key)) { m.addListener(listener{f: f, at: releaseChange}) }

func (m *Manager) addListener(l listener) {
	m.listenersMu.Lock()
	defer m.listenersMu.Unlock()
	m.listeners = append(m.listeners, l)
}

// OnWake registers f to be called, with the gang's pending members, when
// a gang becomes valid or ready: the scheduler may have checked those
// members against an older view of the gang and parked them (too few
// members then; extras waiting for the members planned before them).
func (m *Manager) OnWake(f func(Key, []*v1.Pod)) {
	m.listenersMu.Lock()
	defer m.listenersMu.Unlock()
	m.onWake = append(m.onWake, f)
}

// wake tells the OnWake listeners about the gang's pending members.
func (m *Manager) wake(key Key) {
	m.listenersMu.Lock()
	ws := m.onWake
	m.listenersMu.Unlock()
	if len(ws) == 0 {
		return
	}
	pending := m.PendingMembers(key)
	if len(pending) == 0 {
		return
	}
	for _, f := range ws {
		f(key, pending)
	}
}

func (m *Manager) notify(key Key, c change) {
	m.notifyChange(key, c)
	m.checkValid(key)
}

// notifyChange tells the listeners of change c; they take no scheduler
// locks.
func (m *Manager) notifyChange(key Key, c change) {
	if c == unchanged {
		return
	}
	m.listenersMu.Lock()
	ls := m.listeners
	m.listenersMu.Unlock()
	for _, l := range ls {
		if c >= l.at {
			l.f(key)
		}
	}
}

// Refused reports whether the gang was invalid when one of its members
// was observed (PreEnqueue) and has not been seen valid since: its members
// wait at PreEnqueue, and only a change that makes it valid moves them,
// which the Manager reports (OnWake). Room freed or nodes changing do not.
func (m *Manager) Refused(key Key) bool {
	m.mu.RLock()
	defer m.mu.RUnlock()
	return m.refused[key]
}

// checkValid wakes the gang's pending members when it became valid after
// Observe refused a member for it. A gang valid whenever it was observed
// has no member to wake: PreEnqueue let them all in.
func (m *Manager) checkValid(key Key) {
	m.mu.RLock()
	refused := m.refused[key]
	m.mu.RUnlock()
	if !refused {
		return // the common case, under the read lock only
	}
	m.mu.Lock()
	valid := m.refused[key] && m.invalidLocked(key) == ""
	if valid {
		delete(m.refused, key)
	}
	m.mu.Unlock()
	if valid {
		m.wake(key)
	}
}

func (m *Manager) groupHandler(family Family) cache.ResourceEventHandler {
	notify := func(obj any) {
		if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
			obj = d.Obj
		}
		if o, ok := obj.(metav1.Object); ok {
			key := Key{family, o.GetNamespace(), o.GetName()}
			m.mu.Lock()
			if g := m.groups[key]; g != nil {
				g.changed()
				g.shape.Store(nil)
				g.short.Store(0)
			}
			m.mu.Unlock()
			m.notify(key, releaseChange)
		}
	}
	return cache.ResourceEventHandlerFuncs{
		AddFunc: notify,
		UpdateFunc: func(oldObj, newObj any) {
			// The gang reads the spec alone: a status write (Muster's
			// own, every change of a waiting gang) changes nothing, but
			// for a Volcano PodGroup entering or leaving Inqueue, which
			// its queue's usage follows (Status.Enqueued).
			if SpecChanged(oldObj, newObj) {
				notify(newObj)
			} else if c := enqueueChange(oldObj, newObj); c != unchanged {
				if o, ok := newObj.(metav1.Object); ok {
					m.notifyChange(Key{family, o.GetNamespace(), o.GetName()}, c)
				}
			}
		},
		DeleteFunc: notify,
	}
}

// enqueueChange is what a Volcano PodGroup's update changes of its gang's
// usage through its phase: entering Inqueue reserves (usageChange),
// leaving it gives back (releaseChange).
func enqueueChange(oldObj, newObj any) change {
	o, okOld := oldObj.(*vcv1beta1.PodGroup)
	n, okNew := newObj.(*vcv1beta1.PodGroup)
	if !okOld || !okNew {
		return unchanged
	}
	was, is := o.Status.Phase == vcv1beta1.PodGroupInqueue, n.Status.Phase == vcv1beta1.PodGroupInqueue
	switch {
	case is && !was:
		return usageChange
	case was && !is:
		return releaseChange
	}
	return unchanged
}

// SpecChanged reports whether a PodGroup update may change what its gang
// requires. The generation says so for PodGroups with a status
// subresource; Volcano's CRD has none, so every status write bumps its
// generation: its spec is compared instead.
func SpecChanged(oldObj, newObj any) bool {
	switch o := oldObj.(type) {
	case *vcv1beta1.PodGroup:
		n, ok := newObj.(*vcv1beta1.PodGroup)
		return !ok || !equality.Semantic.DeepEqual(o.Spec, n.Spec)
	case *unstructured.Unstructured: // the scheduler's informers of custom resources
		n, ok := newObj.(*unstructured.Unstructured)
		if !ok {
			return true
		}
		if o.GroupVersionKind().Group == vcv1beta1.SchemeGroupVersion.Group {
			return !equality.Semantic.DeepEqual(o.Object["spec"], n.Object["spec"])
		}
	}
	o, okOld := oldObj.(metav1.Object)
	n, okNew := newObj.(metav1.Object)
	return !okOld || !okNew || o.GetGeneration() != n.GetGeneration()
}

// priorityClassHandler resolves again the gangs whose PodGroup names a
// PriorityClass that came, went or changed value. Classes change rarely:
// every gang is looked at.
func (m *Manager) priorityClassHandler() cache.ResourceEventHandler {
	notify := func(obj any) {
		if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
			obj = d.Obj
		}
		o, ok := obj.(metav1.Object)
		if !ok {
			return
		}
		var moved []Key
		m.mu.Lock()
		for key, g := range m.groups {
			if m.className(key) == o.GetName() {
				g.changed()
				g.shape.Store(nil)
				g.short.Store(0)
				moved = append(moved, key)
			}
		}
		m.mu.Unlock()
		for _, key := range moved {
			m.notify(key, releaseChange)
		}
	}
	return cache.ResourceEventHandlerFuncs{
		AddFunc:    notify,
		UpdateFunc: func(_, newObj any) { notify(newObj) },
		DeleteFunc: notify,
	}
}

package queue

import (
	"fmt"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/tools/cache"
)

// Which namespaces may submit to a queue (Queue.spec.namespaceSelector).

// watchNamespaces reads namespaces' labels from the scheduler's informer;
// when a namespace is added or its labels change, its gangs are accounted
// again and every waiting gang is retried (see QueueChanges).
func (s *State) watchNamespaces(f informers.SharedInformerFactory) error {
	informer := f.Core().V1().Namespaces()
	s.namespaces = informer.Lister()
	_, err := informer.Informer().AddEventHandler(cache.ResourceEventHandlerDetailedFuncs{
		// A pod may be seen before its namespace: refused then for want of
		// labels, its gang is retried when the namespace arrives.
		AddFunc: func(obj any, initial bool) {
			if n, ok := obj.(*v1.Namespace); ok && !initial {
				s.namespaceChanged(n.Name)
			}
		},
		UpdateFunc: func(oldObj, newObj any) {
			o, okOld := oldObj.(*v1.Namespace)
			n, okNew := newObj.(*v1.Namespace)
			if okOld && okNew && !labels.Equals(o.Labels, n.Labels) {
				s.namespaceChanged(n.Name)
			}
		},
	})
	return err
}

// namespaceChanged marks the namespace's gangs changed: whether they may
// claim room under their queue's share moved with its labels.
func (s *State) namespaceChanged(namespace string) {
	s.mu.Lock()
	for key := range s.contrib {
		if key.Namespace == namespace {
			s.dirty[key] = true
		}
	}
	s.version++
	s.mu.Unlock()
	s.QueuesChanged()
}

// Permits reports whether gangs of namespace may use the queue: whether
// the namespaceSelector of the queue and of every ancestor matches the
// namespace's labels. It says why not in words for the gang's users.
func (snap *Snapshot) Permits(namespace, queue string) (bool, string) {
	var set labels.Set // read once, and only if some queue selects
	for _, f := range snap.ancestry(queue) {
		if f.Namespaces == nil {
			continue
		}
		if f.NamespacesErr != "" {
			return false, fmt.Sprintf("queue %s: namespaceSelector: %s", f.Name, f.NamespacesErr)
		}
		if set == nil {
			set = labels.Set{}
			if ns, err := snap.state.namespaces.Get(namespace); err == nil {
				set = ns.Labels
			}
		}
		if !f.Namespaces.Matches(set) {
			return false, fmt.Sprintf("namespace %s may not use queue %s: its namespaceSelector (%s) does not match the namespace's labels", namespace, f.Name, f.Namespaces)
		}
	}
	return true, ""
}

func (snap *Snapshot) permits(namespace, queue string) bool {
	ok, _ := snap.Permits(namespace, queue)
	return ok
}

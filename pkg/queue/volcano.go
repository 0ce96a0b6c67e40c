package queue

import (
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	vcv1beta1 "volcano.sh/apis/pkg/apis/scheduling/v1beta1"
	vclisters "volcano.sh/apis/pkg/client/listers/scheduling/v1beta1"

	"github.com/muster-sched/muster/apis/scheduling/v1alpha1"
	musterlisters "github.com/muster-sched/muster/pkg/generated/listers/scheduling/v1alpha1"
)

// Volcano's Queues (scheduling.volcano.sh/v1beta1) are queues of the same
// semantics as Muster's, in one namespace of queue names: a gang names a
// queue, whichever kind defines it. Where a Muster Queue and a Volcano
// Queue share a name, the Muster Queue defines the queue and the Volcano
// Queue is ignored (its status still reports the queue's figures).
// Volcano's `root` queue is the implicit top of the hierarchy.

// FromVolcano reads a Volcano Queue as the Muster Queue of the same
// meaning: weight, capability, guarantee, deserved, reclaimable, parent
// and priority from its spec, and whether it admits from status.state,
// where Volcano keeps it (Closed and Closing admit nothing). The result
// shares vq's maps: read only.
func FromVolcano(vq *vcv1beta1.Queue) *v1alpha1.Queue {
	q := &v1alpha1.Queue{
		ObjectMeta: vq.ObjectMeta,
		Spec: v1alpha1.QueueSpec{
			Weight:      vq.Spec.Weight,
			Priority:    vq.Spec.Priority,
			Capability:  vq.Spec.Capability,
			Guarantee:   vq.Spec.Guarantee.Resource,
			Deserved:    vq.Spec.Deserved,
			Reclaimable: vq.Spec.Reclaimable,
			Parent:      vq.Spec.Parent,
			State:       v1alpha1.QueueOpen,
		},
	}
	if s := vq.Status.State; s == vcv1beta1.QueueStateClosed || s == vcv1beta1.QueueStateClosing {
		q.Spec.State = v1alpha1.QueueClosed
	}
	return q
}

// NewLister lists Muster's Queues and, where volcano is not nil, Volcano's
// read by FromVolcano, as the queue accounting sees them.
func NewLister(muster musterlisters.QueueLister, volcano vclisters.QueueLister) musterlisters.QueueLister {
	if volcano == nil {
		return muster
	}
	return &lister{QueueLister: muster, volcano: volcano}
}

type lister struct {
	musterlisters.QueueLister
	volcano vclisters.QueueLister
}

func (l *lister) List(selector labels.Selector) ([]*v1alpha1.Queue, error) {
	out, err := l.QueueLister.List(selector)
	if err != nil {
		return nil, err
	}
	vqs, err := l.volcano.List(selector)
	if err != nil {
		return nil, err
	}
	names := make(map[string]bool, len(out))
	for _, q := range out {
		names[q.Name] = true
	}
	for _, vq := range vqs {
		if !names[vq.Name] && vq.Name != v1alpha1.RootQueue {
			out = append(out, FromVolcano(vq))
		}
	}
	return out, nil
}

func (l *lister) Get(name string) (*v1alpha1.Queue, error) {
	q, err := l.QueueLister.Get(name)
	if !apierrors.IsNotFound(err) || name == v1alpha1.RootQueue {
		return q, err
	}
	vq, verr := l.volcano.Get(name)
	if apierrors.IsNotFound(verr) {
		return nil, apierrors.NewNotFound(schema.GroupResource{Group: v1alpha1.GroupName, Resource: "queues"}, name)
	}
	if verr != nil {
		return nil, verr
	}
	return FromVolcano(vq), nil
}

// SpecChanged reports whether a Queue update (Muster's or Volcano's, typed
// or as the scheduler's informers of custom resources deliver it) may
// change a decision: its generation moved, or, for a Volcano Queue, its
// status.state, where Volcano keeps whether it admits. Status writes of
// figures change nothing.
func SpecChanged(oldObj, newObj any) bool {
	switch o := oldObj.(type) {
	case *vcv1beta1.Queue:
		n, ok := newObj.(*vcv1beta1.Queue)
		return !ok || o.Generation != n.Generation || o.Status.State != n.Status.State
	case *unstructured.Unstructured:
		n, ok := newObj.(*unstructured.Unstructured)
		if !ok || o.GetGeneration() != n.GetGeneration() {
			return true
		}
		if o.GroupVersionKind().Group != vcv1beta1.SchemeGroupVersion.Group {
			return false
		}
		os, _, _ := unstructured.NestedString(o.Object, "status", "state")
		ns, _, _ := unstructured.NestedString(n.Object, "status", "state")
		return os != ns
	}
	o, okOld := oldObj.(metav1.Object)
	n, okNew := newObj.(metav1.Object)
	return !okOld || !okNew || o.GetGeneration() != n.GetGeneration()
}

// Object returns the Queue of that name as the API object it is, Muster's
// or else Volcano's, for Events about it; nil when neither exists.
func (s *State) Object(name string) runtime.Object {
	muster, volcano := s.queues, vclisters.QueueLister(nil)
	if l, ok := s.queues.(*lister); ok {
		muster, volcano = l.QueueLister, l.volcano
	}
	if q, err := muster.Get(name); err == nil {
		return q
	}
	if volcano != nil {
		if vq, err := volcano.Get(name); err == nil {
			return vq
		}
	}
	return nil
}

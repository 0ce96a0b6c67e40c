package inspect

import (
	"context"
	"errors"
	"fmt"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// Queue is a queue's figures, from its spec and status.
type Queue struct {
	Kind      string          `json:"kind"`
	Name      string          `json:"name"`
	Parent    string          `json:"parent,omitempty"`
	State     string          `json:"state"`
	Weight    int64           `json:"weight"`
	Resources []QueueResource `json:"resources,omitempty"`
	Pending   int64           `json:"pending"`
	Inqueue   int64           `json:"inqueue"`
	Running   int64           `json:"running"`

	raw queueLists
}

// QueueResource is a queue's figures for one resource ("-": unset).
type QueueResource struct {
	Resource   string `json:"resource"`
	Allocated  string `json:"allocated"`
	Deserved   string `json:"deserved"`
	Capability string `json:"capability"`
	Guarantee  string `json:"guarantee"`
	// Share is allocated / deserved.
	Share string `json:"share"`
}

type queueLists struct {
	allocated, deserved, capability, guarantee v1.ResourceList
}

// errNoQueue says that no Queue of the name exists.
var errNoQueue = errors.New("no such queue")

// getQueue reads a Muster Queue of that name, else a Volcano Queue.
func (c Clients) getQueue(ctx context.Context, name string) (*Queue, error) {
	obj, err := c.Dynamic.Resource(musterQueues).Get(ctx, name, metav1.GetOptions{})
	if err == nil {
		return queueOf(musterQueueKind, obj), nil
	}
	if !apierrors.IsNotFound(err) {
		return nil, err
	}
	obj, err = c.Dynamic.Resource(volcanoQueues).Get(ctx, name, metav1.GetOptions{})
	if err == nil {
		return queueOf(volcanoQueueKind, obj), nil
	}
	if apierrors.IsNotFound(err) {
		return nil, fmt.Errorf("queue %q not found (neither a Muster nor a Volcano Queue): %w", name, errNoQueue)
	}
	return nil, err
}

func queueOf(kind string, obj *unstructured.Unstructured) *Queue {
	q := &Queue{Kind: kind, Name: obj.GetName()}
	q.Parent, _, _ = unstructured.NestedString(obj.Object, "spec", "parent")
	q.State, _, _ = unstructured.NestedString(obj.Object, "status", "state")
	q.State = orDash(q.State)
	q.Weight, _, _ = unstructured.NestedInt64(obj.Object, "spec", "weight")
	for _, f := range []struct {
		to   *int64
		name string
	}{{&q.Pending, "pending"}, {&q.Inqueue, "inqueue"}, {&q.Running, "running"}} {
		*f.to, _, _ = unstructured.NestedInt64(obj.Object, "status", f.name)
	}
	guaranteePath := []string{"spec", "guarantee"}
	if kind == volcanoQueueKind {
		guaranteePath = []string{"spec", "guarantee", "resource"}
	}
	q.raw = queueLists{
		allocated:  resourceMap(obj, "status", "allocated"),
		deserved:   resourceMap(obj, "status", "deserved"),
		capability: resourceMap(obj, "status", "realCapability"),
		guarantee:  resourceMap(obj, guaranteePath...),
	}
	if q.raw.deserved == nil {
		q.raw.deserved = resourceMap(obj, "spec", "deserved")
	}
	if q.raw.capability == nil {
		q.raw.capability = resourceMap(obj, "spec", "capability")
	}
	for _, name := range names(q.raw.allocated, q.raw.deserved, q.raw.capability, q.raw.guarantee) {
		q.Resources = append(q.Resources, q.resource(name))
	}
	return q
}

// resource is the queue's figures for name.
func (q *Queue) resource(name v1.ResourceName) QueueResource {
	r := QueueResource{Resource: string(name), Allocated: Qty(q.raw.allocated, name),
		Deserved: dash(q.raw.deserved, name), Capability: dash(q.raw.capability, name),
		Guarantee: dash(q.raw.guarantee, name), Share: "-"}
	if d, ok := q.raw.deserved[name]; ok && !d.IsZero() {
		a := q.raw.allocated[name]
		r.Share = fmt.Sprintf("%.2f", a.AsApproximateFloat64()/d.AsApproximateFloat64())
	}
	return r
}

// dash is Qty, with "-" for a resource the list does not set.
func dash(l v1.ResourceList, name v1.ResourceName) string {
	if _, ok := l[name]; !ok {
		return "-"
	}
	return Qty(l, name)
}

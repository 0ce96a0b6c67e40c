package queue

import (
	"sync"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/tools/cache"
	resourcehelper "k8s.io/component-helpers/resource"
)

// cluster sums, from the scheduler's own informers, the allocatable of
// ready schedulable nodes and the requests of every bound, unfinished pod.
type cluster struct {
	mu          sync.Mutex
	nodes       map[string]Vector
	pods        map[types.UID]Vector
	allocatable Vector
	used        Vector
}

func newCluster(f informers.SharedInformerFactory) (*cluster, error) {
	c := &cluster{nodes: map[string]Vector{}, pods: map[types.UID]Vector{}, allocatable: Vector{}, used: Vector{}}
	if _, err := f.Core().V1().Nodes().Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    c.setNode,
		UpdateFunc: func(_, o any) { c.setNode(o) },
		DeleteFunc: c.deleteNode,
	}); err != nil {
		return nil, err
	}
	if _, err := f.Core().V1().Pods().Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    c.setPod,
		UpdateFunc: func(_, o any) { c.setPod(o) },
		DeleteFunc: c.deletePod,
	}); err != nil {
		return nil, err
	}
	return c, nil
}

func (c *cluster) totals() (allocatable, used Vector) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.allocatable.Clone(), c.used.Clone()
}

func (c *cluster) setNode(obj any) {
	n, ok := obj.(*v1.Node)
	if !ok {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if old, ok := c.nodes[n.Name]; ok {
		c.allocatable.Sub(old)
		delete(c.nodes, n.Name)
	}
	if schedulable(n) {
		v := FromList(n.Status.Allocatable)
		c.nodes[n.Name] = v
		c.allocatable.Add(v)
	}
}

func (c *cluster) deleteNode(obj any) {
	if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = d.Obj
	}
	n, ok := obj.(*v1.Node)
	if !ok {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if old, ok := c.nodes[n.Name]; ok {
		c.allocatable.Sub(old)
		delete(c.nodes, n.Name)
	}
}

func schedulable(n *v1.Node) bool {
	if n.Spec.Unschedulable {
		return false
	}
	for _, c := range n.Status.Conditions {
		if c.Type == v1.NodeReady {
			return c.Status == v1.ConditionTrue
		}
	}
	return false
}

func (c *cluster) setPod(obj any) {
	p, ok := obj.(*v1.Pod)
	if !ok {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if old, ok := c.pods[p.UID]; ok {
		c.used.Sub(old)
		delete(c.pods, p.UID)
	}
	if p.Spec.NodeName != "" && p.Status.Phase != v1.PodSucceeded && p.Status.Phase != v1.PodFailed {
		v := FromList(resourcehelper.PodRequests(p, resourcehelper.PodResourcesOptions{}))
		c.pods[p.UID] = v
		c.used.Add(v)
	}
}

func (c *cluster) deletePod(obj any) {
	if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = d.Obj
	}
	p, ok := obj.(*v1.Pod)
	if !ok {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if old, ok := c.pods[p.UID]; ok {
		c.used.Sub(old)
		delete(c.pods, p.UID)
	}
}

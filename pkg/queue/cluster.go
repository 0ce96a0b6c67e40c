package queue

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/informers"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	resourcehelper "k8s.io/component-helpers/resource"

	"github.com/muster-sched/muster/pkg/gang"
)

// cluster sums, from the scheduler's own informers, the allocatable of
// ready schedulable nodes and the requests of every bound, unfinished pod,
// and of those in no gang and no queue (unmanaged) apart. Both sums come
// from one informer: a pod bound a moment ago is never counted as
// unmanaged because the gang state has not seen it yet.
type cluster struct {
	mu          sync.Mutex
	nodes       map[string]Vector
	pods        map[types.UID]boundPod
	allocatable Vector
	used        Vector
	unmanaged   Vector
	// seen holds every node the handler took in, schedulable or not.
	seen map[string]bool
	// latest is a copy of allocatable, read without the lock.
	latest atomic.Pointer[Vector]

	nodesSynced cache.InformerSynced
	nodeLister  corelisters.NodeLister
}

type boundPod struct {
	requests  Vector
	unmanaged bool
}

func newCluster(f informers.SharedInformerFactory) (*cluster, error) {
	c := &cluster{nodes: map[string]Vector{}, pods: map[types.UID]boundPod{}, allocatable: Vector{}, used: Vector{}, unmanaged: Vector{}, seen: map[string]bool{}}
	c.latest.Store(&Vector{})
	nodes := f.Core().V1().Nodes()
	c.nodesSynced, c.nodeLister = nodes.Informer().HasSynced, nodes.Lister()
	if _, err := nodes.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
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

func (c *cluster) totals() (allocatable, used, unmanaged Vector) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.allocatable.Clone(), c.used.Clone(), c.unmanaged.Clone()
}

// waitForNodes waits until the handler took in every node of the
// informer's first list, or ctx ends.
func (c *cluster) waitForNodes(ctx context.Context) {
	_ = wait.PollUntilContextCancel(ctx, 10*time.Millisecond, true, func(context.Context) (bool, error) {
		if !c.nodesSynced() {
			return false, nil
		}
		nodes, err := c.nodeLister.List(labels.Everything())
		if err != nil {
			return false, nil
		}
		c.mu.Lock()
		defer c.mu.Unlock()
		for _, n := range nodes {
			if !c.seen[n.Name] {
				return false, nil
			}
		}
		return true, nil
	})
}

// latestAllocatable is the allocatable of the schedulable nodes, without
// locking. Read only.
func (c *cluster) latestAllocatable() Vector { return *c.latest.Load() }

func (c *cluster) setNode(obj any) {
	n, ok := obj.(*v1.Node)
	if !ok {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	defer c.publishLocked()
	c.seen[n.Name] = true
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
	defer c.publishLocked()
	delete(c.seen, n.Name)
	if old, ok := c.nodes[n.Name]; ok {
		c.allocatable.Sub(old)
		delete(c.nodes, n.Name)
	}
}

func (c *cluster) publishLocked() {
	v := c.allocatable.Clone()
	c.latest.Store(&v)
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
	c.removePodLocked(p.UID)
	if p.Spec.NodeName != "" && p.Status.Phase != v1.PodSucceeded && p.Status.Phase != v1.PodFailed {
		_, managed := gang.KeyOf(p)
		b := boundPod{requests: FromList(resourcehelper.PodRequests(p, resourcehelper.PodResourcesOptions{})), unmanaged: !managed}
		c.pods[p.UID] = b
		c.used.Add(b.requests)
		if b.unmanaged {
			c.unmanaged.Add(b.requests)
		}
	}
}

func (c *cluster) removePodLocked(uid types.UID) {
	if old, ok := c.pods[uid]; ok {
		c.used.Sub(old.requests)
		if old.unmanaged {
			c.unmanaged.Sub(old.requests)
		}
		delete(c.pods, uid)
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
	c.removePodLocked(p.UID)
}

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

	"github.com/muster-sched/muster/pkg/gang"
	"github.com/muster-sched/muster/pkg/requests"
)

// cluster sums, from the scheduler's own informers, the allocatable of
// ready schedulable nodes (the counted nodes), and the requests of every
// bound, unfinished pod on them, and of those in no gang and no queue
// (unmanaged) apart. Both sums come from one informer: a pod bound a
// moment ago is never counted as unmanaged because the gang state has not
// seen it yet. A pod on a node that is not counted (deleted under it,
// cordoned, not ready) is in neither sum: its node's allocatable is not
// in the total it would be taken from.
type cluster struct {
	mu          sync.Mutex
	nodes       map[string]Vector
	pods        map[types.UID]boundPod
	allocatable sum
	used        sum
	unmanaged   sum
	// offNodes sums the requests of the managed pods bound to nodes that
	// are not counted: their queues hold them, and the total adds them.
	offNodes sum
	// on holds the requests of the pods bound to each node, counted or
	// not: what the sums gain and lose when the node is.
	on map[string]*nodePods
	// generation counts the changes of allocatable, unmanaged and
	// offNodes, from which the queues' total is computed.
	generation uint64
	// seen holds every node the handler took in, schedulable or not.
	seen map[string]bool
	// keyOf tells managed pods from the others.
	keyOf func(*v1.Pod) (gang.Key, bool)
	// latest is allocatable, read without the lock.
	latest atomic.Pointer[Vector]
	// freed is called, without c.mu, when room may have been made: a node
	// added or changed, a bound pod gone or finished.
	freed func()

	nodesSynced cache.InformerSynced
	nodeLister  corelisters.NodeLister
	podLister   corelisters.PodLister // the audit's (see audit)
}

type boundPod struct {
	node      string
	requests  Vector
	unmanaged bool
	// deleting: the pod is being deleted; its gang no longer counts it.
	deleting bool
	// version is the resourceVersion of the pod the record was made from.
	version string
}

// boundPodOf is the record of a pod: ok is false when the pod is not bound
// or has finished.
func (c *cluster) boundPodOf(p *v1.Pod) (b boundPod, ok bool) {
	if !isBound(p) {
		return boundPod{}, false
	}
	_, managed := c.keyOf(p)
	return boundPod{
		node: p.Spec.NodeName, requests: FromList(requests.Of(p)),
		unmanaged: !managed, deleting: p.DeletionTimestamp != nil, version: p.ResourceVersion,
	}, true
}

// isBound reports whether the pod is bound to a node and unfinished.
func isBound(p *v1.Pod) bool {
	return p.Spec.NodeName != "" && p.Status.Phase != v1.PodSucceeded && p.Status.Phase != v1.PodFailed
}

// same reports whether two records count the same.
func (b boundPod) same(o boundPod) bool {
	return b.node == o.node && b.unmanaged == o.unmanaged && b.deleting == o.deleting && b.requests.Equal(o.requests)
}

// nodePods sums the requests of a node's bound pods: all of them, those
// in no gang and no queue, and the managed ones not being deleted (what
// their gangs count).
type nodePods struct {
	used, unmanaged, managed Vector
	count                    int
}

// sum is a vector that totals hands out to be read without the lock: a
// change after that works on a copy (copy on write), so a refresh copies
// only the sums that changed since the last one.
type sum struct {
	v      Vector
	shared bool
}

// own returns the vector to be changed in place. c.mu held.
func (s *sum) own() Vector {
	if s.shared {
		s.v, s.shared = s.v.Clone(), false
	}
	return s.v
}

// share returns the vector, read only from then on. c.mu held.
func (s *sum) share() Vector {
	s.shared = true
	return s.v
}

func newCluster(f informers.SharedInformerFactory, gangs *gang.Manager, freed func()) (*cluster, error) {
	c := &cluster{
		nodes: map[string]Vector{}, pods: map[types.UID]boundPod{}, seen: map[string]bool{}, on: map[string]*nodePods{},
		allocatable: sum{v: Vector{}}, used: sum{v: Vector{}}, unmanaged: sum{v: Vector{}}, offNodes: sum{v: Vector{}},
		keyOf: gangs.KeyOf, freed: freed,
	}
	c.latest.Store(&Vector{})
	nodes := f.Core().V1().Nodes()
	c.nodesSynced, c.nodeLister = nodes.Informer().HasSynced, nodes.Lister()
	c.podLister = f.Core().V1().Pods().Lister()
	if _, err := nodes.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    c.setNode,
		UpdateFunc: func(_, o any) { c.setNode(o) },
		DeleteFunc: c.deleteNode,
	}); err != nil {
		return nil, err
	}
	// The scheduler's pods through the gang state's listener: one fewer
	// wake-up per pod event.
	gangs.AddPodHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    c.setPod,
		UpdateFunc: func(_, o any) { c.setPod(o) },
		DeleteFunc: c.deletePod,
	})
	return c, nil
}

func (c *cluster) totals() totals {
	c.mu.Lock()
	defer c.mu.Unlock()
	return totals{allocatable: c.allocatable.share(), used: c.used.share(), unmanaged: c.unmanaged.share(), offNodes: c.offNodes.share(), generation: c.generation}
}

// totals are the cluster's sums at one moment, read only.
type totals struct {
	allocatable, used, unmanaged, offNodes Vector
	// generation identifies allocatable, unmanaged and offNodes: equal generations,
	// equal vectors.
	generation uint64
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

func (c *cluster) setNode(obj any) {
	n, ok := obj.(*v1.Node)
	if !ok {
		return
	}
	var v Vector
	if schedulable(n) {
		v = FromList(n.Status.Allocatable)
	}
	if c.updateNode(n.Name, v) {
		c.freed()
	}
}

// updateNode records a node's allocatable (nil: not schedulable) and
// reports whether it offers room it did not before.
func (c *cluster) updateNode(name string, v Vector) (offers bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	defer c.publishLocked()
	c.seen[name] = true
	old, had := c.nodes[name]
	if had && v != nil && old.Equal(v) {
		return false // a status update that leaves allocatable alone: most
	}
	c.generation++
	if had {
		c.allocatable.own().Sub(old)
		c.countPodsLocked(name, -1)
		delete(c.nodes, name)
	}
	if v != nil {
		c.nodes[name] = v
		c.allocatable.own().Add(v)
		c.countPodsLocked(name, 1)
	}
	return v != nil
}

// countPodsLocked adds (sign 1) or takes out (−1) the requests of the
// node's pods from the sums, as the node enters or leaves the count.
// c.mu held.
func (c *cluster) countPodsLocked(node string, sign int64) {
	if np := c.on[node]; np != nil {
		addScaled(c.used.own(), np.used, sign)
		addScaled(c.unmanaged.own(), np.unmanaged, sign)
		addScaled(c.offNodes.own(), np.managed, -sign)
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
		c.generation++
		c.allocatable.own().Sub(old)
		c.countPodsLocked(n.Name, -1)
		delete(c.nodes, n.Name)
	}
}

func (c *cluster) publishLocked() {
	v := c.allocatable.share()
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
	b, bound := c.boundPodOf(p)
	c.mu.Lock()
	if old, ok := c.pods[p.UID]; ok && bound && old.same(b) {
		// A status update of a running pod: most pod events.
		if old.version != b.version {
			c.pods[p.UID] = b
		}
		c.mu.Unlock()
		return
	}
	freed := c.removePodLocked(p.UID) && !bound
	defer func() {
		c.mu.Unlock()
		if freed {
			c.freed()
		}
	}()
	if bound {
		c.pods[p.UID] = b
		c.placeLocked(b, 1)
	}
}

// placeLocked adds (sign 1) or takes out (−1) a bound pod's requests:
// from its node's, and from the sums while its node is counted. c.mu held.
func (c *cluster) placeLocked(b boundPod, sign int64) {
	c.addToNodeLocked(b, sign)
	if _, counted := c.nodes[b.node]; !counted {
		if !b.unmanaged && !b.deleting {
			c.generation++
			addScaled(c.offNodes.own(), b.requests, sign)
		}
		return
	}
	addScaled(c.used.own(), b.requests, sign)
	if b.unmanaged {
		c.generation++
		addScaled(c.unmanaged.own(), b.requests, sign)
	}
}

// addToNodeLocked adds (sign 1) or takes out (−1) a bound pod's requests
// from its node's sums. c.mu held.
func (c *cluster) addToNodeLocked(b boundPod, sign int64) {
	np := c.on[b.node]
	if np == nil {
		np = &nodePods{used: Vector{}, unmanaged: Vector{}, managed: Vector{}}
		c.on[b.node] = np
	}
	np.count += int(sign)
	addScaled(np.used, b.requests, sign)
	switch {
	case b.unmanaged:
		addScaled(np.unmanaged, b.requests, sign)
	case !b.deleting:
		addScaled(np.managed, b.requests, sign)
	}
	if np.count == 0 {
		delete(c.on, b.node)
	}
}

// removePodLocked forgets a bound pod and reports whether it was counted.
func (c *cluster) removePodLocked(uid types.UID) bool {
	old, ok := c.pods[uid]
	if !ok {
		return false
	}
	c.placeLocked(old, -1)
	delete(c.pods, uid)
	return true
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
	freed := c.removePodLocked(p.UID)
	c.mu.Unlock()
	if freed {
		c.freed()
	}
}

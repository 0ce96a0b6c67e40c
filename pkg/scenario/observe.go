package scenario

import (
	"context"
	"fmt"
	"math"
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"

	musterv1alpha1 "github.com/muster-sched/muster/apis/scheduling/v1alpha1"
	"github.com/muster-sched/muster/pkg/simulator"
)

// podRecord is what the observer saw of one pod.
type podRecord struct {
	uid      string
	node     string
	workload string
	queue    string
	gang     string
	requests []float64 // per observer dimension
	forever  bool      // no run time: bound is its final state
	created  time.Time
	bound    time.Time
	finished time.Time
	deleted  time.Time
	// refused is when the pod was first seen refused by the scheduler
	// (PodScheduled False, Unschedulable).
	refused   time.Time
	evicted   bool
	nominated bool
}

func (p *podRecord) running() bool {
	return !p.bound.IsZero() && p.finished.IsZero() && p.deleted.IsZero()
}

func (p *podRecord) pending() bool { return p.bound.IsZero() && p.deleted.IsZero() }

// done: the pod reached the end of its simulated life.
func (p *podRecord) done() bool {
	return !p.deleted.IsZero() || !p.finished.IsZero() || (p.forever && !p.bound.IsZero())
}

// gangRecord is one gang of the scenario (in every profile).
type gangRecord struct {
	name      string
	queue     string
	minMember int
	size      int
	members   []*podRecord
	// required and preferred are the gang's topology keys, if any.
	required, preferred string
}

// sample is the cluster's state at one moment.
type sample struct {
	at        time.Duration
	used      []float64          // allocated / total, per dimension
	shares    map[string]float64 // per queue: dominant share of allocated
	demands   map[string]float64 // per queue: dominant share of allocated + pending
	freeNodes map[string]int     // per node group: nodes with no running pod
	busyNodes int
	idle      []float64 // per dimension: room idle while a pod that fits waits
	free      FreeCapacity
	// working: some pod was running or pending.
	working bool
}

// observer watches the pods of one run and samples the cluster.
type observer struct {
	mu     sync.Mutex
	now    func() time.Time
	start  time.Time
	dims   []v1.ResourceName
	total  []float64
	groups map[string]string // node → node group
	// groupAllocatable is each node group's allocatable per dimension.
	groupAllocatable map[string][]float64
	order            []string       // node groups in scenario order
	counts           map[string]int // node group → nodes
	pods             map[string]*podRecord
	gangs            map[string]*gangRecord
	samples          []sample
	used             map[string]bool // nodes that ever ran a pod
	// nodeLabels are each node's labels, for topology placement.
	nodeLabels map[string]map[string]string
	// gpuNodes are the nodes with GPUs and gpuDim the GPUs' dimension
	// (−1 without), for FreeCapacity.
	gpuNodes []gpuNode
	gpuDim   int

	lastProgress time.Time
	created      int
	bound        int
	done         int
	evictions    int

	victimStores []cache.Store // victim Events, see watchVictims
}

func newObserver(s *Scenario, gangs map[string]*gangRecord) *observer {
	o := &observer{
		now:    time.Now,
		groups: map[string]string{}, groupAllocatable: map[string][]float64{},
		counts:     map[string]int{},
		pods:       map[string]*podRecord{},
		gangs:      gangs,
		used:       map[string]bool{},
		nodeLabels: map[string]map[string]string{},
		gpuDim:     -1,
	}
	totals := v1.ResourceList{}
	for _, g := range s.Cluster.Nodes {
		node, err := g.nodeShape().Node("x")
		if err != nil {
			continue // validated already
		}
		for name, q := range node.Status.Allocatable {
			if name == v1.ResourcePods {
				continue
			}
			for range g.Count {
				sum := totals[name]
				sum.Add(q)
				totals[name] = sum
			}
		}
		o.order = append(o.order, g.Name)
		o.counts[g.Name] = g.Count
		for i := range g.Count {
			o.groups[fmt.Sprintf("%s-%d", g.Name, i)] = g.Name
			if n, err := g.node(i); err == nil {
				o.nodeLabels[n.Name] = n.Labels
			}
		}
	}
	o.gpuNodes = s.gpuNodes()
	for _, name := range []v1.ResourceName{v1.ResourceCPU, v1.ResourceMemory, simulator.GPUResource} {
		if q, ok := totals[name]; ok && !q.IsZero() {
			o.dims = append(o.dims, name)
		}
	}
	extra := map[v1.ResourceName]bool{}
	for name, q := range totals {
		if name != v1.ResourceCPU && name != v1.ResourceMemory && name != simulator.GPUResource && !q.IsZero() {
			extra[name] = true
		}
	}
	for _, name := range resourceNames(extra) {
		o.dims = append(o.dims, v1.ResourceName(name))
	}
	for i, d := range o.dims {
		q := totals[d]
		o.total = append(o.total, q.AsApproximateFloat64())
		if d == simulator.GPUResource {
			o.gpuDim = i
		}
	}
	for _, g := range s.Cluster.Nodes {
		if node, err := g.nodeShape().Node("x"); err == nil {
			o.groupAllocatable[g.Name] = o.vector(node.Status.Allocatable)
		}
	}
	return o
}

// watch starts a pod informer feeding the observer and the victim Event
// informers of the namespaces; they stop with ctx or the returned function.
func (o *observer) watch(ctx context.Context, client kubernetes.Interface, namespaces []string) (func(), error) {
	stopVictims, err := o.watchVictims(ctx, client, namespaces)
	if err != nil {
		return nil, err
	}
	factory := informers.NewSharedInformerFactory(client, 0)
	inf := factory.Core().V1().Pods().Informer()
	if _, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { o.update(obj) },
		UpdateFunc: func(_, obj any) { o.update(obj) },
		DeleteFunc: o.delete,
	}); err != nil {
		stopVictims()
		return nil, err
	}
	factory.Start(ctx.Done())
	stop := func() {
		factory.Shutdown()
		stopVictims()
	}
	if !cache.WaitForCacheSync(ctx.Done(), inf.HasSynced) {
		stop()
		return nil, fmt.Errorf("pod informer did not sync")
	}
	return stop, nil
}

func (o *observer) vector(list v1.ResourceList) []float64 {
	out := make([]float64, len(o.dims))
	for i, d := range o.dims {
		if q, ok := list[d]; ok {
			out[i] = q.AsApproximateFloat64()
		}
	}
	return out
}

func (o *observer) update(obj any) {
	pod, ok := obj.(*v1.Pod)
	if !ok {
		return
	}
	now := o.now()
	o.mu.Lock()
	defer o.mu.Unlock()
	key := pod.Namespace + "/" + pod.Name
	p := o.pods[key]
	if p == nil {
		p = &podRecord{
			uid:      string(pod.UID),
			workload: pod.Labels[LabelWorkload],
			queue:    pod.Labels[musterv1alpha1.LabelQueue],
			gang:     pod.Labels[LabelGang],
			requests: o.vector(podRequests(pod)),
			created:  now,
		}
		_, hasRunTime := pod.Annotations[simulator.AnnotationRunTime]
		p.forever = !hasRunTime
		o.pods[key] = p
		o.created++
		o.lastProgress = now
		if g := o.gangs[pod.Namespace+"/"+p.gang]; g != nil && p.gang != "" {
			g.members = append(g.members, p)
		}
	}
	if pod.Status.NominatedNodeName != "" {
		p.nominated = true
	}
	if p.refused.IsZero() && refusedBy(pod) {
		p.refused = now
	}
	if pod.Spec.NodeName != "" && p.bound.IsZero() {
		p.bound, p.node = now, pod.Spec.NodeName
		o.used[p.node] = true
		o.bound++
		o.lastProgress = now
		if p.forever {
			o.done++
		}
	}
	if (pod.Status.Phase == v1.PodSucceeded || pod.Status.Phase == v1.PodFailed) && p.finished.IsZero() {
		p.finished = now
		o.lastProgress = now
		if !p.forever {
			o.done++
		}
	}
	if pod.DeletionTimestamp != nil && p.deleted.IsZero() {
		o.markDeleted(p, now)
	}
}

func (o *observer) delete(obj any) {
	if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = d.Obj
	}
	pod, ok := obj.(*v1.Pod)
	if !ok {
		return
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	if p := o.pods[pod.Namespace+"/"+pod.Name]; p != nil && p.deleted.IsZero() {
		o.markDeleted(p, o.now())
	}
}

// markDeleted records a deletion. The runner deletes no pod, so a running
// pod that goes away was evicted (preempted).
func (o *observer) markDeleted(p *podRecord, now time.Time) {
	wasDone := p.done()
	wasRunning := p.running()
	p.deleted = now
	o.lastProgress = now
	if !wasDone {
		o.done++
	}
	if !wasRunning {
		return
	}
	p.evicted = true
	o.evictions++
}

// sampleNow records the cluster's state.
func (o *observer) sampleNow() {
	now := o.now()
	o.mu.Lock()
	defer o.mu.Unlock()
	alloc := make([]float64, len(o.dims))
	queueAlloc := map[string][]float64{}
	queueDemand := map[string][]float64{}
	busy := map[string]bool{}
	gpusUsed := map[string]int{}
	working := false
	for _, p := range o.pods {
		running, pending := p.running(), p.pending()
		if !running && !pending {
			continue
		}
		working = true
		if running {
			busy[p.node] = true
			addTo(alloc, p.requests)
			if o.gpuDim >= 0 {
				gpusUsed[p.node] += int(math.Round(p.requests[o.gpuDim]))
			}
		}
		if p.queue == "" {
			continue
		}
		if queueAlloc[p.queue] == nil {
			queueAlloc[p.queue] = make([]float64, len(o.dims))
			queueDemand[p.queue] = make([]float64, len(o.dims))
		}
		if running {
			addTo(queueAlloc[p.queue], p.requests)
		}
		addTo(queueDemand[p.queue], p.requests)
	}
	s := sample{
		at:        now.Sub(o.start),
		used:      make([]float64, len(o.dims)),
		shares:    map[string]float64{},
		demands:   map[string]float64{},
		freeNodes: map[string]int{},
		busyNodes: len(busy),
		idle:      o.idleWhileWaiting(),
		free:      freeCapacity(o.gpuNodes, gpusUsed),
		working:   working,
	}
	for i := range o.dims {
		if o.total[i] > 0 {
			s.used[i] = alloc[i] / o.total[i]
		}
	}
	for q := range queueDemand {
		s.shares[q] = dominantShare(queueAlloc[q], o.total)
		s.demands[q] = dominantShare(queueDemand[q], o.total)
	}
	for _, g := range o.order {
		s.freeNodes[g] = o.counts[g]
	}
	for node := range busy {
		if g, ok := o.groups[node]; ok {
			s.freeNodes[g]--
		}
	}
	o.samples = append(o.samples, s)
}

// progress is (created, bound, done) pods and when anything last moved.
func (o *observer) progress() (created, bound, done int, last time.Time) {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.created, o.bound, o.done, o.lastProgress
}

func addTo(sum, v []float64) {
	for i := range v {
		sum[i] += v[i]
	}
}

// dominantShare is max over dimensions of v/total.
func dominantShare(v, total []float64) float64 {
	share := 0.0
	for i := range v {
		if total[i] > 0 && v[i]/total[i] > share {
			share = v[i] / total[i]
		}
	}
	return share
}

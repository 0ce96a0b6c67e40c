package queuepolicy

import (
	"context"
	"maps"
	"slices"
	"sync"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"
	podutil "k8s.io/kubernetes/pkg/api/v1/pod"

	"github.com/muster-sched/muster/pkg/batch"
	"github.com/muster-sched/muster/pkg/gang"
	"github.com/muster-sched/muster/pkg/queue"
)

// Records is what reclaim and preemption remember between scheduling
// cycles: the victims evicted for each gang, the victims whose deletion is
// in flight, and the members nominated to evicted room. There is one per
// scheduler process (plugins.Options builds it): every profile's queue
// plugin shares it, and none chooses a victim another is evicting.
type Records struct {
	// once attaches the records to the first plugin's gang state and
	// handle.
	once   sync.Once
	gangs  *gang.Manager
	state  *queue.State
	client kubernetes.Interface
	// handle is the first profile's: profiles share the scheduling queue
	// and the cycle's snapshot.
	handle fwk.Handle
	logger klog.Logger

	mu sync.Mutex
	// evicted holds, per gang, the victims evicted for it that may still
	// be terminating.
	evicted map[gang.Key][]victim
	// evicting holds the victims chosen and not yet seen deleted: the
	// deletions run off the scheduling cycle, and the next cycle must not
	// choose them again.
	evicting map[types.UID]unit
	// nominated holds, per gang, the requests of members nominated to room
	// evicted for them and not placed yet.
	nominated map[gang.Key]map[types.UID]queue.Vector
}

// NewRecords returns the records of a scheduler process, empty.
func NewRecords() *Records {
	return &Records{
		evicted: map[gang.Key][]victim{}, evicting: map[types.UID]unit{},
		nominated: map[gang.Key]map[types.UID]queue.Vector{},
	}
}

// attach binds the records to the process's batch state and the first
// profile's handle, and watches the pods for them: victims marked (by this
// replica or a leader before it) and victims deleted. Once this replica
// leads, it finishes the evictions a previous leader committed. Later
// calls do nothing.
func (r *Records) attach(ctx context.Context, b *batch.Batch, state *queue.State, h fwk.Handle) {
	r.once.Do(func() {
		r.gangs, r.state, r.handle, r.client, r.logger = b.Gangs, state, h, h.ClientSet(), klog.FromContext(ctx)
		// Through the gang state's listener, not one of its own: the
		// informer hands every pod event to each listener's goroutine in
		// turn, and at the start that slows the first list (see
		// gang.Manager.AddPodHandler).
		b.Gangs.AddPodHandler(cache.ResourceEventHandlerFuncs{
			AddFunc:    r.observe,
			UpdateFunc: func(_, obj any) { r.observe(obj) },
			DeleteFunc: r.victimDeleted,
		})
		b.OnLead(r.finish)
	})
}

// observe takes in a victim being deleted that carries Muster's mark: room
// coming for the gang the mark names. Victims this replica evicted are
// known already; the others were evicted by a leader before it, and their
// gang keeps its admission while it waits for them.
func (r *Records) observe(obj any) {
	pod, ok := obj.(*v1.Pod)
	if !ok || pod.DeletionTimestamp == nil || pod.Spec.NodeName == "" || podutil.IsPodTerminal(pod) {
		return
	}
	m, ok := markOf(pod)
	if !ok {
		return
	}
	key, ok := r.gangs.KeyOf(pod)
	if !ok {
		return
	}
	r.mu.Lock()
	if _, known := r.evicting[pod.UID]; known {
		r.mu.Unlock()
		return
	}
	st := r.gangs.Status(key)
	q := queue.QueueOf(&st)
	if snap := r.state.Last(); snap != nil {
		q = snap.QueueOf(&st)
	}
	r.evicting[pod.UID] = unit{gang: key, queue: q, pods: []*v1.Pod{pod}, usage: queue.FromList(podRequests(pod))}
	r.evicted[m.gang] = append(r.evicted[m.gang], victim{gang: key, uid: pod.UID, node: pod.Spec.NodeName})
	r.mu.Unlock()
	r.state.Restore(m.gang)
	r.logger.V(2).Info("Victim of an earlier eviction is terminating", "gang", m.gang, "victim", klog.KObj(pod), "eviction", m.eviction)
}

// finish deletes the marked victims of every committed eviction (one with
// a victim being deleted) that are not deleted yet: the leader that
// committed it stopped half way.
func (r *Records) finish(ctx context.Context) {
	pods, err := r.handle.SharedInformerFactory().Core().V1().Pods().Lister().List(labels.Everything())
	if err != nil {
		r.logger.Error(err, "Listing pods to finish earlier evictions")
		return
	}
	committed := map[int64]bool{}
	var marked []*v1.Pod
	for _, p := range pods {
		m, ok := markOf(p)
		if !ok || podutil.IsPodTerminal(p) {
			continue
		}
		if p.DeletionTimestamp != nil {
			committed[m.eviction] = true
		} else {
			marked = append(marked, p)
		}
	}
	for _, p := range marked {
		m, _ := markOf(p)
		if !committed[m.eviction] {
			continue
		}
		err := r.client.CoreV1().Pods(p.Namespace).Delete(ctx, p.Name, metav1.DeleteOptions{Preconditions: metav1.NewUIDPreconditions(string(p.UID))})
		if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
			r.logger.Error(err, "Finishing an earlier eviction failed", "gang", m.gang, "victim", klog.KObj(p), "eviction", m.eviction)
			continue
		}
		r.logger.Info("Finished an eviction a previous leader committed", "gang", m.gang, "victim", klog.KObj(p), "eviction", m.eviction)
	}
}

// prune forgets the gangs whose victims are all gone, from the informer
// and from this cycle's snapshot, so that the record stays as small as the
// evictions in flight. Once per cycle that evicts.
func (r *Records) prune() {
	r.mu.Lock()
	defer r.mu.Unlock()
	for key, vs := range r.evicted {
		if !slices.ContainsFunc(vs, func(v victim) bool { return r.gangs.HasMember(v.gang, v.uid) || r.onNode(v.node, v.uid) }) {
			delete(r.evicted, key)
		}
	}
}

// recordEvictions remembers the victims evicted for a gang until they are
// gone, so that its other members do not reclaim again for the same room
// before the accounting has seen it freed.
func (r *Records) recordEvictions(preemptor gang.Key, units []unit) {
	r.mu.Lock()
	defer r.mu.Unlock()
	var victims []victim
	for _, u := range units {
		for _, p := range u.pods {
			victims = append(victims, victim{gang: u.gang, uid: p.UID, node: p.Spec.NodeName})
			r.evicting[p.UID] = unit{gang: u.gang, queue: u.queue, pods: []*v1.Pod{p}, usage: queue.FromList(podRequests(p))}
		}
	}
	r.evicted[preemptor] = victims
}

// recordNomination remembers a member nominated to room evicted for it,
// until it is placed or gone; it forgets every other gang's members that
// were placed or went away since, so the record stays as small as the
// nominations in flight.
func (r *Records) recordNomination(key gang.Key, pod *v1.Pod) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for k := range r.nominated {
		r.nominatedLocked(k)
	}
	if r.nominated[key] == nil {
		r.nominated[key] = map[types.UID]queue.Vector{}
	}
	r.nominated[key][pod.UID] = queue.FromList(podRequests(pod))
}

// nominatedRequests sums the requests of the gang's nominated members that
// are still pending: the gang's allocation does not count them yet, and a
// DRF preemption that left them out would evict for room already promised.
func (r *Records) nominatedRequests(key gang.Key, except []*v1.Pod) queue.Vector {
	r.mu.Lock()
	defer r.mu.Unlock()
	sum := r.nominatedLocked(key)
	for _, p := range except { // counted as needed already
		if req, ok := r.nominated[key][p.UID]; ok {
			sum.Sub(req)
		}
	}
	return sum
}

// flight is what the victims being evicted take from their queues and
// gangs while the accounting still counts them.
type flight struct {
	byQueue map[string]queue.Vector
	byGang  map[gang.Key]queue.Vector
}

func (f flight) clone() flight {
	c := flight{byQueue: make(map[string]queue.Vector, len(f.byQueue)), byGang: make(map[gang.Key]queue.Vector, len(f.byGang))}
	for q, v := range f.byQueue {
		c.byQueue[q] = v.Clone()
	}
	for k, v := range f.byGang {
		c.byGang[k] = v.Clone()
	}
	return c
}

// add counts units chosen as victims.
func (f flight) add(us ...unit) {
	for _, u := range us {
		vectorAt(f.byQueue, u.queue).Add(u.usage)
		vectorAt(f.byGang, u.gang).Add(u.usage)
	}
}

// sub uncounts units that are no longer victims.
func (f flight) sub(u unit) {
	vectorAt(f.byQueue, u.queue).Sub(u.usage)
	vectorAt(f.byGang, u.gang).Sub(u.usage)
}

// inFlight sums the victims being evicted that the gang state still
// counts as allocated. Read it before the snapshot it is subtracted from:
// a victim whose deletion is seen in between is then subtracted from a
// snapshot that no longer counts it, and reclaim evicts too little (and
// is tried again), not more than the queue's surplus. One path is not
// covered: a victim a previous leader marked, recorded (observe) in
// between, is in neither reading but left out of the candidates.
func (r *Records) inFlight() flight {
	f := flight{byQueue: map[string]queue.Vector{}, byGang: map[gang.Key]queue.Vector{}}
	r.mu.Lock()
	defer r.mu.Unlock()
	for uid, v := range r.evicting {
		if !r.gangs.IsAllocated(v.gang, uid) {
			continue
		}
		vectorAt(f.byQueue, v.queue).Add(v.usage)
		vectorAt(f.byGang, v.gang).Add(v.usage)
	}
	return f
}

// nominatedLocked forgets the gang's nominated members that are no longer
// pending and sums the requests of the rest. r.mu held.
func (r *Records) nominatedLocked(key gang.Key) queue.Vector {
	sum := queue.Vector{}
	if len(r.nominated[key]) == 0 {
		return sum
	}
	pending := map[types.UID]bool{}
	for _, p := range r.gangs.PendingMembers(key) {
		pending[p.UID] = true
	}
	for uid, req := range r.nominated[key] {
		if !pending[uid] {
			delete(r.nominated[key], uid)
			continue
		}
		sum.Add(req)
	}
	if len(r.nominated[key]) == 0 {
		delete(r.nominated, key)
	}
	return sum
}

// forgetVictim drops a victim that was not evicted from the gang's record.
func (r *Records) forgetVictim(preemptor gang.Key, uid types.UID) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.evicted[preemptor] = slices.DeleteFunc(r.evicted[preemptor], func(v victim) bool { return v.uid == uid })
	delete(r.evicting, uid)
}

// victim is an evicted pod, by gang, UID and node.
type victim struct {
	gang gang.Key
	uid  types.UID
	node string
}

// evictingNow returns a copy of the victims in flight.
func (r *Records) evictingNow() map[types.UID]unit {
	r.mu.Lock()
	defer r.mu.Unlock()
	return maps.Clone(r.evicting)
}

// victimDeleted activates a gang's pending members once every victim
// evicted for it is gone: the room is free now, and waiting out the
// members' backoff would leave it idle. (Events reaching the scheduling
// queue while a member is in flight are replayed when it returns, so an
// activation that overtakes the scheduler's own cache update is not lost.)
func (r *Records) victimDeleted(obj any) {
	if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = d.Obj
	}
	pod, ok := obj.(*v1.Pod)
	if !ok {
		return
	}
	var freed []gang.Key
	r.mu.Lock()
	if _, ok := r.evicting[pod.UID]; !ok {
		r.mu.Unlock()
		return // not a victim in flight: most deletions
	}
	delete(r.evicting, pod.UID)
	// A victim is in flight until its deletion is seen (or it is
	// forgotten): a gang whose victims are none in flight is freed.
	for key, victims := range r.evicted {
		hit := slices.ContainsFunc(victims, func(v victim) bool { return v.uid == pod.UID })
		if hit && !slices.ContainsFunc(victims, func(v victim) bool { _, ok := r.evicting[v.uid]; return ok }) {
			freed = append(freed, key)
		}
	}
	r.mu.Unlock()
	for _, key := range freed {
		r.activate(key)
	}
}

// activate moves the gang's pending members to the active queue.
func (r *Records) activate(key gang.Key) {
	pending := r.gangs.PendingMembers(key)
	if len(pending) == 0 {
		return
	}
	pods := make(map[string]*v1.Pod, len(pending))
	for _, p := range pending {
		pods[p.Namespace+"/"+p.Name] = p
	}
	r.logger.V(4).Info("Activating the gang's pending members", "gang", key, "members", len(pods))
	r.handle.Activate(r.logger, pods)
}

// terminating counts the gang's victims still seen by the gang state (the
// queue accounting comes from it) or by this cycle's snapshot (the trial
// placement does): until both have let go, reclaiming again would evict
// for room already freed.
func (r *Records) terminating(preemptor gang.Key) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := r.terminatingLocked(r.evicted[preemptor])
	if n == 0 {
		delete(r.evicted, preemptor)
	}
	return n
}

// reclaimingFor reports whether victims evicted for a gang of queue q are
// still terminating: room is coming to the queue.
func (r *Records) reclaimingFor(q string, snap *queue.Snapshot) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	for preemptor, victims := range r.evicted {
		if g := snap.Gang(preemptor); g == nil || g.Queue != q {
			continue
		}
		if r.terminatingLocked(victims) > 0 {
			return true
		}
	}
	return false
}

// terminatingLocked counts the victims still seen by the gang state or by
// this cycle's snapshot. r.mu held.
func (r *Records) terminatingLocked(victims []victim) int {
	n := 0
	for _, v := range victims {
		if r.gangs.HasMember(v.gang, v.uid) || r.onNode(v.node, v.uid) {
			n++
		}
	}
	return n
}

// onNode reports whether this cycle's snapshot still has pod uid on node.
func (r *Records) onNode(node string, uid types.UID) bool {
	n, err := r.handle.SnapshotSharedLister().NodeInfos().Get(node)
	if err != nil {
		return false
	}
	for _, p := range n.GetPods() {
		if p.GetPod().UID == uid {
			return true
		}
	}
	return false
}

package queue

import (
	"context"
	"maps"
	"slices"
	"sync"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"

	"github.com/muster-sched/muster/pkg/gang"
	"github.com/muster-sched/muster/pkg/queue"
)

// records is what reclaim and preemption remember between scheduling
// cycles: the victims evicted for each gang, the victims whose deletion is
// in flight, and the members nominated to evicted room. There is one per
// queue accounting, so per process: every profile's queue plugin shares
// it, and none chooses a victim another is evicting.
type records struct {
	gangs *gang.Manager
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

// recordsByState holds the records of each queue accounting.
var recordsByState sync.Map // *queue.State → *records

// recordsFor returns the records shared by the plugins over state s, made
// on the first call, which also watches pod deletions for them; they are
// dropped when ctx (the scheduler's) ends.
func recordsFor(ctx context.Context, s *queue.State, gangs *gang.Manager, h fwk.Handle) *records {
	fresh := &records{
		gangs: gangs, handle: h, logger: klog.FromContext(ctx),
		evicted: map[gang.Key][]victim{}, evicting: map[types.UID]unit{},
		nominated: map[gang.Key]map[types.UID]queue.Vector{},
	}
	v, loaded := recordsByState.LoadOrStore(s, fresh)
	r := v.(*records)
	if loaded {
		return r
	}
	// Through the gang state's listener, not one of its own: the informer
	// hands every pod event to each listener's goroutine in turn, and at
	// the start that slows the first list (see gang.Manager.AddPodHandler).
	gangs.AddPodHandler(cache.ResourceEventHandlerFuncs{DeleteFunc: r.victimDeleted})
	go func() {
		<-ctx.Done()
		recordsByState.Delete(s)
	}()
	return r
}

// prune forgets the gangs whose victims are all gone, from the informer
// and from this cycle's snapshot, so that the record stays as small as the
// evictions in flight. Once per cycle that evicts.
func (r *records) prune() {
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
func (r *records) recordEvictions(preemptor gang.Key, units []unit) {
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
func (r *records) recordNomination(key gang.Key, pod *v1.Pod) {
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
func (r *records) nominatedRequests(key gang.Key, except []*v1.Pod) queue.Vector {
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

// inFlight sums, per queue and per gang, the victims being evicted that
// the gang state still counts as allocated.
func (r *records) inFlight() (map[string]queue.Vector, map[gang.Key]queue.Vector) {
	byQueue, byGang := map[string]queue.Vector{}, map[gang.Key]queue.Vector{}
	r.mu.Lock()
	defer r.mu.Unlock()
	for uid, v := range r.evicting {
		if !r.gangs.IsAllocated(v.gang, uid) {
			continue
		}
		vectorAt(byQueue, v.queue).Add(v.usage)
		vectorAt(byGang, v.gang).Add(v.usage)
	}
	return byQueue, byGang
}

// nominatedLocked forgets the gang's nominated members that are no longer
// pending and sums the requests of the rest. r.mu held.
func (r *records) nominatedLocked(key gang.Key) queue.Vector {
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
func (r *records) forgetVictim(preemptor gang.Key, uid types.UID) {
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
func (r *records) evictingNow() map[types.UID]unit {
	r.mu.Lock()
	defer r.mu.Unlock()
	return maps.Clone(r.evicting)
}

// victimDeleted activates a gang's pending members once every victim
// evicted for it is gone: the room is free now, and waiting out the
// members' backoff would leave it idle. (Events reaching the scheduling
// queue while a member is in flight are replayed when it returns, so an
// activation that overtakes the scheduler's own cache update is not lost.)
func (r *records) victimDeleted(obj any) {
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
func (r *records) activate(key gang.Key) {
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
func (r *records) terminating(preemptor gang.Key) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := 0
	for _, v := range r.evicted[preemptor] {
		if r.gangs.HasMember(v.gang, v.uid) || r.onNode(v.node, v.uid) {
			n++
		}
	}
	if n == 0 {
		delete(r.evicted, preemptor)
	}
	return n
}

// onNode reports whether this cycle's snapshot still has pod uid on node.
func (r *records) onNode(node string, uid types.UID) bool {
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

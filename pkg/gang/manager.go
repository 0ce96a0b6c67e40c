package gang

import (
	"cmp"
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	v1 "k8s.io/api/core/v1"
	schedulingv1beta1 "k8s.io/api/scheduling/v1beta1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/types"
	quotav1 "k8s.io/apiserver/pkg/quota/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	resourcehelper "k8s.io/component-helpers/resource"
	corev1helpers "k8s.io/component-helpers/scheduling/corev1"
	podutil "k8s.io/kubernetes/pkg/api/v1/pod"
	spv1alpha1 "sigs.k8s.io/scheduler-plugins/apis/scheduling/v1alpha1"
	spclient "sigs.k8s.io/scheduler-plugins/pkg/generated/clientset/versioned"
	spinformers "sigs.k8s.io/scheduler-plugins/pkg/generated/informers/externalversions"
	splisters "sigs.k8s.io/scheduler-plugins/pkg/generated/listers/scheduling/v1alpha1"

	"github.com/muster-sched/muster/apis/scheduling/v1alpha1"
	musterclient "github.com/muster-sched/muster/pkg/generated/clientset/versioned"
	musterinformers "github.com/muster-sched/muster/pkg/generated/informers/externalversions"
	musterlisters "github.com/muster-sched/muster/pkg/generated/listers/scheduling/v1alpha1"
)

// PlanTTL bounds how long a placement plan is followed. Members of a gang
// are adjacent in the scheduling queue, so a plan is normally used up in
// milliseconds; one that is not (a member stuck in backoff) is recomputed.
const PlanTTL = 10 * time.Second

// Manager holds the state of every gang of the cluster. It is shared by all
// profiles of a scheduler process and safe for concurrent use.
type Manager struct {
	mu     sync.RWMutex
	groups map[Key]*group
	// memberOf indexes every member by UID: a pod whose labels moved it
	// to another gang, or out of all, leaves the gang it was in.
	memberOf map[types.UID]Key

	pgLister musterlisters.PodGroupLister
	spLister splisters.PodGroupLister // nil: scheduler-plugins' CRD absent
	// upStore holds the scheduling.k8s.io PodGroups; nil when Muster does
	// not schedule them (see Clients.UpstreamPodGroups).
	upStore cache.Store
	// pgStore and spStore are the listers' stores, read by key: a lister's
	// Get builds a NotFound error for every label-only gang, and QueueSort
	// looks a gang's PodGroup up on every comparison.
	pgStore, spStore cache.Store
	// podStores are the stores of the pod informers: the scheduler's (live
	// pods) and the Manager's of terminated pods. A pod leaves the first
	// when it finishes, and may be in the second already: only its absence
	// from both deletes it.
	podStores  []cache.Store
	podsSynced cache.InformerSynced
	// podHandlers are told of the scheduler's pod events on the Manager's
	// listener (AddPodHandler).
	podHandlersMu sync.RWMutex
	podHandlers   []cache.ResourceEventHandler
	listenersMu   sync.Mutex
	listeners     []listener
	onWake        []func(Key, []*v1.Pod)
	// refused holds the gangs that were invalid when a member was
	// observed: their members wait at PreEnqueue until the gang is valid.
	refused map[Key]bool
}

type group struct {
	members map[types.UID]*v1.Pod
	// reserved holds members this scheduler reserved a node for and has not
	// yet seen bound, by UID.
	reserved map[types.UID]string
	// requests caches each member's resource requests.
	requests map[types.UID]v1.ResourceList
	plan     *Plan
	failure  failure
	// note is why another plugin (a queue) keeps the gang waiting.
	note string
	// created is the earliest creation time of any member.
	created time.Time
	// status caches the gang's Status; every change of what it is computed
	// from (members, reservations, failure, note, PodGroup) clears it, with
	// m.mu held for writing. Readers holding m.mu for reading may fill it.
	status atomic.Pointer[Status]
	// ranks caches, for each pending member, its index in PendingMembers'
	// order and its requests: QueueSort reads both; cleared with status.
	ranks atomic.Pointer[map[types.UID]rank]
	// createdAt caches the gang's creation time (creationTime), which
	// QueueSort reads for both pods of every comparison; cleared with status.
	createdAt atomic.Pointer[time.Time]
	// stamp is handed out with positions read since the last change; it
	// goes stale with the next.
	stamp atomic.Pointer[Stamp]
}

// changed drops the cached status, ranks and creation time, and stales the
// positions handed out. m.mu held for writing.
func (g *group) changed() {
	g.status.Store(nil)
	g.ranks.Store(nil)
	g.createdAt.Store(nil)
	if s := g.stamp.Swap(nil); s != nil {
		s.stale.Store(true)
	}
}

// Stamp tells whether a Position still says what the gang state would say
// now: it goes stale with the next change of the gang (members, their
// reservations, plan, failure, PodGroup).
type Stamp struct{ stale atomic.Bool }

// Current reports whether the gang has not changed since; a nil Stamp
// (a gang not known yet) never is.
func (s *Stamp) Current() bool { return s != nil && !s.stale.Load() }

// Plan is where a gang's pending members go: decided for the whole gang on
// one snapshot before any of them reserves.
type Plan struct {
	Nodes   map[types.UID]string
	Created time.Time
}

type failure struct {
	message string
	at      time.Time
}

// Clients are what the Manager watches.
type Clients struct {
	Kube   kubernetes.Interface
	Muster musterclient.Interface
	// SchedulerPlugins is nil when scheduler-plugins' PodGroup CRD is not
	// installed.
	SchedulerPlugins spclient.Interface
	// UpstreamPodGroups says that the API serves scheduling.k8s.io/v1beta1
	// PodGroups and this scheduler leaves their pods to Muster (its
	// GenericWorkload gate is off): Muster watches them through Kube.
	UpstreamPodGroups bool
	// Pods is the scheduler's informer of live (not terminated) pods. The
	// Manager takes every gang's live members from it, so that the process
	// watches and decodes each pod once; the scheduler starts it.
	Pods cache.SharedIndexInformer
}

// terminated selects the pods that finished: the scheduler's informer drops
// them, and a gang counts its succeeded and failed members.
var terminated = fields.AndSelectors(
	fields.OneTermNotEqualSelector("status.phase", string(v1.PodPending)),
	fields.OneTermNotEqualSelector("status.phase", string(v1.PodRunning)),
	fields.OneTermNotEqualSelector("status.phase", string(v1.PodUnknown)),
).String()

// finishGrace is how long a bound member that left the live pods without
// being deleted (it finished, most likely) keeps its last state, waiting
// for the watch of terminated pods to deliver it finished: the two watches
// are not ordered, and a gang must not lose a member in between.
const finishGrace = time.Second

// NewManager builds a Manager and starts its own informers (PodGroups, and
// managed pods once terminated); they stop when ctx ends. It returns once
// they have synced. HasSynced reports when c.Pods, started by the
// scheduler, has delivered every live pod too.
func NewManager(ctx context.Context, c Clients) (*Manager, error) {
	m := &Manager{groups: map[Key]*group{}, memberOf: map[types.UID]Key{}, refused: map[Key]bool{}}
	handler := cache.ResourceEventHandlerFuncs{
		AddFunc:    m.updatePod,
		UpdateFunc: func(_, obj any) { m.updatePod(obj) },
		DeleteFunc: m.unlistPod,
	}
	reg, err := c.Pods.AddEventHandler(schedulerPods{m, handler})
	if err != nil {
		return nil, err
	}
	m.podsSynced = reg.HasSynced
	m.podStores = append(m.podStores, c.Pods.GetStore())

	// One watch of every terminated pod, trimmed to a stub unless it is
	// a gang's: a label selector cannot say "any of" the label families,
	// and the API server wakes each watcher of pods for every pod event,
	// so one watch per family would cost that four times over.
	// Terminated pods change once: the watch itself carries few events.
	f := informers.NewSharedInformerFactoryWithOptions(c.Kube, 0, informers.WithTweakListOptions(func(o *metav1.ListOptions) {
		o.FieldSelector = terminated
	}), informers.WithTransform(m.trimTerminated))
	terminatedPods := f.Core().V1().Pods().Informer()
	if _, err := terminatedPods.AddEventHandler(handler); err != nil {
		return nil, err
	}
	synced := []cache.InformerSynced{terminatedPods.HasSynced}
	m.podStores = append(m.podStores, terminatedPods.GetStore())
	f.Start(ctx.Done())

	mf := musterinformers.NewSharedInformerFactory(c.Muster, 0)
	pgInformer := mf.Scheduling().V1alpha1().PodGroups()
	m.pgLister = pgInformer.Lister()
	m.pgStore = pgInformer.Informer().GetStore()
	if _, err := pgInformer.Informer().AddEventHandler(m.groupHandler(FamilyMuster)); err != nil {
		return nil, err
	}
	synced = append(synced, pgInformer.Informer().HasSynced)
	mf.Start(ctx.Done())

	if c.UpstreamPodGroups {
		upInformer := informers.NewSharedInformerFactory(c.Kube, 0).Scheduling().V1beta1().PodGroups().Informer()
		m.upStore = upInformer.GetStore()
		if _, err := upInformer.AddEventHandler(m.upstreamHandler()); err != nil {
			return nil, err
		}
		synced = append(synced, upInformer.HasSynced)
		go upInformer.RunWithContext(ctx)
	}

	if c.SchedulerPlugins != nil {
		sf := spinformers.NewSharedInformerFactory(c.SchedulerPlugins, 0)
		spInformer := sf.Scheduling().V1alpha1().PodGroups()
		m.spLister = spInformer.Lister()
		m.spStore = spInformer.Informer().GetStore()
		if _, err := spInformer.Informer().AddEventHandler(m.groupHandler(FamilySchedulerPlugins)); err != nil {
			return nil, err
		}
		synced = append(synced, spInformer.Informer().HasSynced)
		sf.Start(ctx.Done())
	}

	syncCtx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	if !cache.WaitForCacheSync(syncCtx.Done(), synced...) {
		return nil, fmt.Errorf("gang informers did not sync")
	}
	return m, nil
}

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

// trimTerminated trims a terminated pod to what the Manager reads: for a
// pod in no gang, its identity alone (the Manager only learns that it is
// in none); for a member, all but its managed fields, as the scheduler's
// own pod informer does. Less memory, less GC.
func (m *Manager) trimTerminated(obj any) (any, error) {
	pod, ok := obj.(*v1.Pod)
	if !ok {
		return obj, nil
	}
	if _, managed := m.KeyOf(pod); !managed {
		return &v1.Pod{ObjectMeta: metav1.ObjectMeta{
			Namespace: pod.Namespace, Name: pod.Name, UID: pod.UID, ResourceVersion: pod.ResourceVersion,
		}}, nil
	}
	pod.ManagedFields = nil
	return pod, nil
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
	valid := m.refused[key] && m.statusLocked(key).Invalid == ""
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
			}
			m.mu.Unlock()
			m.notify(key, releaseChange)
		}
	}
	return cache.ResourceEventHandlerFuncs{
		AddFunc: notify, UpdateFunc: func(_, o any) { notify(o) }, DeleteFunc: notify,
	}
}

// Observe takes in a pod the scheduler is about to consider. The
// scheduler's informer may be ahead of the Manager's; its copy of the pod
// is at least as fresh, and the pod must count in its gang and queue when
// it is checked. The Manager's informer delivers the same or newer
// versions after.
//
// Change listeners are told at once when the pod is new to the gang state
// (the queue accounting must count the pod before it is checked); the
// Manager's informer has told them of a version it delivered first.
// OnWake listeners on another goroutine: the
// scheduling queue calls PreEnqueue with its lock held, and they activate
// pods in it.
//
// It returns the gang's status with the pod in it. A gang invalid now is
// remembered, so that its refused members are woken once it turns valid.
func (m *Manager) Observe(pod *v1.Pod) (Key, Status, bool) {
	key, ok, c := m.upsert(pod)
	if !ok {
		return Key{}, Status{}, false
	}
	m.mu.Lock()
	s := m.statusLocked(key)
	if s.Invalid != "" {
		m.refused[key] = true
	}
	m.mu.Unlock()
	m.notifyChange(key, c)
	return key, s, true
}

func (m *Manager) updatePod(obj any) {
	pod, ok := obj.(*v1.Pod)
	if !ok {
		return
	}
	if _, ok := m.KeyOf(pod); !ok && !m.isMember(pod.UID) {
		return // unmanaged: most pods of a cluster
	}
	if key, ok, c := m.upsert(pod); ok && c != unchanged {
		m.notify(key, c)
	}
}

func (m *Manager) isMember(uid types.UID) bool {
	m.mu.RLock()
	defer m.mu.RUnlock()
	_, ok := m.memberOf[uid]
	return ok
}

// upsert records the pod as a member of its gang and returns the gang,
// and what changed: nothing when it holds this version of the pod already.
// A pod that left every gang is removed instead.
func (m *Manager) upsert(pod *v1.Pod) (key Key, ok bool, c change) {
	key, ok = m.KeyOf(pod)
	if !ok {
		// The label was removed: the pod left its gang.
		m.deletePod(pod)
		return Key{}, false, unchanged
	}
	m.mu.Lock()
	if prev, ok := m.memberOf[pod.UID]; ok && prev != key {
		// Relabelled into another gang: it leaves the one it was in,
		// which may turn valid (the pod disagreed with its other members).
		// Waking is not done here: Observe runs under the scheduling
		// queue's lock. Relabels are rare.
		m.removeLocked(prev, pod.UID)
		defer func() {
			m.notifyChange(prev, releaseChange)
			go m.checkValid(prev)
		}()
	}
	m.memberOf[pod.UID] = key
	g := m.groupLocked(key)
	old := g.members[pod.UID]
	if old != nil && old.ResourceVersion == pod.ResourceVersion && pod.ResourceVersion != "" {
		// The same version again: the informer's, then Observe's (or
		// the other way round), or a relist.
		m.mu.Unlock()
		return key, true, unchanged
	}
	g.changed()
	requests := resourcehelper.PodRequests(pod, resourcehelper.PodResourcesOptions{})
	c = statusChange
	switch {
	case old != nil && counts(old) && !counts(pod):
		c = releaseChange
	case old == nil || usageMoved(old, pod, g.requests[pod.UID], requests):
		c = usageChange
	}
	g.members[pod.UID] = pod
	g.requests[pod.UID] = requests
	if pod.Spec.NodeName != "" {
		delete(g.reserved, pod.UID)
	}
	if c := pod.CreationTimestamp.Time; g.created.IsZero() || c.Before(g.created) {
		g.created = c
	}
	m.mu.Unlock()
	return key, true, c
}

// usageMoved reports whether a member's update from old to pod (requests
// oldReq to req) can change its gang's usage (see usageChange): anything
// computeStatus reads but the Running phase.
func usageMoved(old, pod *v1.Pod, oldReq, req v1.ResourceList) bool {
	return old.Spec.NodeName != pod.Spec.NodeName ||
		(old.DeletionTimestamp == nil) != (pod.DeletionTimestamp == nil) ||
		finishedAs(old) != finishedAs(pod) ||
		corev1helpers.PodPriority(old) != corev1helpers.PodPriority(pod) ||
		RoleOf(old) != RoleOf(pod) ||
		!maps.Equal(old.Labels, pod.Labels) ||
		!quotav1.Equals(oldReq, req)
}

// counts reports whether a member holds or asks for anything: it has not
// finished and is not being deleted.
func counts(pod *v1.Pod) bool { return pod.DeletionTimestamp == nil && finishedAs(pod) == "" }

// finishedAs is the phase of a finished pod, "" for a live one.
func finishedAs(pod *v1.Pod) v1.PodPhase {
	if p := pod.Status.Phase; p == v1.PodSucceeded || p == v1.PodFailed {
		return p
	}
	return ""
}

// unlistPod handles a pod that left one of the Manager's informers:
// deleted, finished (it leaves the scheduler's live pods) or relabelled. A
// copy another informer lists is the pod as it is now.
func (m *Manager) unlistPod(obj any) {
	if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = d.Obj
	}
	pod, ok := obj.(*v1.Pod)
	if !ok || !m.isMember(pod.UID) || m.relist(pod) {
		return
	}
	if pod.DeletionTimestamp == nil && pod.Spec.NodeName != "" && !podutil.IsPodTerminal(pod) {
		// A running pod gone without being deleted first has finished,
		// unless it was force-deleted: its terminated copy is on its way.
		time.AfterFunc(finishGrace, func() {
			if !m.relist(pod) {
				m.deletePod(pod)
			}
		})
		return
	}
	m.deletePod(pod)
}

// relist takes in the copy of the pod that one of the Manager's informers
// lists, and reports whether there was one.
func (m *Manager) relist(pod *v1.Pod) bool {
	for _, store := range m.podStores {
		if o, exists, _ := store.Get(pod); exists {
			if p, ok := o.(*v1.Pod); ok && p.UID == pod.UID {
				m.updatePod(p)
				return true
			}
		}
	}
	return false
}

// HasSynced reports whether the Manager has taken in every pod the
// scheduler's informer listed first.
func (m *Manager) HasSynced() bool { return m.podsSynced() }

// deletePod removes the pod from the gang it is a member of.
func (m *Manager) deletePod(pod *v1.Pod) {
	m.mu.Lock()
	key, ok := m.memberOf[pod.UID]
	if ok {
		m.removeLocked(key, pod.UID)
	}
	m.mu.Unlock()
	if ok {
		m.notify(key, releaseChange)
	}
}

// removeLocked removes member uid from the gang key, and the gang once it
// has no member left. m.mu held for writing.
func (m *Manager) removeLocked(key Key, uid types.UID) {
	delete(m.memberOf, uid)
	g := m.groups[key]
	if g == nil {
		return
	}
	g.changed()
	delete(g.members, uid)
	delete(g.reserved, uid)
	delete(g.requests, uid)
	if g.plan != nil {
		if _, planned := g.plan.Nodes[uid]; planned {
			g.plan = nil
		}
	}
	if len(g.members) == 0 {
		delete(m.groups, key)
		delete(m.refused, key)
	}
}

func (m *Manager) groupLocked(key Key) *group {
	g := m.groups[key]
	if g == nil {
		g = &group{members: map[types.UID]*v1.Pod{}, reserved: map[types.UID]string{}, requests: map[types.UID]v1.ResourceList{}}
		m.groups[key] = g
	}
	return g
}

// Status returns the gang's current status.
func (m *Manager) Status(key Key) Status {
	m.mu.RLock()
	defer m.mu.RUnlock()
	return m.statusLocked(key)
}

// statusLocked returns the gang's status, from the cache when it is fresh.
// Its maps and lists are shared by every caller: read only. m.mu held, for
// reading at least.
func (m *Manager) statusLocked(key Key) Status { return *m.statusRefLocked(key, m.groups[key]) }

// statusRefLocked is statusLocked of the gang key, whose group is g (nil:
// not known), without the copy: the cached status itself, read only. m.mu
// held, for reading at least.
func (m *Manager) statusRefLocked(key Key, g *group) *Status {
	if g == nil {
		s := m.computeStatusLocked(key, &group{})
		return &s
	}
	if s := g.status.Load(); s != nil {
		return s
	}
	s := m.computeStatusLocked(key, g)
	g.status.Store(&s)
	return &s
}

func (m *Manager) computeStatusLocked(key Key, g *group) Status {
	var live []*v1.Pod
	for _, p := range g.members {
		if p.Status.Phase != v1.PodFailed && p.DeletionTimestamp == nil {
			live = append(live, p)
		}
	}
	src := m.sourceObjects(key)
	spec, err := resolveSpec(key, live, src)
	s := computeStatus(key, spec, err, g.members, g.reserved, g.requests)
	s.Waiting = g.failure.message
	s.Tried = g.failure.message != "" || g.plan != nil
	if s.Waiting == "" {
		s.Waiting = g.note
	}
	return s
}

// sourceObjects returns the PodGroup object that may define the gang.
func (m *Manager) sourceObjects(key Key) sources {
	src := sources{spInstalled: m.spLister != nil}
	switch key.Family {
	case FamilyMuster:
		src.muster = lookup[*v1alpha1.PodGroup](m.pgStore, key)
	case FamilySchedulerPlugins:
		src.schedulerPlugins = lookup[*spv1alpha1.PodGroup](m.spStore, key)
	case FamilyUpstream:
		src.upstream = lookup[*schedulingv1beta1.PodGroup](m.upStore, key)
	}
	return src
}

// lookup returns the object of the gang's name in store (nil: none, or
// no store).
func lookup[T *v1alpha1.PodGroup | *spv1alpha1.PodGroup | *schedulingv1beta1.PodGroup](store cache.Store, key Key) T {
	if store == nil {
		return nil
	}
	obj, exists, _ := store.GetByKey(key.Namespace + "/" + key.Name)
	if !exists {
		return nil
	}
	t, _ := obj.(T)
	return t
}

// Statuses returns the status of every gang, each consistent on its own.
// The lock is taken gang by gang: computing every status at once would
// hold up the scheduling cycle's Reserve, which writes, for as long.
func (m *Manager) Statuses() []Status {
	keys := m.Keys()
	out := make([]Status, 0, len(keys))
	for _, k := range keys {
		out = append(out, m.Status(k))
	}
	return out
}

// Keys returns the keys of every gang with members or a PodGroup.
func (m *Manager) Keys() []Key {
	m.mu.RLock()
	defer m.mu.RUnlock()
	keys := make([]Key, 0, len(m.groups))
	for k := range m.groups {
		keys = append(keys, k)
	}
	return keys
}

// CreationTime orders gangs in the scheduling queue: the PodGroup's creation
// time, else the earliest member's.
func (m *Manager) CreationTime(key Key) time.Time {
	m.mu.RLock()
	defer m.mu.RUnlock()
	return m.creationTimeLocked(key, m.groups[key])
}

// creationTimeLocked is CreationTime of the gang key, whose group is g
// (nil: not known), from g's cache when it is fresh. m.mu held, for
// reading at least.
func (m *Manager) creationTimeLocked(key Key, g *group) time.Time {
	if g == nil {
		return creationTime(m.podGroup(key), nil)
	}
	if t := g.createdAt.Load(); t != nil {
		return *t
	}
	t := creationTime(m.podGroup(key), g)
	g.createdAt.Store(&t)
	return t
}

// creationTime is the PodGroup's creation time, else the earliest
// member's (zero for a gang not known yet).
func creationTime(pg *v1alpha1.PodGroup, g *group) time.Time {
	switch {
	case pg != nil:
		return pg.CreationTimestamp.Time
	case g != nil:
		return g.created
	}
	return time.Time{}
}

// podGroup is the Muster PodGroup of a gang of that family, if it exists.
func (m *Manager) podGroup(key Key) *v1alpha1.PodGroup {
	if key.Family != FamilyMuster {
		return nil
	}
	return lookup[*v1alpha1.PodGroup](m.pgStore, key)
}

// Reserve records that this scheduler reserved node for the member uid.
// Idempotent; Unreserve undoes it.
func (m *Manager) Reserve(key Key, uid types.UID, node string) {
	m.mu.Lock()
	g := m.groupLocked(key)
	g.changed()
	g.reserved[uid] = node
	ready := g.plan != nil && planUsedUp(g)
	if ready {
		g.plan = nil
	}
	m.mu.Unlock()
	m.notify(key, usageChange)
	if ready {
		// Extras that arrived while the plan was carried out were parked
		// behind it; they schedule one by one now. Not on this goroutine:
		// Reserve runs in a scheduling cycle, and waking takes the
		// scheduling queue's lock.
		go m.wake(key)
	}
}

func planUsedUp(g *group) bool {
	for uid := range g.plan.Nodes {
		if _, ok := g.reserved[uid]; !ok {
			if p := g.members[uid]; p == nil || p.Spec.NodeName == "" {
				return false
			}
		}
	}
	return true
}

// Unreserve forgets the reservation of member uid and drops the gang's plan:
// the gang will be placed afresh.
func (m *Manager) Unreserve(key Key, uid types.UID) {
	m.mu.Lock()
	if g := m.groups[key]; g != nil {
		g.changed()
		delete(g.reserved, uid)
		g.plan = nil
	}
	m.mu.Unlock()
	m.notify(key, releaseChange)
}

// PlannedNode returns the node the gang's plan gives member uid, if a live
// plan does.
func (m *Manager) PlannedNode(key Key, uid types.UID, now time.Time) (node string, planned, hasPlan bool) {
	m.mu.RLock()
	defer m.mu.RUnlock()
	g := m.groups[key]
	if g == nil || g.plan == nil || now.Sub(g.plan.Created) > PlanTTL {
		return "", false, false
	}
	node, planned = g.plan.Nodes[uid]
	return node, planned, true
}

// Placing reports whether the gang is being placed: it has a live plan
// whose members are not all reserved yet.
func (m *Manager) Placing(key Key, now time.Time) bool {
	m.mu.RLock()
	defer m.mu.RUnlock()
	return m.groups[key].placing(now)
}

// placing reports whether g (nil: a gang not known) has a placement plan
// younger than PlanTTL at now.
func (g *group) placing(now time.Time) bool {
	return g != nil && g.plan != nil && now.Sub(g.plan.Created) <= PlanTTL
}

// SetPlan records where the gang's pending members go.
func (m *Manager) SetPlan(key Key, nodes map[types.UID]string, now time.Time) {
	m.mu.Lock()
	g := m.groupLocked(key)
	g.changed()
	g.plan = &Plan{Nodes: nodes, Created: now}
	g.failure = failure{}
	g.note = ""
	m.mu.Unlock()
	m.notify(key, statusChange)
}

// DropPlan forgets the gang's plan.
func (m *Manager) DropPlan(key Key) {
	m.mu.Lock()
	if g := m.groups[key]; g != nil && g.plan != nil {
		g.changed()
		g.plan = nil
	}
	m.mu.Unlock()
}

// RecordFailure records why the gang could not be placed on its last try.
func (m *Manager) RecordFailure(key Key, message string, now time.Time) {
	m.mu.Lock()
	g := m.groupLocked(key)
	changed := g.failure.message != message
	g.changed()
	g.failure = failure{message: message, at: now}
	g.plan = nil
	m.mu.Unlock()
	if changed {
		m.notify(key, statusChange)
	}
}

// SetWaiting records why something other than placement keeps the gang
// waiting (its queue did not admit it); "" clears it.
func (m *Manager) SetWaiting(key Key, why string) {
	m.mu.Lock()
	g := m.groups[key]
	changed := g != nil && g.note != why
	if changed {
		g.changed()
		g.note = why
		if why != "" {
			g.failure = failure{}
		}
	}
	m.mu.Unlock()
	if changed {
		m.notify(key, statusChange)
	}
}

// QueueWaiters returns the first pending member of every gang that waits
// for its queue (SetWaiting): trying that member again tries the gang's
// admission, and a plan made then activates its siblings.
func (m *Manager) QueueWaiters() []*v1.Pod {
	m.mu.RLock()
	defer m.mu.RUnlock()
	var out []*v1.Pod
	for _, g := range m.groups {
		if g.note == "" {
			continue
		}
		if pending := g.pendingLocked(); len(pending) > 0 {
			out = append(out, pending[0])
		}
	}
	return out
}

// BoundMembers returns the live members bound to a node, newest first.
func (m *Manager) BoundMembers(key Key) []*v1.Pod {
	m.mu.RLock()
	defer m.mu.RUnlock()
	g := m.groups[key]
	if g == nil {
		return nil
	}
	var out []*v1.Pod
	for _, p := range g.members {
		if p.Spec.NodeName != "" && p.DeletionTimestamp == nil && !podutil.IsPodTerminal(p) {
			out = append(out, p)
		}
	}
	slices.SortFunc(out, func(a, b *v1.Pod) int { return compareMembers(b, a) })
	return out
}

// IsAllocated reports whether the gang's allocation counts member uid: it
// is bound or reserved, and neither finished nor being deleted.
func (m *Manager) IsAllocated(key Key, uid types.UID) bool {
	m.mu.RLock()
	defer m.mu.RUnlock()
	g := m.groups[key]
	if g == nil {
		return false
	}
	p, ok := g.members[uid]
	if !ok || p.DeletionTimestamp != nil || podutil.IsPodTerminal(p) {
		return false
	}
	_, reserved := g.reserved[uid]
	return reserved || p.Spec.NodeName != ""
}

// HasMember reports whether the gang state still counts pod uid in the
// gang.
func (m *Manager) HasMember(key Key, uid types.UID) bool {
	m.mu.RLock()
	defer m.mu.RUnlock()
	g := m.groups[key]
	if g == nil {
		return false
	}
	_, ok := g.members[uid]
	return ok
}

// Requests returns member uid's resource requests (shared: read only).
func (m *Manager) Requests(key Key, uid types.UID) (v1.ResourceList, bool) {
	m.mu.RLock()
	defer m.mu.RUnlock()
	g := m.groups[key]
	if g == nil {
		return nil, false
	}
	r, ok := g.requests[uid]
	return r, ok
}

// PendingMembers returns the live members that are neither bound nor
// reserved, oldest first.
func (m *Manager) PendingMembers(key Key) []*v1.Pod {
	m.mu.RLock()
	defer m.mu.RUnlock()
	g := m.groups[key]
	if g == nil {
		return nil
	}
	return g.pendingLocked()
}

func (g *group) pendingLocked() []*v1.Pod {
	var out []*v1.Pod
	for uid, p := range g.members {
		if _, reserved := g.reserved[uid]; reserved || p.Spec.NodeName != "" || p.DeletionTimestamp != nil || podutil.IsPodTerminal(p) {
			continue
		}
		out = append(out, p)
	}
	slices.SortFunc(out, compareMembers)
	return out
}

// MemberBefore is the order of a gang's members: oldest first, then by
// name. Pending members are ranked in it, and QueueSort orders the members
// of one gang by it: a member's projected share counts the members ranked
// ahead of it, so placing members in any other order would move the
// projections of members already in the scheduling queue.
func MemberBefore(a, b *v1.Pod) bool { return compareMembers(a, b) < 0 }

// compareMembers orders members as MemberBefore does: −1, 0 or 1.
func compareMembers(a, b *v1.Pod) int {
	return cmp.Or(a.CreationTimestamp.Compare(b.CreationTimestamp.Time), strings.Compare(a.Name, b.Name))
}

// Position is what QueueSort reads of a member's gang: where the member
// stands in it, and the gang's status, plan and creation time.
type Position struct {
	// Stamp says whether the gang changed since (nil: a gang not known).
	Stamp *Stamp
	// Status is the gang's (shared: read only); nil unless asked for.
	Status *Status
	// Pending reports whether the gang state knows the member as pending;
	// Rank is then its index among the pending members, oldest first.
	// Both, with Need and Requests, only with the status.
	Pending bool
	Rank    int
	// Need is how many members are still to be placed before the gang is
	// ready: minMember − placed, at least 0.
	Need int32
	// Requests are the member's own (shared: read only).
	Requests v1.ResourceList
	// Plan is when the gang's placement plan was made; zero without one.
	Plan time.Time
	// Created is the gang's creation time (see CreationTime).
	Created time.Time
}

// Placing reports whether the gang's placement plan is being carried out
// at now (see Manager.Placing).
func (p *Position) Placing(now time.Time) bool {
	return !p.Plan.IsZero() && now.Sub(p.Plan) <= PlanTTL
}

// Position returns what QueueSort reads of member uid's gang; the status
// and the member's rank only withStatus (they are computed again after
// every change of the gang). The gang state is read under one lock, and
// what it returns holds while pos.Stamp is current.
func (m *Manager) Position(key Key, uid types.UID, withStatus bool) Position {
	m.mu.RLock()
	defer m.mu.RUnlock()
	g := m.groups[key]
	pos := Position{Created: m.creationTimeLocked(key, g)}
	if g != nil {
		pos.Stamp = g.stampLocked()
		if g.plan != nil {
			pos.Plan = g.plan.Created
		}
	}
	if !withStatus {
		return pos
	}
	pos.Status = m.statusRefLocked(key, g)
	pos.Need = max(0, pos.Status.Spec.MinMember-pos.Status.Placed)
	if g == nil {
		return pos
	}
	ranks := g.ranks.Load()
	if ranks == nil {
		pending := g.pendingLocked()
		r := make(map[types.UID]rank, len(pending))
		for i, p := range pending {
			r[p.UID] = rank{index: i, requests: g.requests[p.UID]}
		}
		ranks = &r
		g.ranks.Store(ranks)
	}
	var r rank
	r, pos.Pending = (*ranks)[uid]
	pos.Rank, pos.Requests = r.index, r.requests
	return pos
}

// stampLocked is g's current stamp. m.mu held for reading at least:
// readers may race to make it, and all get the one that won.
func (g *group) stampLocked() *Stamp {
	if s := g.stamp.Load(); s != nil {
		return s
	}
	g.stamp.CompareAndSwap(nil, &Stamp{})
	return g.stamp.Load()
}

// rank is where a pending member stands in its gang (see Position).
type rank struct {
	index    int
	requests v1.ResourceList
}

// PodGroupLister lists Muster PodGroups from the Manager's informer.
func (m *Manager) PodGroupLister() musterlisters.PodGroupLister { return m.pgLister }

// SchedulerPluginsInstalled reports whether scheduler-plugins' PodGroup CRD
// was served when the Manager started.
func (m *Manager) SchedulerPluginsInstalled() bool { return m.spLister != nil }

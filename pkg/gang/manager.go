package gang

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	fwk "k8s.io/kube-scheduler/framework"
	spv1alpha1 "sigs.k8s.io/scheduler-plugins/apis/scheduling/v1alpha1"
	spclient "sigs.k8s.io/scheduler-plugins/pkg/generated/clientset/versioned"
	spinformers "sigs.k8s.io/scheduler-plugins/pkg/generated/informers/externalversions"
	splisters "sigs.k8s.io/scheduler-plugins/pkg/generated/listers/scheduling/v1alpha1"
	vcv1beta1 "volcano.sh/apis/pkg/apis/scheduling/v1beta1"
	vcclient "volcano.sh/apis/pkg/client/clientset/versioned"
	vcinformers "volcano.sh/apis/pkg/client/informers/externalversions"

	musterclient "github.com/muster-sched/muster/pkg/generated/clientset/versioned"
	musterinformers "github.com/muster-sched/muster/pkg/generated/informers/externalversions"
	musterlisters "github.com/muster-sched/muster/pkg/generated/listers/scheduling/v1alpha1"
)

// PlanTTL bounds how long a placement plan lives without progress (a step
// of its making, or a member reserved): one that makes none for this long
// (a member stuck in backoff, or the scheduler busy with pods in no gang)
// promises nothing more and is made afresh. A plan that keeps making
// progress lives on, however large its gang.
const PlanTTL = 10 * time.Second

// Manager holds the state of every gang of the cluster. It is shared by all
// profiles of a scheduler process and safe for concurrent use.
type Manager struct {
	mu     sync.RWMutex
	groups map[Key]*group
	// memberOf indexes every member by UID: a pod whose labels moved it
	// to another gang, or out of all, leaves the gang it was in.
	memberOf map[types.UID]Key
	// promised sums, by node and gang, the room plans promise their
	// members (see Promised); promising is how many nodes it holds, read
	// without the lock.
	promised  map[string]map[Key]Room
	promising atomic.Int64

	pgLister musterlisters.PodGroupLister
	spLister splisters.PodGroupLister // nil: scheduler-plugins' CRD absent
	// upStore holds the scheduling.k8s.io PodGroups; nil when Muster does
	// not schedule them (see Clients.UpstreamPodGroups).
	upStore cache.Store
	// vcStore holds the Volcano PodGroups; nil when their CRD is absent.
	vcStore cache.Store
	// pgStore and spStore are the listers' stores, read by key: a lister's
	// Get builds a NotFound error for every label-only gang, and QueueSort
	// looks a gang's PodGroup up on every comparison.
	pgStore, spStore cache.Store
	// pcStore holds the PriorityClasses, which Muster PodGroups may name.
	pcStore cache.Store
	// podStores are the stores of the pod informers: the scheduler's (live
	// pods) and the Manager's of terminated pods. A pod leaves the first
	// when it finishes, and may be in the second already: only its absence
	// from both deletes it.
	podStores []cache.Store
	// synced are the HasSynced of every informer the Manager reads.
	synced []cache.InformerSynced
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
	// queueLabel maps the queue a gang names to its metrics label (see
	// LabelQueues); set before the informers start.
	queueLabel func(string) string
}

// LabelQueues sets how the queue a gang names becomes the queue label of
// its metrics: a name no Queue has is any string a user wrote, and must
// not grow the label set. Without, every gang is labelled "".
func (m *Manager) LabelQueues(f func(queue string) string) { m.queueLabel = f }

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
	// tally is the running sums of its status.
	tally tally
	// startTimed says the gang's scheduling latency was observed, or will
	// not be: a member was bound when first seen (see observeStart).
	startTimed bool
	// shape caches the gang's shape; what may move it (see shape) clears
	// it, with m.mu held for writing. Readers holding m.mu for reading may
	// fill it.
	shape atomic.Pointer[shape]
	// ranks caches, for each pending member, its index in PendingMembers'
	// order and its requests: QueueSort reads both; cleared with stamp.
	ranks atomic.Pointer[map[types.UID]rank]
	// createdAt caches the gang's creation time (creationTime), which
	// QueueSort reads for both pods of every comparison; cleared with stamp.
	createdAt atomic.Pointer[time.Time]
	// stamp is handed out with positions read since the last change; it
	// goes stale with the next.
	stamp atomic.Pointer[Stamp]
	// short is the minMember of a gang whose last resolved shape left it
	// invalid for too few live members alone (0 otherwise): until it has
	// that many, or its spec may have moved, it is invalid for that reason
	// still, and saying so need not resolve its shape again (a gang of
	// thousands of members is refused once per member arriving).
	short atomic.Int32
}

// isLive reports whether a member counts as live in its gang's status.
func isLive(p *v1.Pod) bool { return p.Status.Phase != v1.PodFailed && p.DeletionTimestamp == nil }

// changed drops the cached ranks and creation time, and stales the
// positions handed out. m.mu held for writing.
func (g *group) changed() {
	g.ranks.Store(nil)
	g.createdAt.Store(nil)
	if s := g.stamp.Swap(nil); s != nil {
		s.stale.Store(true)
	}
}

// Plan is where a gang's pending members go: decided for the whole gang
// before any of them reserves. A big gang's plan is made over several
// cycles (see Todo), each on its own snapshot, with the room planned
// before promised.
type Plan struct {
	Nodes map[types.UID]string
	// Todo are the members still to be planned, in order: until there is
	// none left the plan is unfinished, and no member follows it. Infos
	// are then the planned members' PodInfos, for the next step to reuse.
	Todo  []*v1.Pod
	Infos []fwk.PodInfo
	// Progress is when the plan was made, then when it last reserved a
	// member: the plan is followed until PlanTTL after.
	Progress time.Time
	// promises are the planned members not reserved yet, and the room
	// the plan keeps for each (see Promised).
	promises map[types.UID]promise
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
	// Volcano is nil when Volcano's PodGroup CRD is not installed.
	// VolcanoQueues says that its Queue CRD is too: the queue accounting
	// (not the Manager) reads those Queues.
	Volcano       vcclient.Interface
	VolcanoQueues bool
	// UpstreamPodGroups says that the API serves scheduling.k8s.io/v1beta1
	// PodGroups and this scheduler leaves their pods to Muster (its
	// GenericWorkload gate is off): Muster watches them through Kube.
	UpstreamPodGroups bool
	// Pods is the scheduler's informer of live (not terminated) pods. The
	// Manager takes every gang's live members from it, so that the process
	// watches and decodes each pod once; the scheduler starts it.
	Pods cache.SharedIndexInformer
}

// NewManager builds a Manager and starts its own informers (PodGroups, and
// managed pods once terminated); they stop when ctx ends. It does not wait
// for them: they list while the scheduler's own informers do. HasSynced
// reports when they, and c.Pods (started by the scheduler), have delivered
// every object of their first lists.
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
	synced := []cache.InformerSynced{reg.HasSynced}
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
	synced = append(synced, terminatedPods.HasSynced)
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

	pcInformer := informers.NewSharedInformerFactory(c.Kube, 0).Scheduling().V1().PriorityClasses().Informer()
	m.pcStore = pcInformer.GetStore()
	if _, err := pcInformer.AddEventHandler(m.priorityClassHandler()); err != nil {
		return nil, err
	}
	synced = append(synced, pcInformer.HasSynced)
	go pcInformer.RunWithContext(ctx)

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
	if c.Volcano != nil {
		vf := vcinformers.NewSharedInformerFactory(c.Volcano, 0)
		vcInformer := vf.Scheduling().V1beta1().PodGroups().Informer()
		m.vcStore = vcInformer.GetStore()
		if _, err := vcInformer.AddEventHandler(m.groupHandler(FamilyVolcano)); err != nil {
			return nil, err
		}
		synced = append(synced, vcInformer.HasSynced)
		vf.Start(ctx.Done())
	}
	m.synced = synced
	return m, nil
}

// HasSynced reports whether the Manager has taken in every pod and
// PodGroup of its informers' first lists.
func (m *Manager) HasSynced() bool {
	for _, synced := range m.synced {
		if !synced() {
			return false
		}
	}
	return true
}

func (m *Manager) groupLocked(key Key) *group {
	g := m.groups[key]
	if g == nil {
		g = &group{members: map[types.UID]*v1.Pod{}, reserved: map[types.UID]string{}, requests: map[types.UID]v1.ResourceList{}}
		m.groups[key] = g
	}
	return g
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

// PodGroupLister lists Muster PodGroups from the Manager's informer.
func (m *Manager) PodGroupLister() musterlisters.PodGroupLister { return m.pgLister }

// SchedulerPluginsInstalled reports whether scheduler-plugins' PodGroup CRD
// was served when the Manager started.
func (m *Manager) SchedulerPluginsInstalled() bool { return m.spLister != nil }

// VolcanoInstalled says whether the Manager watches Volcano PodGroups.
func (m *Manager) VolcanoInstalled() bool { return m.vcStore != nil }

// VolcanoPodGroup is the Volcano PodGroup of a gang of that family, if it
// exists (shared: read only).
func (m *Manager) VolcanoPodGroup(key Key) *vcv1beta1.PodGroup {
	if key.Family != FamilyVolcano {
		return nil
	}
	return lookup[*vcv1beta1.PodGroup](m.vcStore, key)
}

// VolcanoKeys lists the gangs of every Volcano PodGroup, whether or not
// any pod names it.
func (m *Manager) VolcanoKeys() []Key {
	if m.vcStore == nil {
		return nil
	}
	names := m.vcStore.ListKeys()
	keys := make([]Key, 0, len(names))
	for _, name := range names {
		if ns, n, err := cache.SplitMetaNamespaceKey(name); err == nil {
			keys = append(keys, Key{FamilyVolcano, ns, n})
		}
	}
	return keys
}

// SchedulerPluginsPodGroup is the scheduler-plugins PodGroup of a gang of
// that family, if it exists (shared: read only).
func (m *Manager) SchedulerPluginsPodGroup(key Key) *spv1alpha1.PodGroup {
	if key.Family != FamilySchedulerPlugins {
		return nil
	}
	return lookup[*spv1alpha1.PodGroup](m.spStore, key)
}

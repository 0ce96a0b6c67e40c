package queue

import (
	"context"
	"math"
	"sync"
	"sync/atomic"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/informers"
	corelisters "k8s.io/client-go/listers/core/v1"

	"github.com/muster-sched/muster/apis/scheduling/v1alpha1"
	"github.com/muster-sched/muster/pkg/gang"
	musterlisters "github.com/muster-sched/muster/pkg/generated/listers/scheduling/v1alpha1"
)

// DefaultOvercommitFactor is how far admission may commit the cluster:
// minResources + Σ inqueue ≤ factor·Σ allocatable − Σ used.
const DefaultOvercommitFactor = 1.2

// State is the queue accounting of one scheduler process, shared by every
// profile. It is incremental: a gang's contribution to its queue is
// recomputed only when the gang changed (the gang state says which), so a
// refresh costs the changed gangs and the queues, not every gang.
type State struct {
	policy     Policy
	overcommit float64
	gangs      *gang.Manager
	queues     musterlisters.QueueLister
	namespaces corelisters.NamespaceLister
	cluster    *cluster
	// freed receives, coalesced, when the accounting may have room for a
	// gang it refused (see Freed); changed when a gang's usage changed (see
	// Changed); queuesChanged when a Queue did (see QueuesChanged);
	// redivided when a gang reclaim did not help may now (see Redivided).
	freed, changed, queuesChanged, redivided chan struct{}

	mu sync.Mutex
	// admitted holds the gangs admitted by their queue that have no member
	// placed yet; a gang with a placed member counts as admitted without.
	admitted map[gang.Key]bool
	// blocked holds the gangs whose last placement attempt showed they
	// cannot be placed, even by reclaim, until they are tried again: they
	// claim no room under their queue's share (see Snapshot.Lends).
	blocked map[gang.Key]bool
	// unhelped holds the gangs reclaim found no victims for, until they
	// are tried again, with the shares (divided) it judged them by.
	unhelped map[gang.Key]uint64
	// divided counts the divisions that moved some queue's deserved share.
	divided uint64
	// dirty holds the gangs changed since the last refresh.
	dirty map[gang.Key]bool
	// contrib is each gang's last computed contribution; usage their sums
	// per queue.
	contrib map[gang.Key]contribution
	usage   map[string]Usage
	// moved holds the queues whose usage changed since the last refresh.
	moved map[string]bool
	// queueNames holds the Queues listed at the last refresh, and the
	// default queue even before its object exists; rehomed the gangs
	// accounted in the default queue because the Queue they name is gone
	// (queueOf).
	queueNames map[string]bool
	rehomed    map[gang.Key]bool
	// figures holds each gang's *GangFigures (immutable values), read without
	// locks by QueueSort.
	figures sync.Map
	last    atomic.Pointer[Snapshot]
	// version counts the changes of gang figures, queue usage, the
	// division and the cluster's total: a snapshot of the same version
	// lends as one before it (lendCache).
	version   uint64
	lendCache atomic.Pointer[lendEntry]
	// audits is what the audit keeps between audits (see Audit).
	audits auditor
	// division is the last computed division of the cluster.
	division *division
	// total is the last snapshot's Total, computed from the cluster's
	// totals of totalGeneration.
	total           Vector
	totalGeneration uint64
}

// Snapshot is every queue's figures at one moment. Gang figures are read
// live through Gang.
type Snapshot struct {
	Policy Policy
	Queues map[string]*Figures
	// Total is what the queues divide: the counted nodes' allocatable
	// less unmanaged usage, plus OffNodes.
	Total       Vector
	Allocatable Vector
	Used        Vector // requests of every bound pod on the counted nodes
	// OffNodes sums the requests of the managed pods bound to nodes that
	// are not counted (cordoned, not ready, deleted under them). Their
	// queues hold them, so they are in Total: otherwise a queue's share
	// would shrink by what it holds there, and room on the counted nodes
	// would stay idle.
	OffNodes Vector
	state    *State
	// version is the State's when the snapshot was made; lending is
	// computed on first use (see Lends), or reused from a snapshot of the
	// same version.
	version uint64
	// divided is the State's divided when the snapshot was made.
	divided     uint64
	lendingOnce sync.Once
	lending     *lending
}

// GangFigures are one gang's place in the accounting. Values are never modified
// once published.
type GangFigures struct {
	Queue        string
	MinResources Vector
	Allocated    Vector
	Admitted     bool
	Ready        bool
	// Priority is the gang's (gang.Status.Priority).
	Priority int32
	// DominantShare is max over resources of bound/total (DRF): what the
	// gang holds, not what it is being given while it is placed, so that
	// the order of a gang does not change under its members' feet.
	DominantShare float64
	// Next is the least the gang must be given to move on (see nextNeed);
	// nil when nothing of it is pending.
	Next Vector
	// Blocked says that its last placement attempt showed it cannot be
	// placed now, even by reclaim.
	Blocked bool
}

// Gang returns a gang's figures, or nil for a gang not accounted yet.
func (snap *Snapshot) Gang(key gang.Key) *GangFigures {
	v, ok := snap.state.figures.Load(key)
	if !ok {
		return nil
	}
	return v.(*GangFigures)
}

// RangeGangs calls f for every accounted gang until it returns false.
func (snap *Snapshot) RangeGangs(f func(gang.Key, *GangFigures) bool) {
	snap.state.figures.Range(func(k, v any) bool { return f(k.(gang.Key), v.(*GangFigures)) })
}

// NewState builds the accounting over the gang state, the Queue lister and
// the scheduler's node informer; it takes the scheduler's pods from the
// gang state (AddPodHandler).
func NewState(policy Policy, overcommit float64, gangs *gang.Manager, queues musterlisters.QueueLister, schedulerInformers informers.SharedInformerFactory) (*State, error) {
	freed, changed, queuesChanged, redivided := make(chan struct{}, 1), make(chan struct{}, 1), make(chan struct{}, 1), make(chan struct{}, 1)
	c, err := newCluster(schedulerInformers, gangs, func() { signal(freed) })
	if err != nil {
		return nil, err
	}
	s := &State{
		policy: policy, overcommit: overcommit, gangs: gangs, queues: queues, cluster: c, freed: freed, changed: changed, queuesChanged: queuesChanged, redivided: redivided,
		admitted: map[gang.Key]bool{}, blocked: map[gang.Key]bool{}, unhelped: map[gang.Key]uint64{}, dirty: map[gang.Key]bool{},
		contrib: map[gang.Key]contribution{}, usage: map[string]Usage{}, moved: map[string]bool{},
	}
	if err := s.watchNamespaces(schedulerInformers); err != nil {
		return nil, err
	}
	gangs.OnUsageChange(s.markDirty)
	gangs.OnRelease(func(gang.Key) { signal(s.freed) })
	// Gangs known before the listener was registered; the listener may
	// already be running, so under the lock.
	s.mu.Lock()
	for _, k := range gangs.Keys() {
		s.dirty[k] = true
	}
	for _, k := range gangs.VolcanoKeys() {
		s.dirty[k] = true // enqueued, with no member yet (Reserved)
	}
	s.mu.Unlock()
	s.Refresh()
	return s, nil
}

// Account takes the gang's state in now, rather than at the next Refresh
// after its event: the next Refresh's snapshot counts it.
func (s *State) Account(key gang.Key) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.refreshGang(key)
	delete(s.dirty, key)
}

func (s *State) markDirty(key gang.Key) {
	s.mu.Lock()
	s.dirty[key] = true
	s.mu.Unlock()
	signal(s.changed)
}

// Policy returns the policy in force.
func (s *State) Policy() Policy { return s.policy }

// Last returns the latest snapshot without computing a new one: for hot
// paths such as QueueSort, where a slightly old order is acceptable.
func (s *State) Last() *Snapshot { return s.last.Load() }

// QueueOf is the queue a gang names: the one it belongs to. The queue it
// is accounted in and limited by is its Gang's Queue (see State.queueOf).
func QueueOf(st *gang.Status) string {
	if st.Spec.Queue == "" {
		return v1alpha1.DefaultQueue
	}
	return st.Spec.Queue
}

// QueueOf is the queue the gang is accounted in and limited by: its
// figures' once it is accounted (see State.queueOf), else the one it names.
func (snap *Snapshot) QueueOf(st *gang.Status) string {
	if g := snap.Gang(st.Key); g != nil {
		return g.Queue
	}
	return QueueOf(st)
}

// queueOf resolves the queue a gang is accounted in and limited by. While
// the Queue it names exists, that one. A gang that has started (a member
// placed) and whose Queue is gone, deleted under its running work, is
// accounted in and limited by the default queue: its usage counts there,
// and its extra members must fit default's ceiling. When its Queue appears
// again it moves back. A gang that has not started stays in the queue it
// names, which admits nothing: Admit refuses it ("queue X does not exist").
// s.mu held.
func (s *State) queueOf(st *gang.Status) string {
	named := QueueOf(st)
	if st.Placed == 0 || s.queueNames[named] {
		return named
	}
	return v1alpha1.DefaultQueue
}

// noteQueues records the Queues listed. When one was added or deleted
// since the last refresh, it marks dirty the gangs whose queue that may
// change (queueOf): those accounted in default for want of theirs, and
// those accounted in a queue that is gone. When none was, it costs a
// lookup per Queue. s.mu held.
func (s *State) noteQueues(list []*v1alpha1.Queue) {
	if s.queueNames != nil {
		same, count := true, len(list)+1 // default is there, listed or not
		for _, q := range list {
			same = same && s.queueNames[q.Name]
			if q.Name == v1alpha1.DefaultQueue {
				count--
			}
		}
		if same && count == len(s.queueNames) {
			return
		}
	}
	names := make(map[string]bool, len(list)+1)
	names[v1alpha1.DefaultQueue] = true
	for _, q := range list {
		names[q.Name] = true
	}
	s.queueNames = names
	for key := range s.rehomed {
		s.dirty[key] = true
	}
	for key, c := range s.contrib {
		if !names[c.queue] {
			s.dirty[key] = true
		}
	}
}

// Refresh folds the changed gangs into the queues' usage and computes a new
// snapshot.
func (s *State) Refresh() *Snapshot {
	t := s.cluster.totals()
	snap := &Snapshot{Policy: s.policy, Allocatable: t.allocatable, Used: t.used, OffNodes: t.offNodes, state: s}

	s.mu.Lock()
	defer s.mu.Unlock()
	queues, _ := s.queues.List(labels.Everything())
	s.noteQueues(queues)
	for key := range s.dirty {
		s.refreshGang(key)
	}
	if len(s.dirty) > 64 {
		// A cleared map keeps its size, and ranging over it costs that.
		s.dirty = map[gang.Key]bool{}
	} else {
		clear(s.dirty)
	}
	if s.total == nil || t.generation != s.totalGeneration {
		s.version++
		s.total, s.totalGeneration = t.allocatable.Clone(), t.generation
		for k, n := range t.unmanaged {
			if n > 0 {
				s.total[k] = max(0, s.total[k]-n)
			}
		}
		s.total.Add(t.offNodes)
	}
	snap.Total = s.total
	if s.division.matches(snap.Total, queues, s.usage) {
		snap.Queues = s.division.figures(s.usage, s.moved)
	} else {
		d := newDivision(s.policy, snap.Total, queues, s.usage)
		if !d.sameDeserved(s.division) {
			s.divided++
			if len(s.unhelped) > 0 {
				signal(s.redivided)
			}
		}
		s.division = d
		snap.Queues = d.figs
		s.version++
	}
	snap.version, snap.divided = s.version, s.divided
	clear(s.moved)
	for _, f := range snap.Queues {
		if !f.shareKnown {
			// Not published yet: QueueSort reads two shares per comparison.
			f.share, f.shareKnown = f.computeShare(), true
		}
	}
	s.last.Store(snap)
	return snap
}

// refreshGang recomputes one gang's contribution and figures. s.mu held.
func (s *State) refreshGang(key gang.Key) {
	old, had := s.contrib[key]
	st := s.gangs.Status(key)
	if st.Members == 0 && Reserved(&st) == nil {
		if had {
			s.apply(old, -1)
			delete(s.contrib, key)
		}
		delete(s.admitted, key)
		delete(s.blocked, key)
		delete(s.unhelped, key)
		delete(s.rehomed, key)
		s.figures.Delete(key)
		s.version++
		return
	}
	q := s.queueOf(&st)
	if q != QueueOf(&st) {
		if s.rehomed == nil {
			s.rehomed = map[gang.Key]bool{}
		}
		s.rehomed[key] = true
	} else {
		delete(s.rehomed, key)
	}
	if !s.queueNames[q] {
		// Not started, and its Queue is gone: an admission it gave lapses
		// with it, and Admit refuses the gang until the Queue is back.
		delete(s.admitted, key)
	}
	g := &GangFigures{Queue: q, MinResources: FromList(st.MinResources), Allocated: FromList(st.Allocated), Ready: st.Ready(), Priority: st.Priority}
	g.Admitted = s.admitted[key] || st.Placed > 0
	g.Next, g.Blocked = nextNeed(&st, g.Admitted), s.blocked[key]
	if st.Placed > 0 {
		delete(s.admitted, key) // placed members keep it admitted now
	}
	c := contributionOf(&st, q, g)
	if !had || !old.equal(c) {
		// Not when only the gang's figures moved (a member bound, say):
		// its queue's usage, and so its published figures, stay.
		if had {
			s.apply(old, -1)
		}
		s.contrib[key] = c
		s.apply(c, 1)
	}
	if last := s.last.Load(); last != nil {
		g.DominantShare = dominantShareOf(st.Bound, last.Total)
	}
	s.figures.Store(key, g)
	s.version++
}

// specsOf reads the listed queues, with the default queue even before its
// object exists.
func specsOf(list []*v1alpha1.Queue) []Spec {
	specs := make([]Spec, 0, len(list)+1)
	hasDefault := false
	for _, q := range list {
		specs = append(specs, SpecOf(q))
		hasDefault = hasDefault || q.Name == v1alpha1.DefaultQueue
	}
	if !hasDefault {
		specs = append(specs, Spec{Name: v1alpha1.DefaultQueue, Weight: 1, Reclaimable: true})
	}
	return specs
}

// WaitForNodes waits, bounded by ctx, until the accounting took in every
// node the scheduler's informer listed: shares mean nothing before.
func (s *State) WaitForNodes(ctx context.Context) { s.cluster.waitForNodes(ctx) }

// DominantShare is max over resources of v ÷ what the queues divide.
func (snap *Snapshot) DominantShare(v Vector) float64 { return dominantShare(v, snap.Total) }

func dominantShare(allocated, total Vector) float64 {
	share := 0.0
	for k, a := range allocated {
		if t := total[k]; t > 0 {
			share = math.Max(share, float64(a)/float64(t))
		}
	}
	return share
}

// dominantShareOf is dominantShare of a ResourceList.
func dominantShareOf(allocated v1.ResourceList, total Vector) float64 {
	share := 0.0
	for k, q := range allocated {
		if t := total[k]; t > 0 && k != v1.ResourcePods {
			share = math.Max(share, float64(quantity(k, q))/float64(t))
		}
	}
	return share
}

// Topology is the topology constraint the gang's queue gives the gangs
// that give none of their own; zero when its Queue does not exist.
func (s *State) Topology(st *gang.Status) gang.Topology {
	q, err := s.queues.Get(QueueOf(st))
	if err != nil {
		return gang.Topology{}
	}
	return gang.TopologyOf(q.Spec.Topology)
}

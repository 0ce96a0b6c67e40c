// Package batch holds the batch state of one scheduler process: the gangs,
// the queue accounting, the reclaim records and the status controllers.
// kube-scheduler builds a plugin instance per profile; they all share this
// one state, built by the first plugin built and stopped with the
// scheduler.
package batch

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	v1 "k8s.io/api/core/v1"
	schedulingv1beta1 "k8s.io/api/scheduling/v1beta1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	utilfeature "k8s.io/apiserver/pkg/util/feature"
	"k8s.io/client-go/discovery"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/events"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/features"
	"k8s.io/kubernetes/pkg/scheduler/framework"
	spv1alpha1 "sigs.k8s.io/scheduler-plugins/apis/scheduling/v1alpha1"
	spclient "sigs.k8s.io/scheduler-plugins/pkg/generated/clientset/versioned"
	vcv1beta1 "volcano.sh/apis/pkg/apis/scheduling/v1beta1"
	vcclient "volcano.sh/apis/pkg/client/clientset/versioned"
	vcinformers "volcano.sh/apis/pkg/client/informers/externalversions"

	configv1 "github.com/muster-sched/muster/apis/config/v1"
	"github.com/muster-sched/muster/apis/scheduling/v1alpha1"
	"github.com/muster-sched/muster/pkg/controllers/podgroup"
	queuecontroller "github.com/muster-sched/muster/pkg/controllers/queue"
	"github.com/muster-sched/muster/pkg/gang"
	musterclient "github.com/muster-sched/muster/pkg/generated/clientset/versioned"
	musterinformers "github.com/muster-sched/muster/pkg/generated/informers/externalversions"
	"github.com/muster-sched/muster/pkg/metrics"
	"github.com/muster-sched/muster/pkg/queue"
)

// Batch is the batch state of one scheduler.
type Batch struct {
	Gangs *gang.Manager
	// Binds bounds the gang members that write to the API at once.
	Binds *Binds

	handle   fwk.Handle
	clients  gang.Clients
	recorder events.EventRecorder
	queueInf musterinformers.SharedInformerFactory
	// vcQueueInf watches Volcano's Queues; nil unless they are queues.
	vcQueueInf vcinformers.SharedInformerFactory

	mu sync.Mutex
	// profiles are the scheduler names of the profiles with Muster's
	// plugins.
	profiles map[string]bool
	// levels are the topology levels of each profile's Gang plugin.
	levels map[string][]string
	queues atomic.Pointer[queue.State]
	// queuesOn is closed once a queue policy is enabled.
	queuesOn chan struct{}

	// stop is the scheduler's: closed when it stops.
	stop <-chan struct{}
	// startOnce starts the wait for the first lists (see Hold).
	startOnce sync.Once
	startMu   sync.Mutex
	// started is set once the gang state and the accounting took in the
	// first lists; until then held collects the managed pods PreEnqueue
	// held back, by namespace/name.
	started bool
	held    map[string]*v1.Pod

	// onLead are run once this replica leads (OnLead).
	onLead []func(context.Context)
}

// OnLead registers f to run, with the leader's context, once this replica
// leads and the gang state has taken in the first lists. Register before
// the process leads (from a plugin factory). f may write to the API.
func (b *Batch) OnLead(f func(context.Context)) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.onLead = append(b.onLead, f)
}

// Process is the batch state of one scheduler process, built once for the
// plugins of every profile (see Batch), and the replica's leadership: what
// writes to the API runs only while this replica leads (see Lead).
type Process struct {
	mu    sync.Mutex
	batch *Batch
	// leading is closed by Lead; leadCtx is then the leader's context.
	leading chan struct{}
	leadCtx context.Context
	once    sync.Once
	// writing is closed once the leader's writers run (see Writing).
	writing     chan struct{}
	writingOnce sync.Once
}

// NewProcess returns the state of a scheduler process, empty until the
// first plugin asks for it.
func NewProcess() *Process {
	return &Process{leading: make(chan struct{}), writing: make(chan struct{})}
}

// Writing is closed once this replica leads and its writers run on the
// complete gang state: the status controllers have started and, with
// queues on, the default Queue exists (at once if no plugin built the
// batch state). The sandbox waits for it before it applies what the user
// gave.
func (p *Process) Writing() <-chan struct{} { return p.writing }

func (p *Process) markWriting() { p.writingOnce.Do(func() { close(p.writing) }) }

// Lead starts the writers: this replica leads the scheduler's election (or
// runs without one). They stop when ctx ends. Later calls do nothing.
func (p *Process) Lead(ctx context.Context) {
	p.once.Do(func() {
		p.leadCtx = ctx
		close(p.leading)
	})
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.batch == nil {
		p.markWriting() // no Muster plugin is on: nothing to write
	}
}

// Queues returns the process's queue accounting, or nil while no queue
// policy is on.
func (p *Process) Queues() *queue.State {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.batch == nil {
		return nil
	}
	return p.batch.Queues()
}

// Batch returns the batch state of the scheduler h belongs to, building it
// on first use; it stops when ctx (the scheduler's) ends. Every profile of
// a scheduler shares its informer factory, and so this state.
func (p *Process) Batch(ctx context.Context, h fwk.Handle) (*Batch, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	factory := h.SharedInformerFactory()
	if p.batch != nil {
		if p.batch.handle.SharedInformerFactory() != factory {
			return nil, fmt.Errorf("a batch.Process serves one scheduler; build one per scheduler")
		}
		p.batch.addProfile(h)
		return p.batch, nil
	}
	clients, err := clientsFor(h.KubeConfig())
	if err != nil {
		return nil, err
	}
	clients.Kube = h.ClientSet()
	clients.Pods = factory.Core().V1().Pods().Informer()
	m, err := gang.NewManager(ctx, clients)
	if err != nil {
		return nil, err
	}
	b := &Batch{Gangs: m, Binds: NewBinds(memberBinds), handle: h, clients: clients, queuesOn: make(chan struct{}), stop: ctx.Done(), held: map[string]*v1.Pod{}}
	m.AddPodHandler(b.Binds.NominationSeen())
	m.LabelQueues(b.queueLabel)
	b.addProfile(h)
	logger := klog.FromContext(ctx)
	if err := b.startControllers(ctx, p); err != nil {
		return nil, err
	}
	p.batch = b
	metrics.Register()
	logger.Info("Batch state started", "schedulerPluginsPodGroups", m.SchedulerPluginsInstalled(), "upstreamPodGroups", m.UpstreamInstalled())
	if utilfeature.DefaultFeatureGate.Enabled(features.GenericWorkload) {
		logger.Info("Feature gate GenericWorkload is on in this scheduler: pods of scheduling.k8s.io PodGroups take kube-scheduler's PodGroup cycle, without Muster's gangs and queues; turn the gate off in muster-scheduler (not in the cluster) to give them both")
	}
	return b, nil
}

// Hold is called by PreEnqueue for every managed pod (one in a gang or a
// queue); it reports whether the pod must wait. The first call starts the
// scheduler's batch work: the scheduling queue exists from then on, and the
// framework's pod activator is wired (after the plugins are built).
//
// Until the gang state has every pod of the scheduler's first list and,
// with queues on, the accounting every node (a few milliseconds after the
// first call, at most 10 s), managed pods are held back, and then
// activated all at once: QueueSort orders them by gang and queue figures,
// and the scheduling queue orders each pod once, when it is added. The
// scheduler's informer handler is not blocked meanwhile, so pods in no gang
// and no queue are queued and scheduled as the stock scheduler would.
//
// From then on, a gang that becomes valid or ready has its pending
// members activated: the queue may have checked them against an older view
// of the gang and parked them.
func (b *Batch) Hold(ctx context.Context, pod *v1.Pod) bool {
	b.startOnce.Do(func() { go b.start(klog.FromContext(ctx)) })
	b.startMu.Lock()
	defer b.startMu.Unlock()
	if b.started {
		return false
	}
	b.held[pod.Namespace+"/"+pod.Name] = pod
	return true
}

// start waits for the first lists, then activates the pods Hold held back,
// and every gang's pending members when the gang becomes valid or ready.
func (b *Batch) start(logger klog.Logger) {
	ctx, cancel := context.WithTimeout(wait.ContextForChannel(b.stop), 10*time.Second)
	defer cancel()
	// Poll finely: WaitForCacheSync's 100 ms would idle the managed pods
	// for that long at every start.
	_ = wait.PollUntilContextCancel(ctx, 2*time.Millisecond, true, func(context.Context) (bool, error) {
		return b.Gangs.HasSynced(), nil
	})
	if qs := b.Queues(); qs != nil {
		qs.WaitForNodes(ctx)
	}
	b.Gangs.OnWake(func(key gang.Key, pending []*v1.Pod) {
		pods := make(map[string]*v1.Pod, len(pending))
		for _, p := range pending {
			pods[p.Namespace+"/"+p.Name] = p
		}
		logger.V(4).Info("Gang became valid, planned or ready: activating its pending members", "gang", key, "members", len(pods))
		b.handle.Activate(logger, pods)
	})
	b.startMu.Lock()
	b.started = true
	held := b.held
	b.held = nil
	b.startMu.Unlock()
	if ctx.Err() != nil {
		logger.Error(ctx.Err(), "Gang state or queue accounting has not taken in the first lists within 10s: activating the pods held back anyway", "pods", len(held))
	} else {
		logger.V(2).Info("Gang state and queue accounting took in the first lists: activating the pods held back", "pods", len(held))
	}
	// In chunks: Activate holds the scheduling queue's lock throughout and
	// runs PreEnqueue and QueueSort for every pod (tens of microseconds a
	// pod), and the scheduler, which may be popping already, should get
	// its first pods after the first chunk, not after all of them.
	chunk := make(map[string]*v1.Pod, activateChunk)
	for k, p := range held {
		chunk[k] = p
		if len(chunk) == activateChunk {
			b.handle.Activate(logger, chunk)
			chunk = make(map[string]*v1.Pod, activateChunk)
		}
	}
	if len(chunk) > 0 {
		b.handle.Activate(logger, chunk)
	}
}

// activateChunk is how many held pods start activates at once.
const activateChunk = 128

// EnableQueues turns on queue accounting under a policy. Proportion and
// Capacity are alternatives: a second, different policy is an error. The
// accounting is audited every audit (0: only on SIGUSR2); the first
// profile to enable queues sets the policy's arguments.
func (b *Batch) EnableQueues(ctx context.Context, policy queue.Policy, overcommit float64, audit time.Duration) (*queue.State, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if q := b.queues.Load(); q != nil {
		if q.Policy() != policy {
			return nil, fmt.Errorf("the Proportion and Capacity plugins are alternatives: enable one of them in every profile (%s is on, %s was asked for)", q.Policy(), policy)
		}
		return q, nil
	}
	f := musterinformers.NewSharedInformerFactory(b.clients.Muster, 0)
	lister := f.Scheduling().V1alpha1().Queues().Lister()
	inf := f.Scheduling().V1alpha1().Queues().Informer()
	f.Start(ctx.Done())
	synced := []cache.InformerSynced{inf.HasSynced}
	var vcInf cache.SharedIndexInformer
	var vf vcinformers.SharedInformerFactory
	if b.clients.VolcanoQueues {
		vf = vcinformers.NewSharedInformerFactory(b.clients.Volcano, 0)
		vcInf = vf.Scheduling().V1beta1().Queues().Informer()
		lister = queue.NewLister(lister, vf.Scheduling().V1beta1().Queues().Lister())
		vf.Start(ctx.Done())
		synced = append(synced, vcInf.HasSynced)
	}
	allSynced := func() bool {
		for _, f := range synced {
			if !f() {
				return false
			}
		}
		return true
	}
	if !waitSynced(ctx, allSynced) {
		return nil, fmt.Errorf("queue informers did not sync")
	}
	s, err := queue.NewState(policy, overcommit, b.Gangs, lister, b.handle.SharedInformerFactory())
	if err != nil {
		return nil, err
	}
	if _, err := inf.AddEventHandler(queueSpecChanged(s)); err != nil {
		return nil, err
	}
	if vcInf != nil {
		if _, err := vcInf.AddEventHandler(queueSpecChanged(s)); err != nil {
			return nil, err
		}
	}
	go b.wakeQueueWaiters(ctx, s)
	queue.RegisterMetrics()
	go auditQueues(ctx, s, audit)
	b.queueInf, b.vcQueueInf = f, vf
	b.queues.Store(s)
	close(b.queuesOn)
	klog.FromContext(ctx).Info("Queue accounting started", "policy", policy, "overcommitFactor", overcommit)
	return s, nil
}

// VolcanoProfile is the scheduler name of Volcano's scheduler. A process
// that serves it has replaced vc-scheduler, and writes the status of
// Volcano's PodGroups and Queues.
const VolcanoProfile = "volcano"

// addProfile records the profile of h's framework as served.
func (b *Batch) addProfile(h fwk.Handle) {
	fw, ok := h.(framework.Framework)
	if !ok {
		return
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.profiles == nil {
		b.profiles = map[string]bool{}
	}
	b.profiles[fw.ProfileName()] = true
}

// SetTopologyLevels records the topology levels (node label keys, tightest
// first) the profile's Gang plugin was given.
func (b *Batch) SetTopologyLevels(profile string, levels []string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.levels == nil {
		b.levels = map[string][]string{}
	}
	b.levels[profile] = levels
}

// Topology is the gang's topology constraint as the profile places it:
// the node label keys whose domains to try, in order, and the required
// key (see gang.Topology.Levels). The constraint is the gang's own, else
// its queue's default (where a queue policy runs; not for a pod in no
// gang); the levels are those of the profile's Gang plugin, else the
// default ones.
func (b *Batch) Topology(profile string, s *gang.Status) (keys []string, required string) {
	t := s.Spec.Topology
	if q := b.Queues(); t.IsZero() && q != nil && s.Key.Family != gang.FamilySolo {
		t = q.Topology(s)
	}
	if t.IsZero() {
		return nil, ""
	}
	b.mu.Lock()
	levels, ok := b.levels[profile]
	b.mu.Unlock()
	if !ok {
		levels = configv1.DefaultTopologyLevels()
	}
	return t.Levels(levels)
}

// serves reports whether a profile of that scheduler name has Muster's
// plugins.
func (b *Batch) serves(name string) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.profiles[name]
}

// VolcanoQueues says whether Volcano's Queues are read as queues: their
// CRD is served.
func (b *Batch) VolcanoQueues() bool { return b.clients.VolcanoQueues }

// Recorder records Events as muster-scheduler.
func (b *Batch) Recorder() events.EventRecorder { return b.recorder }

// Queues returns the queue accounting, or nil when no queue policy is on.
// Lock-free: QueueSort reads it for every comparison.
func (b *Batch) Queues() *queue.State { return b.queues.Load() }

// startControllers builds the status controllers and their Event
// recorder, and runs them once this replica leads (p.Lead), until ctx or
// the leader's context ends. A follower writes nothing.
func (b *Batch) startControllers(ctx context.Context, p *Process) error {
	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		return err
	}
	if err := v1alpha1.AddToScheme(scheme); err != nil {
		return err
	}
	if err := vcv1beta1.AddToScheme(scheme); err != nil {
		return err
	}
	if err := spv1alpha1.AddToScheme(scheme); err != nil {
		return err
	}
	broadcaster := events.NewBroadcaster(&events.EventSinkImpl{Interface: b.handle.ClientSet().EventsV1()})
	b.recorder = broadcaster.NewRecorder(scheme, "muster-scheduler")
	go func() {
		defer broadcaster.Shutdown()
		select {
		case <-p.leading:
		case <-ctx.Done():
			return
		}
		ctx, cancel := context.WithCancel(ctx)
		defer cancel()
		context.AfterFunc(p.leadCtx, cancel)
		// The gauges are the leader's: a follower's queue figures are not
		// refreshed, and dashboards sum over replicas.
		b.serveMetrics(ctx)
		// Events recorded before (none: a follower does not schedule)
		// are dropped.
		broadcaster.StartRecordingToSink(ctx.Done())
		// Status is written from a complete gang state only: after a
		// restart, a half-listed gang would say it lost members.
		if !cache.WaitForCacheSync(ctx.Done(), b.Gangs.HasSynced) {
			return
		}
		b.mu.Lock()
		onLead := b.onLead
		b.mu.Unlock()
		for _, f := range onLead {
			go f(ctx)
		}
		// Volcano's PodGroups and Queues are written only by the
		// scheduler that serves the name `volcano`: beside a running
		// vc-scheduler, the two would write them in turn.
		clients, volcano := b.clients, b.serves(VolcanoProfile)
		if !volcano {
			clients.Volcano = nil
		}
		pg := podgroup.New(clients, b.Gangs.PodGroupLister(), b.Gangs, b.recorder, b.admitted).WithEnqueue(enqueuer{b})
		go pg.Run(ctx)
		// The plugin factories, which turn queues on, ran before Lead.
		select {
		case <-b.queuesOn:
			// Nor are shares written before the accounting has every
			// node (bounded as start is): a successor's first status
			// would give deserved shares of part of the cluster.
			nodes, cancel := context.WithTimeout(ctx, 10*time.Second)
			b.Queues().WaitForNodes(nodes)
			cancel()
			q := queuecontroller.New(b.clients.Muster, b.queueInf.Scheduling().V1alpha1().Queues().Lister(), b.Queues(), b.Gangs, b.recorder)
			if b.vcQueueInf != nil && volcano {
				q.WithVolcano(b.clients.Volcano, b.vcQueueInf.Scheduling().V1beta1().Queues().Lister())
			}
			q.Run(ctx, p.markWriting)
		default:
			p.markWriting()
		}
	}()
	return nil
}

// admitted says whether the gang's queue admitted it; with no queue policy
// every valid gang is.
func (b *Batch) admitted(key gang.Key) bool {
	q := b.Queues()
	if q == nil {
		return true
	}
	snap := q.Last()
	if snap == nil {
		return false
	}
	g := snap.Gang(key)
	return g != nil && g.Admitted
}

// enqueuer enqueues the gangs whose pods do not exist yet on the queue
// accounting (see queue.State.WouldAdmit); every gang is enqueued while no
// queue policy is on.
type enqueuer struct{ b *Batch }

func (e enqueuer) WouldEnqueue(namespace, q string, min v1.ResourceList) (bool, string) {
	s := e.b.Queues()
	if s == nil {
		return true, ""
	}
	return s.WouldAdmit(s.Refresh(), namespace, q, queue.FromList(min))
}

func (e enqueuer) Account(key gang.Key) {
	if s := e.b.Queues(); s != nil {
		s.Account(key)
	}
}

func waitSynced(ctx context.Context, synced func() bool) bool {
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	return cache.WaitForCacheSync(ctx.Done(), synced)
}

// clientsFor builds the CRD clients, checking that Muster's CRDs are served
// and whether scheduler-plugins' and Volcano's PodGroups are.
func clientsFor(kubeConfig *rest.Config) (gang.Clients, error) {
	cfg := rest.CopyConfig(kubeConfig)
	cfg.ContentType, cfg.AcceptContentTypes = "application/json", "application/json"
	dc, err := discovery.NewDiscoveryClientForConfig(cfg)
	if err != nil {
		return gang.Clients{}, err
	}
	served := func(groupVersion, resource string) (bool, error) {
		list, err := dc.ServerResourcesForGroupVersion(groupVersion)
		if apierrors.IsNotFound(err) {
			return false, nil
		}
		if err != nil {
			return false, err
		}
		for _, r := range list.APIResources {
			if r.Name == resource {
				return true, nil
			}
		}
		return false, nil
	}
	ok, err := served(v1alpha1.SchemeGroupVersion.String(), "podgroups")
	if err != nil {
		return gang.Clients{}, fmt.Errorf("checking for Muster's CRDs: %w", err)
	}
	if !ok {
		return gang.Clients{}, fmt.Errorf("Muster's CRDs (%s) are not installed: apply manifests/crds first", v1alpha1.GroupName)
	}
	var c gang.Clients
	if c.Muster, err = musterclient.NewForConfig(cfg); err != nil {
		return gang.Clients{}, err
	}
	if ok, err = served("scheduling.x-k8s.io/v1alpha1", "podgroups"); err != nil {
		return gang.Clients{}, fmt.Errorf("checking for scheduler-plugins' PodGroup CRD: %w", err)
	}
	if ok {
		if c.SchedulerPlugins, err = spclient.NewForConfig(cfg); err != nil {
			return gang.Clients{}, err
		}
	}
	if ok, err = served(vcv1beta1.SchemeGroupVersion.String(), "podgroups"); err != nil {
		return gang.Clients{}, fmt.Errorf("checking for Volcano's PodGroup CRD: %w", err)
	}
	if ok {
		if c.Volcano, err = vcclient.NewForConfig(cfg); err != nil {
			return gang.Clients{}, err
		}
		if c.VolcanoQueues, err = served(vcv1beta1.SchemeGroupVersion.String(), "queues"); err != nil {
			return gang.Clients{}, fmt.Errorf("checking for Volcano's Queue CRD: %w", err)
		}
	}
	// kube-scheduler routes the pods of scheduling.k8s.io PodGroups to its
	// own PodGroup cycle whenever its GenericWorkload gate is on, whatever
	// the plugins: Muster schedules them only where the gate is off here.
	if !utilfeature.DefaultFeatureGate.Enabled(features.GenericWorkload) {
		if c.UpstreamPodGroups, err = served(schedulingv1beta1.SchemeGroupVersion.String(), "podgroups"); err != nil {
			return gang.Clients{}, fmt.Errorf("checking for scheduling.k8s.io PodGroups: %w", err)
		}
	}
	return c, nil
}

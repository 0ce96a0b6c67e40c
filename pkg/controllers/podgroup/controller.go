package podgroup

import (
	"context"
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/events"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/klog/v2"
	spclient "sigs.k8s.io/scheduler-plugins/pkg/generated/clientset/versioned"
	vcclient "volcano.sh/apis/pkg/client/clientset/versioned"

	"github.com/muster-sched/muster/apis/scheduling/v1alpha1"
	"github.com/muster-sched/muster/pkg/gang"
	musterclient "github.com/muster-sched/muster/pkg/generated/clientset/versioned"
	musterlisters "github.com/muster-sched/muster/pkg/generated/listers/scheduling/v1alpha1"
)

// resyncPeriod re-examines every gang, for changes no event announces
// (a plan that expired, a failure that aged).
const resyncPeriod = 30 * time.Second

// batchDelay is how often changed gangs are handed to the work queue:
// status may lag this much behind the gang state.
const batchDelay = 20 * time.Millisecond

// maxMemberEvents bounds the Events recorded on the members of a gang with
// no PodGroup, so that a large gang does not flood the Events API.
const maxMemberEvents = 20

// Controller writes PodGroup status and records Events for gangs that wait.
type Controller struct {
	client   musterclient.Interface
	kube     kubernetes.Interface
	lister   musterlisters.PodGroupLister
	manager  *gang.Manager
	recorder events.EventRecorder

	// volcano and schedulerPlugins are nil when their PodGroup CRDs are
	// not installed.
	volcano          vcclient.Interface
	schedulerPlugins spclient.Interface

	// admitted says whether a gang's queue admitted it; nil when no queue
	// policy is on (every valid gang counts as admitted).
	admitted func(gang.Key) bool
	// enqueuer decides the enqueue of a Volcano PodGroup with no pod yet
	// (WithEnqueue); nil: every such PodGroup is Inqueue.
	enqueuer Enqueuer

	mu sync.Mutex
	// queue exists while the controller runs (while it leads).
	queue workqueue.TypedRateLimitingInterface[gang.Key]
	// pending holds the gangs changed since the last hand-over to queue.
	pending map[gang.Key]struct{}
	// announced is the last waiting reason announced per gang, so that an
	// Event is recorded once per reason, not once per sync.
	announced map[gang.Key]string
}

// New builds the controller, writing through clients' Muster, Kube,
// Volcano and SchedulerPlugins clientsets; Run starts it.
func New(clients gang.Clients, lister musterlisters.PodGroupLister, manager *gang.Manager, recorder events.EventRecorder, admitted func(gang.Key) bool) *Controller {
	c := &Controller{
		admitted:  admitted,
		client:    clients.Muster,
		kube:      clients.Kube,
		lister:    lister,
		manager:   manager,
		recorder:  recorder,
		announced: map[gang.Key]string{},
		pending:   map[gang.Key]struct{}{},

		volcano:          clients.Volcano,
		schedulerPlugins: clients.SchedulerPlugins,
	}
	manager.OnChange(c.enqueue)
	return c
}

// enqueue records a changed gang. It is called from the scheduling cycle,
// so it only notes the key: handOver passes it on.
func (c *Controller) enqueue(key gang.Key) {
	c.mu.Lock()
	if c.queue != nil {
		c.pending[key] = struct{}{}
	}
	c.mu.Unlock()
}

// handOver moves the pending gangs to queue. It runs every batchDelay
// rather than being woken: a goroutine woken from the scheduling cycle,
// once per pod or per batch, costs the scheduler its turn on a busy CPU
// (measured in execution traces).
func (c *Controller) handOver(queue workqueue.TypedRateLimitingInterface[gang.Key]) {
	c.mu.Lock()
	keys := c.pending
	if len(keys) == 0 {
		c.mu.Unlock()
		return // keys is c.pending still: not to be read unlocked
	}
	c.pending = make(map[gang.Key]struct{}, len(keys))
	c.mu.Unlock()
	for k := range keys {
		if !c.hasPodGroup(k) && !c.changesAnnouncement(k) {
			continue // no PodGroup to write, and nothing new to say
		}
		queue.Add(k)
	}
}

// hasPodGroup reports whether the gang may have a PodGroup whose status
// Muster writes. Volcano's and scheduler-plugins' are looked up in the
// informers' stores (a map read): a gang of those families without one
// is invalid, and its status is only Events on its members.
func (c *Controller) hasPodGroup(key gang.Key) bool {
	switch key.Family {
	case gang.FamilyMuster, gang.FamilyUpstream:
		return true
	case gang.FamilyVolcano:
		return c.volcano != nil && c.manager.VolcanoPodGroup(key) != nil
	case gang.FamilySchedulerPlugins:
		return c.schedulerPlugins != nil && c.manager.SchedulerPluginsPodGroup(key) != nil
	}
	return false
}

// changesAnnouncement reports whether the reason the gang waits differs
// from the one last announced. Most changes of gangs with no PodGroup
// (a member bound, a pod of one placed) change nothing to say: filtered
// here, they cost the work queue and its worker nothing.
func (c *Controller) changesAnnouncement(key gang.Key) bool {
	s := c.manager.Status(key)
	_, msg := waitingReason(&s)
	c.mu.Lock()
	defer c.mu.Unlock()
	return msg != c.announced[key]
}

// Run syncs gangs until ctx ends; it may run again later (when this
// replica leads again). One worker writes status and records Events;
// announced is shared with the hand-over, under c.mu.
func (c *Controller) Run(ctx context.Context) {
	queue := workqueue.NewTypedRateLimitingQueueWithConfig(workqueue.DefaultTypedControllerRateLimiter[gang.Key](),
		workqueue.TypedRateLimitingQueueConfig[gang.Key]{Name: "muster-podgroup-status"})
	c.mu.Lock()
	c.queue = queue
	c.mu.Unlock()
	defer func() {
		c.mu.Lock()
		c.queue = nil
		clear(c.pending)
		c.mu.Unlock()
		queue.ShutDown()
	}()
	go wait.UntilWithContext(ctx, func(context.Context) { c.handOver(queue) }, batchDelay)
	klog.FromContext(ctx).Info("Starting PodGroup status controller")
	go wait.UntilWithContext(ctx, func(context.Context) {
		for _, k := range c.manager.Keys() {
			queue.Add(k)
		}
		// Volcano PodGroups with no pod yet wait for their enqueue.
		for _, k := range c.manager.VolcanoKeys() {
			queue.Add(k)
		}
	}, resyncPeriod)
	go func() {
		<-ctx.Done()
		queue.ShutDown()
	}()
	for c.processNext(ctx, queue) {
	}
}

func (c *Controller) processNext(ctx context.Context, queue workqueue.TypedRateLimitingInterface[gang.Key]) bool {
	key, quit := queue.Get()
	if quit {
		return false
	}
	defer queue.Done(key)
	requeue, err := c.sync(ctx, key)
	switch {
	case err != nil:
		utilruntime.HandleErrorWithContext(ctx, err, "Syncing PodGroup status", "gang", key)
		queue.AddRateLimited(key)
	case requeue:
		queue.AddRateLimited(key)
	default:
		queue.Forget(key)
	}
	return true
}

// sync writes the status of the gang's PodGroup, of whichever kind, as
// that kind's own scheduler or controller writes it; requeue asks for
// another try after a conflict, once the informer has caught up. A gang
// with no PodGroup has no status to write.
func (c *Controller) sync(ctx context.Context, key gang.Key) (requeue bool, err error) {
	s := c.manager.Status(key)
	c.announce(ctx, key, &s)
	switch key.Family {
	case gang.FamilyMuster:
		return c.syncMuster(ctx, key, &s)
	case gang.FamilyUpstream:
		return false, c.syncUpstream(ctx, key, &s)
	case gang.FamilyVolcano:
		return c.syncVolcano(ctx, key, &s)
	case gang.FamilySchedulerPlugins:
		return c.syncSchedulerPlugins(ctx, key, &s)
	}
	return false, nil
}

// syncMuster writes the status of a Muster PodGroup.
func (c *Controller) syncMuster(ctx context.Context, key gang.Key, s *gang.Status) (requeue bool, err error) {
	pg, err := c.lister.PodGroups(key.Namespace).Get(key.Name)
	if apierrors.IsNotFound(err) {
		c.mu.Lock()
		delete(c.announced, key)
		c.mu.Unlock()
		return false, nil
	}
	if err != nil {
		return false, err
	}
	status := desiredStatus(pg, s, c.isAdmitted(key), time.Now())
	if equality.Semantic.DeepEqual(status, pg.Status) {
		return false, nil
	}
	if status.Phase != pg.Status.Phase && pg.Status.Phase != "" {
		c.recorder.Eventf(pg, nil, v1.EventTypeNormal, string(status.Phase), "Schedule",
			"phase %s -> %s: %d scheduled, %d running, %d succeeded, %d failed", pg.Status.Phase, status.Phase,
			status.Scheduled, status.Running, status.Succeeded, status.Failed)
	}
	updated := pg.DeepCopy()
	updated.Status = status
	_, err = c.client.SchedulingV1alpha1().PodGroups(pg.Namespace).UpdateStatus(ctx, updated, metav1.UpdateOptions{})
	return written(err)
}

// isAdmitted says whether the gang's queue admitted it.
func (c *Controller) isAdmitted(key gang.Key) bool {
	return c.admitted == nil || c.admitted(key)
}

// written reads the error of a status write: a PodGroup deleted meanwhile
// has nothing to write; a conflict asks for another try, with the newer
// object the informer is about to deliver, rather than a retry now with
// the stale one.
func written(err error) (requeue bool, _ error) {
	switch {
	case apierrors.IsNotFound(err):
		return false, nil
	case apierrors.IsConflict(err):
		return true, nil
	}
	return false, err
}

// desiredStatus is the status pg should have given its gang's state.
func desiredStatus(pg *v1alpha1.PodGroup, s *gang.Status, admitted bool, now time.Time) v1alpha1.PodGroupStatus {
	status := *pg.Status.DeepCopy()
	status.Phase = PhaseOf(s, pg.Status.Phase)
	if status.Phase == v1alpha1.PodGroupInqueue && !admitted {
		status.Phase = v1alpha1.PodGroupPending
	}
	status.Scheduled, status.Running, status.Succeeded, status.Failed = s.Scheduled, s.Running, s.Succeeded, s.Failed
	status.ObservedGeneration = pg.Generation
	if status.ScheduleStartTime == nil && (status.Phase != v1alpha1.PodGroupPending || s.Tried) {
		t := metav1.NewTime(now)
		status.ScheduleStartTime = &t
	}
	cond := scheduledCondition(s, status.Phase, pg.Generation)
	// SetStatusCondition keeps LastTransitionTime unless the status flips.
	meta.SetStatusCondition(&status.Conditions, cond)
	return status
}

// waitingReason is the Event reason and message of a gang that waits, or
// empty strings.
func waitingReason(s *gang.Status) (reason, msg string) {
	switch {
	case s.Invalid != "" && s.Members > 0:
		return ReasonInvalid, s.Invalid
	case s.Waiting != "" && !s.Ready():
		return ReasonUnschedulable, s.Waiting
	}
	return "", ""
}

// announce records a Warning Event when the reason a gang waits changes:
// on the PodGroup for Muster's and Volcano's PodGroups (vc-scheduler
// records its own there), on the pending members otherwise.
func (c *Controller) announce(ctx context.Context, key gang.Key, s *gang.Status) {
	reason, msg := waitingReason(s)
	c.mu.Lock()
	same := msg == c.announced[key]
	switch {
	case same:
	case msg == "":
		delete(c.announced, key)
	default:
		c.announced[key] = msg
	}
	c.mu.Unlock()
	if same || msg == "" {
		return
	}
	logger := klog.FromContext(ctx)
	if pg := c.eventObject(key); pg != nil {
		logger.V(2).Info("Gang waits", "gang", key, "reason", reason, "message", msg)
		c.recorder.Eventf(pg, nil, v1.EventTypeWarning, reason, "Schedule", "%s", msg)
		return
	}
	// Only members the message counted are told it: they are read at once
	// with a status that still gives it. A member that came after, told
	// an older message, would keep it: the events API folds the next one
	// on the unchanged pod into the first.
	now, pending := c.manager.StatusAndPending(key)
	if _, msgNow := waitingReason(&now); msgNow != msg {
		c.mu.Lock()
		if c.announced[key] == msg {
			delete(c.announced, key) // the gang's next sync tells its own
		}
		c.mu.Unlock()
		return
	}
	logger.V(2).Info("Gang waits", "gang", key, "reason", reason, "message", msg)
	if len(pending) > maxMemberEvents {
		pending = pending[:maxMemberEvents]
	}
	related := c.definingObject(key)
	for _, p := range pending {
		c.recorder.Eventf(p, related, v1.EventTypeWarning, "Gang"+reason, "Schedule", "gang %s: %s", key.Name, msg)
	}
}

// definingObject is the PodGroup (scheduler-plugins', upstream's or, beside
// vc-scheduler, Volcano's) that defines a gang whose members get its
// Events; nil while there is none. The events API makes one series, with
// the first note, of the Events of the same object (and resourceVersion),
// reason and related object: as related object, the PodGroup keeps the
// Events told before it appeared or changed apart from those after, so
// that "PodGroup does not exist", told to pods created first, does not
// hide what is wrong with the PodGroup once it came.
func (c *Controller) definingObject(key gang.Key) runtime.Object {
	switch key.Family {
	case gang.FamilySchedulerPlugins:
		if pg := c.manager.SchedulerPluginsPodGroup(key); pg != nil {
			return pg
		}
	case gang.FamilyUpstream:
		if pg := c.manager.UpstreamPodGroup(key); pg != nil {
			return pg
		}
	case gang.FamilyVolcano:
		if pg := c.manager.VolcanoPodGroup(key); pg != nil {
			return pg
		}
	}
	return nil
}

// eventObject is the PodGroup that the gang's Events are about: Muster's
// or, where Muster writes them, Volcano's; nil for other gangs, whose
// members get them.
func (c *Controller) eventObject(key gang.Key) runtime.Object {
	switch key.Family {
	case gang.FamilyMuster:
		if pg, err := c.lister.PodGroups(key.Namespace).Get(key.Name); err == nil {
			return pg
		}
	case gang.FamilyVolcano:
		// Only where Muster writes them: beside vc-scheduler, they are
		// its own.
		if pg := c.manager.VolcanoPodGroup(key); pg != nil && c.volcano != nil {
			return pg
		}
	}
	return nil
}

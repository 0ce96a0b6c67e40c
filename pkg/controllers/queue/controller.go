// Package queue writes the status of Queues (Muster's, and Volcano's where
// they are queues too): state, allocated, deserved, realCapability and the
// count of gangs per phase, from the scheduler's queue accounting, and the
// conditions Valid and Admitting (Muster's only). It records the Events of
// a queue's changes of state and validity, and of the gangs it refused
// (events.go). It keeps the default queue in existence.
package queue

import (
	"context"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/tools/events"
	"k8s.io/klog/v2"
	vcclient "volcano.sh/apis/pkg/client/clientset/versioned"
	vclisters "volcano.sh/apis/pkg/client/listers/scheduling/v1beta1"

	"github.com/muster-sched/muster/apis/scheduling/v1alpha1"
	"github.com/muster-sched/muster/pkg/controllers/podgroup"
	"github.com/muster-sched/muster/pkg/gang"
	musterclient "github.com/muster-sched/muster/pkg/generated/clientset/versioned"
	musterlisters "github.com/muster-sched/muster/pkg/generated/listers/scheduling/v1alpha1"
	"github.com/muster-sched/muster/pkg/queue"
)

// Period is how often queue status is brought up to date. Queue figures
// move with every bind; writing them at most once a period keeps the
// apiserver's load independent of the scheduling rate.
const Period = time.Second

// ConditionValid is False when the queue's place in the hierarchy is wrong
// (see also ConditionAdmitting).
const ConditionValid = "Valid"

// Controller writes Queue status.
type Controller struct {
	client   musterclient.Interface
	lister   musterlisters.QueueLister
	state    *queue.State
	gangs    *gang.Manager
	recorder events.EventRecorder
	// volcano and volcanoLister are nil unless Volcano's Queues are
	// queues too (WithVolcano).
	volcano       vcclient.Interface
	volcanoLister vclisters.QueueLister
	// told holds, per gang waiting for admission, the reasons of the
	// refusals an Event told already (see recordRefusals).
	told map[gang.Key]map[string]bool
}

// New builds the controller.
func New(client musterclient.Interface, lister musterlisters.QueueLister, state *queue.State, gangs *gang.Manager, recorder events.EventRecorder) *Controller {
	return &Controller{client: client, lister: lister, state: state, gangs: gangs, recorder: recorder, told: map[gang.Key]map[string]bool{}}
}

// Run updates every queue, then again a period after each update ends,
// until ctx ends; synced is called after the first update, once the
// default queue exists.
func (c *Controller) Run(ctx context.Context, synced func()) {
	klog.FromContext(ctx).Info("Starting Queue status controller")
	var first sync.Once
	wait.UntilWithContext(ctx, func(ctx context.Context) {
		c.sync(ctx)
		first.Do(synced)
	}, Period)
}

func (c *Controller) sync(ctx context.Context) {
	logger := klog.FromContext(ctx)
	if err := c.ensureDefault(ctx); err != nil {
		logger.Error(err, "Creating the default queue")
	}
	snap := c.state.Refresh()
	counts := c.phaseCounts(snap)
	statuses := c.gangs.Statuses()
	refused := c.refusals(snap, statuses)
	c.recordRefusals(refused, aliveGangs(statuses))
	queues, err := c.lister.List(labels.Everything())
	if err != nil {
		logger.Error(err, "Listing queues")
		return
	}
	for _, q := range queues {
		f := snap.Queues[q.Name]
		if f == nil {
			continue
		}
		status := desiredStatus(q, f, counts[q.Name])
		meta.SetStatusCondition(&status.Conditions, admitting(snap, q, f, &status, refused[q.Name]))
		if equality.Semantic.DeepEqual(status, q.Status) {
			continue
		}
		updated := q.DeepCopy()
		updated.Status = status
		_, err := c.client.SchedulingV1alpha1().Queues().UpdateStatus(ctx, updated, metav1.UpdateOptions{})
		switch {
		case err == nil:
			c.recordTransitions(q, &q.Status, &status)
		case !apierrors.IsConflict(err) && !apierrors.IsNotFound(err):
			logger.Error(err, "Updating queue status", "queue", q.Name)
		}
	}
	if c.volcano != nil {
		c.syncVolcano(ctx, snap, counts)
	}
}

// ensureDefault creates the queue of gangs that name none, if it is gone.
func (c *Controller) ensureDefault(ctx context.Context) error {
	if _, err := c.lister.Get(v1alpha1.DefaultQueue); !apierrors.IsNotFound(err) {
		return err
	}
	_, err := c.client.SchedulingV1alpha1().Queues().Create(ctx, &v1alpha1.Queue{
		ObjectMeta: metav1.ObjectMeta{Name: v1alpha1.DefaultQueue},
	}, metav1.CreateOptions{})
	if apierrors.IsAlreadyExists(err) {
		return nil
	}
	return err
}

// phaseCounts counts each queue's gangs per phase.
func (c *Controller) phaseCounts(snap *queue.Snapshot) map[string]map[v1alpha1.PodGroupPhase]int32 {
	return PhaseCounts(c.gangs, snap)
}

// PhaseCounts counts each queue's gangs per phase, as Queue status shows
// them (and Muster's metrics). With no queue accounting (snap nil) every
// valid gang counts as admitted, in the queue it names.
func PhaseCounts(gangs *gang.Manager, snap *queue.Snapshot) map[string]map[v1alpha1.PodGroupPhase]int32 {
	out := map[string]map[v1alpha1.PodGroupPhase]int32{}
	queueOf := queue.QueueOf
	if snap != nil {
		queueOf = snap.QueueOf
	}
	pgs := gangs.PodGroupLister()
	counted := map[gang.Key]bool{}
	for _, st := range gangs.Statuses() {
		if st.Members == 0 {
			continue
		}
		counted[st.Key] = true
		prev := v1alpha1.PodGroupPhase("")
		if st.Key.Family == gang.FamilyMuster {
			if pg, err := pgs.PodGroups(st.Key.Namespace).Get(st.Key.Name); err == nil {
				prev = pg.Status.Phase
			}
		}
		phase := podgroup.PhaseOf(&st, prev)
		if phase == v1alpha1.PodGroupInqueue && snap != nil {
			if g := snap.Gang(st.Key); g == nil || !g.Admitted {
				phase = v1alpha1.PodGroupPending
			}
		}
		if phase == v1alpha1.PodGroupPending && st.Enqueued {
			phase = v1alpha1.PodGroupInqueue // its members are still coming
		}
		count(out, queueOf(&st), phase)
	}
	// Volcano PodGroups with no pod: enqueued or waiting for it, or done
	// with their pods gone; their phase is what Muster wrote.
	for _, key := range gangs.VolcanoKeys() {
		pg := gangs.VolcanoPodGroup(key)
		if pg == nil || counted[key] {
			continue
		}
		if st := gangs.Status(key); st.Members == 0 {
			phase := v1alpha1.PodGroupPhase(pg.Status.Phase)
			if phase == "" {
				phase = v1alpha1.PodGroupPending
			}
			count(out, queueOf(&st), phase)
		}
	}
	return out
}

func count(out map[string]map[v1alpha1.PodGroupPhase]int32, q string, phase v1alpha1.PodGroupPhase) {
	if out[q] == nil {
		out[q] = map[v1alpha1.PodGroupPhase]int32{}
	}
	out[q][phase]++
}

func desiredStatus(q *v1alpha1.Queue, f *queue.Figures, counts map[v1alpha1.PodGroupPhase]int32) v1alpha1.QueueStatus {
	status := *q.Status.DeepCopy()
	status.ObservedGeneration = q.Generation
	status.Allocated = f.Allocated.List()
	status.Deserved = f.Deserved.List()
	status.RealCapability = f.RealCapability.List()
	status.Pending = counts[v1alpha1.PodGroupPending]
	status.Inqueue = counts[v1alpha1.PodGroupInqueue]
	status.Running = counts[v1alpha1.PodGroupRunning]
	status.Completed = counts[v1alpha1.PodGroupCompleted]
	status.Unknown = counts[v1alpha1.PodGroupUnknown]
	status.Failed = counts[v1alpha1.PodGroupFailed]
	switch {
	case !f.Closed:
		status.State = v1alpha1.QueueOpen
	case status.Running+status.Inqueue+status.Unknown > 0:
		status.State = v1alpha1.QueueClosing
	default:
		status.State = v1alpha1.QueueClosed
	}
	valid := metav1.Condition{Type: ConditionValid, Status: metav1.ConditionTrue, Reason: "Valid", ObservedGeneration: q.Generation}
	if f.Invalid != "" {
		valid.Status, valid.Reason, valid.Message = metav1.ConditionFalse, "InvalidParent", f.Invalid
	}
	meta.SetStatusCondition(&status.Conditions, valid)
	return status
}

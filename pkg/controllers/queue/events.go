package queue

import (
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/muster-sched/muster/apis/scheduling/v1alpha1"
	"github.com/muster-sched/muster/pkg/gang"
)

// Event reasons on Queues, besides the reclaim's (Reclaimed, Reclaiming:
// see pkg/plugins/queuepolicy).
const (
	EventOpened           = "Opened"
	EventClosing          = "Closing"
	EventClosed           = "Closed"
	EventInvalid          = "Invalid"
	EventValid            = "Valid"
	EventAdmissionRefused = "AdmissionRefused"
)

// recordTransitions records an Event for each change of state and of
// validity between the status written before and the one just written:
// once per transition, as the write that made it succeeded. A queue's
// first status (no state yet) is no transition, unless it is not Open.
func (c *Controller) recordTransitions(q *v1alpha1.Queue, before, after *v1alpha1.QueueStatus) {
	if before.State != after.State && (before.State != "" || after.State != v1alpha1.QueueOpen) {
		switch after.State {
		case v1alpha1.QueueOpen:
			c.recorder.Eventf(q, nil, v1.EventTypeNormal, EventOpened, "Open", "the queue is open: it admits new gangs")
		case v1alpha1.QueueClosing:
			c.recorder.Eventf(q, nil, v1.EventTypeNormal, EventClosing, "Close",
				"the queue is closing: it admits no new gang; %d running, %d inqueue and %d unknown gangs finish first",
				after.Running, after.Inqueue, after.Unknown)
		case v1alpha1.QueueClosed:
			c.recorder.Eventf(q, nil, v1.EventTypeNormal, EventClosed, "Close",
				"the queue is closed: no gang of it runs and it admits none; set spec.state to Open to admit again")
		}
	}
	was, is := meta.FindStatusCondition(before.Conditions, ConditionValid), meta.FindStatusCondition(after.Conditions, ConditionValid)
	switch {
	case is == nil:
	case is.Status == metav1.ConditionFalse && (was == nil || was.Status != metav1.ConditionFalse):
		c.recorder.Eventf(q, nil, v1.EventTypeWarning, EventInvalid, "Validate",
			"%s: the queue admits no gang and deserves only what it holds until that is fixed", is.Message)
	case is.Status == metav1.ConditionTrue && was != nil && was.Status == metav1.ConditionFalse:
		c.recorder.Eventf(q, nil, v1.EventTypeNormal, EventValid, "Validate", "the queue's place in the hierarchy is valid again")
	}
}

// recordRefusals records an AdmissionRefused Event on the queue of each
// gang refused, once per gang and reason: a gang waiting for room is
// refused on every attempt, and its figures move. What was told of a gang
// is forgotten once it is ready or gone, so that a later wait is told
// again. alive holds the gangs with members.
func (c *Controller) recordRefusals(refused map[string][]refusal, alive map[gang.Key]bool) {
	for key := range c.told {
		if !alive[key] {
			delete(c.told, key)
		}
	}
	for name, list := range refused {
		obj := c.queueObject(name)
		if obj == nil {
			continue // the gang's PodGroup says "queue x does not exist"
		}
		for _, r := range list {
			if c.told[r.key][r.reason] {
				continue
			}
			if c.told[r.key] == nil {
				c.told[r.key] = map[string]bool{}
			}
			c.told[r.key][r.reason] = true
			// The PodGroup as related object keeps the Events of two gangs
			// apart: the events API makes one series of Events of the same
			// object, reason and related object, with the first one's note.
			c.recorder.Eventf(obj, r.group, v1.EventTypeWarning, EventAdmissionRefused, "Admit",
				"gang %s/%s not admitted: %s", r.key.Namespace, r.key.Name, r.why)
		}
	}
}

// queueObject is the Queue of that name, Muster's or else Volcano's
// where this controller writes those; nil when there is none.
func (c *Controller) queueObject(name string) runtime.Object {
	if q, err := c.lister.Get(name); err == nil {
		return q
	}
	if c.volcanoLister != nil {
		if vq, err := c.volcanoLister.Get(name); err == nil {
			return vq
		}
	}
	return nil
}

// aliveGangs is the set of gangs with members that are not ready yet.
func aliveGangs(statuses []gang.Status) map[gang.Key]bool {
	out := make(map[gang.Key]bool, len(statuses))
	for i := range statuses {
		if st := &statuses[i]; st.Members > 0 && !st.Ready() {
			out[st.Key] = true
		}
	}
	return out
}

package queue

import (
	"fmt"
	"sort"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/muster-sched/muster/apis/scheduling/v1alpha1"
	"github.com/muster-sched/muster/pkg/gang"
	"github.com/muster-sched/muster/pkg/queue"
)

// ConditionAdmitting is True when the queue admits new gangs, False with
// why not.
const ConditionAdmitting = "Admitting"

// Reasons of the Admitting condition.
const (
	ReasonAdmitting    = "Admitting"
	ReasonInvalid      = "Invalid"
	ReasonNotLeaf      = "NotLeaf"
	ReasonClosed       = "Closed"
	ReasonClosing      = "Closing"
	ReasonParentClosed = "ParentClosed"
	// ReasonAtCeiling: gangs wait because allocated + inqueue would pass
	// the ceiling of the queue or of a queue above it.
	ReasonAtCeiling = "AtCeiling"
	// ReasonOvercommitted: gangs wait because the cluster is committed up
	// to its overcommit bound.
	ReasonOvercommitted = "Overcommitted"
)

// refusal is a gang its queue does not admit now, and why.
type refusal struct {
	key         gang.Key
	why, reason string // reason: one of queue.Reason…
	// group is the gang's PodGroup, if it has one: the Event's related
	// object.
	group runtime.Object
}

// refusals lists, per queue, the gangs waiting for admission that their
// queue would refuse now, ordered by gang; nothing is recorded
// (State.Refusal). Only gangs the scheduler tried and left waiting count:
// a gang of one is never recorded as admitted, and would otherwise look
// refused while it runs.
func (c *Controller) refusals(snap *queue.Snapshot, statuses []gang.Status) map[string][]refusal {
	out := map[string][]refusal{}
	for i := range statuses {
		st := &statuses[i]
		if st.Members == 0 || st.Invalid != "" || st.Waiting == "" || st.Ready() {
			continue
		}
		why, reason := c.state.Refusal(st, snap)
		if reason == "" || reason == queue.ReasonNotAccounted {
			continue
		}
		q := snap.QueueOf(st)
		out[q] = append(out[q], refusal{key: st.Key, why: why, reason: reason, group: c.groupOf(st)})
	}
	for _, list := range out {
		sort.Slice(list, func(i, j int) bool { return list[i].key.Less(list[j].key) })
	}
	return out
}

// groupOf is the PodGroup defining the gang, Muster's or Volcano's; nil
// for a gang of labels alone.
func (c *Controller) groupOf(st *gang.Status) runtime.Object {
	if st.Spec.PodGroup != nil {
		return st.Spec.PodGroup
	}
	if pg := c.gangs.VolcanoPodGroup(st.Key); pg != nil {
		return pg
	}
	return nil
}

// admitting is the queue's Admitting condition: False when its place or
// state shuts it (Invalid, NotLeaf, Closing, Closed, ParentClosed), or
// when gangs wait because it, or a queue above it, is at its ceiling
// (AtCeiling) or the cluster is committed to its bound (Overcommitted).
// A gang refused for its namespace says nothing of the queue.
func admitting(snap *queue.Snapshot, q *v1alpha1.Queue, f *queue.Figures, status *v1alpha1.QueueStatus, refused []refusal) metav1.Condition {
	c := metav1.Condition{Type: ConditionAdmitting, Status: metav1.ConditionFalse, ObservedGeneration: q.Generation}
	switch reason, why := snap.Shut(q.Name); {
	case reason == queue.ReasonQueueInvalid:
		c.Reason, c.Message = ReasonInvalid, why+"; it admits no gang until that is fixed"
	case reason == queue.ReasonNotLeaf:
		c.Reason, c.Message = ReasonNotLeaf, why
	case reason == queue.ReasonQueueClosed && f.Closed && status.State == v1alpha1.QueueClosing:
		c.Reason, c.Message = ReasonClosing, fmt.Sprintf("the queue is closed: it admits no new gang; %d running, %d inqueue and %d unknown gangs finish first",
			status.Running, status.Inqueue, status.Unknown)
	case reason == queue.ReasonQueueClosed && f.Closed:
		c.Reason, c.Message = ReasonClosed, "the queue is closed: it admits no new gang; set spec.state to Open to admit again"
	case reason == queue.ReasonQueueClosed:
		c.Reason, c.Message = ReasonParentClosed, why+": it admits no new gang below it"
	default:
		c.Reason, c.Message = waiting(refused)
		if c.Reason == "" {
			c.Status, c.Reason, c.Message = metav1.ConditionTrue, ReasonAdmitting, "it admits new gangs"
		}
	}
	return c
}

// waiting says why gangs wait for room, if they do: the ceiling before
// the cluster's bound; the first gang's refusal, with its figures.
func waiting(refused []refusal) (reason, message string) {
	for _, r := range []struct{ admission, condition string }{
		{queue.ReasonOverCeiling, ReasonAtCeiling},
		{queue.ReasonOvercommit, ReasonOvercommitted},
	} {
		var first *refusal
		n := 0
		for i := range refused {
			if refused[i].reason == r.admission {
				if first == nil {
					first = &refused[i]
				}
				n++
			}
		}
		if first != nil {
			waits := "1 gang waits"
			if n > 1 {
				waits = fmt.Sprintf("%d gangs wait", n)
			}
			return r.condition, fmt.Sprintf("%s for room; %s/%s: %s", waits, first.key.Namespace, first.key.Name, first.why)
		}
	}
	return "", ""
}

package podgroup

import (
	"context"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	vcv1beta1 "volcano.sh/apis/pkg/apis/scheduling/v1beta1"

	"github.com/muster-sched/muster/pkg/gang"
)

// A PodGroup is enqueued on its queue's figures alone: whatever else its
// spec gets wrong shows once its pods exist, as in Volcano.

// Enqueuer decides the enqueue of Volcano PodGroups whose pods do not
// exist yet; the queue accounting implements it.
type Enqueuer interface {
	// WouldEnqueue says whether a gang of that namespace and queue with
	// minimum min would be enqueued now, and why not.
	WouldEnqueue(namespace, queue string, min v1.ResourceList) (bool, string)
	// Account takes the gang's state in at once, so that the next
	// WouldEnqueue counts what its enqueue reserves.
	Account(key gang.Key)
}

// WithEnqueue makes the controller enqueue Volcano PodGroups whose pods do
// not exist yet, as vc-scheduler's enqueue action does: Volcano's Job
// controller and Kubeflow's training-operator create a job's pods only once
// its PodGroup is Inqueue. Without, every such PodGroup is Inqueue.
func (c *Controller) WithEnqueue(e Enqueuer) *Controller {
	c.enqueuer = e
	return c
}

// enqueueRetry is how often a PodGroup refused at enqueue is checked again
// while it has no pods: room may come with any change of any queue.
const enqueueRetry = time.Second

// enqueueSeen bounds the wait for the informer to show an enqueue written.
const enqueueSeen = 5 * time.Second

// enqueueVolcano decides the phase of a Volcano PodGroup with no member
// yet that is Pending: Inqueue once its queue would admit its
// minResources, which its queue then holds for its pods (queue.Reserved),
// else Pending with the reason. retry says to check again after
// enqueueRetry.
func (c *Controller) enqueueVolcano(pg *vcv1beta1.PodGroup) (phase vcv1beta1.PodGroupPhase, why string, retry bool) {
	if c.enqueuer == nil {
		return vcv1beta1.PodGroupInqueue, "", false
	}
	var min v1.ResourceList
	if pg.Spec.MinResources != nil {
		min = *pg.Spec.MinResources
	}
	if ok, why := c.enqueuer.WouldEnqueue(pg.Namespace, pg.Spec.Queue, min); !ok {
		return vcv1beta1.PodGroupPending, why, true
	}
	return vcv1beta1.PodGroupInqueue, "", false
}

// enqueued waits, bounded by enqueueSeen, until the informer shows the
// PodGroup past version read (its enqueue written), and has the accounting
// take it in: the next enqueue, decided at once by this one worker, must
// count the reservation, which the apiserver holds and the informer
// brings. A successor reads it from there.
func (c *Controller) enqueued(ctx context.Context, key gang.Key, read string) {
	if c.enqueuer == nil {
		return
	}
	_ = wait.PollUntilContextTimeout(ctx, 5*time.Millisecond, enqueueSeen, true, func(context.Context) (bool, error) {
		pg := c.manager.VolcanoPodGroup(key)
		return pg == nil || pg.ResourceVersion != read, nil
	})
	c.enqueuer.Account(key)
}

// retryAfter adds key to the work queue again after d, while the
// controller runs.
func (c *Controller) retryAfter(key gang.Key, d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.queue != nil {
		c.queue.AddAfter(key, d)
	}
}

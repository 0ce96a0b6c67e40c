package podgroup

import (
	"time"

	v1 "k8s.io/api/core/v1"
	vcv1beta1 "volcano.sh/apis/pkg/apis/scheduling/v1beta1"

	"github.com/muster-sched/muster/pkg/gang"
)

// A PodGroup is enqueued on its queue's figures alone: whatever else its
// spec gets wrong shows once its pods exist, as in Volcano.

// Enqueue says whether a gang of that namespace and queue with minimum min
// would be admitted now, and why not; nil when no queue policy is on.
type Enqueue func(namespace, queue string, min v1.ResourceList) (bool, string)

// WithEnqueue makes the controller enqueue Volcano PodGroups whose pods do
// not exist yet, as vc-scheduler's enqueue action does: Volcano's Job
// controller and Kubeflow's training-operator create a job's pods only once
// its PodGroup is Inqueue.
func (c *Controller) WithEnqueue(f Enqueue) *Controller {
	c.enqueueGroup = f
	return c
}

// enqueueRetry is how often a PodGroup refused at enqueue is checked again
// while it has no pods: room may come with any change of any queue.
const enqueueRetry = time.Second

// enqueueVolcano decides the phase of a Volcano PodGroup with no member
// yet that is Pending: Inqueue once its queue would admit its
// minResources (nothing is reserved: its pods are admitted when they are
// tried, as any gang's), else Pending with the reason. retry says to check
// again after enqueueRetry.
func (c *Controller) enqueueVolcano(pg *vcv1beta1.PodGroup) (phase vcv1beta1.PodGroupPhase, why string, retry bool) {
	if c.enqueueGroup == nil {
		return vcv1beta1.PodGroupInqueue, "", false
	}
	var min v1.ResourceList
	if pg.Spec.MinResources != nil {
		min = *pg.Spec.MinResources
	}
	if ok, why := c.enqueueGroup(pg.Namespace, pg.Spec.Queue, min); !ok {
		return vcv1beta1.PodGroupPending, why, true
	}
	return vcv1beta1.PodGroupInqueue, "", false
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

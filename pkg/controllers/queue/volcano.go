package queue

import (
	"context"

	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/klog/v2"
	vcv1beta1 "volcano.sh/apis/pkg/apis/scheduling/v1beta1"
	vcclient "volcano.sh/apis/pkg/client/clientset/versioned"
	vclisters "volcano.sh/apis/pkg/client/listers/scheduling/v1beta1"

	"github.com/muster-sched/muster/apis/scheduling/v1alpha1"
	"github.com/muster-sched/muster/pkg/queue"
)

// WithVolcano makes the controller write the status of Volcano's Queues
// too, as vc-scheduler and Volcano's queue controller do.
func (c *Controller) WithVolcano(client vcclient.Interface, lister vclisters.QueueLister) *Controller {
	c.volcano, c.volcanoLister = client, lister
	return c
}

// syncVolcano writes each Volcano Queue's status from the figures of its
// name (a Muster Queue's, where one shares it).
func (c *Controller) syncVolcano(ctx context.Context, snap *queue.Snapshot, counts map[string]map[v1alpha1.PodGroupPhase]int32) {
	logger := klog.FromContext(ctx)
	queues, err := c.volcanoLister.List(labels.Everything())
	if err != nil {
		logger.Error(err, "Listing Volcano queues")
		return
	}
	for _, q := range queues {
		f := snap.Queues[q.Name]
		if f == nil {
			continue
		}
		status := volcanoStatus(q, f, counts[q.Name])
		if equality.Semantic.DeepEqual(status, q.Status) {
			continue
		}
		updated := q.DeepCopy()
		updated.Status = status
		_, err := c.volcano.SchedulingV1beta1().Queues().UpdateStatus(ctx, updated, metav1.UpdateOptions{})
		if err != nil && !apierrors.IsConflict(err) && !apierrors.IsNotFound(err) {
			logger.Error(err, "Updating Volcano queue status", "queue", q.Name)
		}
	}
}

// volcanoStatus is the status a Volcano Queue should have: what it holds
// and its gangs per phase. Its state is Volcano's queue controller's alone
// (it opens and closes queues on vcctl's commands, by server-side apply:
// a write of Muster's would take the field from it); a queue with none is
// read as Open.
func volcanoStatus(q *vcv1beta1.Queue, f *queue.Figures, counts map[v1alpha1.PodGroupPhase]int32) vcv1beta1.QueueStatus {
	status := *q.Status.DeepCopy()
	status.Allocated = f.Allocated.List()
	status.Pending = counts[v1alpha1.PodGroupPending]
	status.Inqueue = counts[v1alpha1.PodGroupInqueue]
	status.Running = counts[v1alpha1.PodGroupRunning]
	status.Completed = counts[v1alpha1.PodGroupCompleted]
	status.Unknown = counts[v1alpha1.PodGroupUnknown]
	return status
}

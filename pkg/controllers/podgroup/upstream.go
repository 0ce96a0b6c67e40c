package podgroup

import (
	"context"
	"fmt"

	schedulingv1beta1 "k8s.io/api/scheduling/v1beta1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/kubernetes/pkg/scheduler/util"

	"github.com/muster-sched/muster/pkg/gang"
)

// ReasonInitiallyScheduled is kube-scheduler's reason for a PodGroup whose
// gang was placed (it has no constant for it).
const ReasonInitiallyScheduled = "Scheduled"

// syncUpstream writes the PodGroupInitiallyScheduled condition of a
// scheduling.k8s.io PodGroup as kube-scheduler 1.37 writes it, so that
// tools written for it read Muster's decisions: True (reason Scheduled)
// once the gang is placed, and never False again; until then False with
// reason Unschedulable and why it waits. A strategic merge patch of the
// status subresource, as kube-scheduler's.
func (c *Controller) syncUpstream(ctx context.Context, key gang.Key, s *gang.Status) error {
	pg := c.manager.UpstreamPodGroup(key)
	if pg == nil {
		return nil
	}
	cond, ok := initiallyScheduled(s)
	if !ok {
		return nil
	}
	existing := meta.FindStatusCondition(pg.Status.Conditions, schedulingv1beta1.PodGroupInitiallyScheduled)
	if existing != nil && existing.Status == metav1.ConditionTrue {
		return nil
	}
	cond.ObservedGeneration = pg.Generation
	status := pg.Status.DeepCopy()
	if !meta.SetStatusCondition(&status.Conditions, cond) {
		return nil
	}
	err := util.PatchPodGroupStatus(ctx, c.kube, pg.Name, pg.Namespace, &pg.Status, status)
	if apierrors.IsNotFound(err) {
		return nil // deleted meanwhile
	}
	return err
}

// initiallyScheduled is the condition a gang's status calls for; ok is
// false while there is nothing to say (being placed, or no members yet).
func initiallyScheduled(s *gang.Status) (metav1.Condition, bool) {
	c := metav1.Condition{Type: schedulingv1beta1.PodGroupInitiallyScheduled, Status: metav1.ConditionFalse, Reason: schedulingv1beta1.PodGroupReasonUnschedulable}
	switch {
	case s.Ready():
		c.Status, c.Reason = metav1.ConditionTrue, ReasonInitiallyScheduled
		c.Message = fmt.Sprintf("%d members placed, minCount %d", s.Placed, s.Spec.MinMember)
	case s.Invalid != "" && s.Members > 0:
		c.Message = s.Invalid
	case s.Waiting != "":
		c.Message = s.Waiting
	default:
		return c, false
	}
	return c, true
}

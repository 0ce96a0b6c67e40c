package podgroup

import (
	"context"
	"fmt"
	"sort"
	"strings"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	spv1alpha1 "sigs.k8s.io/scheduler-plugins/apis/scheduling/v1alpha1"

	"github.com/muster-sched/muster/pkg/gang"
)

// syncSchedulerPlugins writes the status of a scheduling.x-k8s.io PodGroup
// as scheduler-plugins' PodGroup controller (v0.34) writes it, so that the
// tools written for it need not run that controller beside Muster. Its
// CRD has a status subresource: the status alone is written.
func (c *Controller) syncSchedulerPlugins(ctx context.Context, key gang.Key, s *gang.Status) (requeue bool, err error) {
	if c.schedulerPlugins == nil {
		return false, nil
	}
	pg := c.manager.SchedulerPluginsPodGroup(key)
	if pg == nil {
		return false, nil
	}
	status := schedulerPluginsStatus(pg, s, func() *v1.Pod { return c.someMember(key) }, metav1.Now())
	if equality.Semantic.DeepEqual(status, pg.Status) {
		return false, nil
	}
	updated := pg.DeepCopy()
	updated.Status = status
	_, err = c.schedulerPlugins.SchedulingV1alpha1().PodGroups(pg.Namespace).UpdateStatus(ctx, updated, metav1.UpdateOptions{})
	return written(err)
}

// someMember is a live member of the gang, the oldest pending one first;
// nil when it has none.
func (c *Controller) someMember(key gang.Key) *v1.Pod {
	if pending := c.manager.PendingMembers(key); len(pending) > 0 {
		return pending[0]
	}
	if placed := c.manager.PlacedMembers(key); len(placed) > 0 {
		return placed[len(placed)-1] // newest first
	}
	return nil
}

// schedulerPluginsStatus is the status pg should have given its gang's
// state. scheduler-plugins' controller takes one step per reconcile and is
// requeued by its own write; here the steps are taken until the phase
// holds. scheduleStartTime, which v0.34 leaves unset (older releases'
// coscheduling plugin set it), is when Muster first tried to place the gang.
func schedulerPluginsStatus(pg *spv1alpha1.PodGroup, s *gang.Status, member func() *v1.Pod, now metav1.Time) spv1alpha1.PodGroupStatus {
	status := *pg.Status.DeepCopy()
	if status.Phase == spv1alpha1.PodGroupFinished || status.Phase == spv1alpha1.PodGroupFailed {
		return status // final: the controller leaves it
	}
	// "" → Pending → Scheduling → the phase its members' phases give:
	// four steps, the last one seeing the phase hold.
	for range 4 {
		prev := status.Phase
		schedulerPluginsStep(&status, pg.Spec.MinMember, s, member)
		if status.Phase == prev {
			break
		}
	}
	if status.ScheduleStartTime.IsZero() && (s.Tried || s.Placed > 0 || s.Scheduled > 0) {
		status.ScheduleStartTime = now
	}
	return status
}

// schedulerPluginsStep is one reconcile of scheduler-plugins' PodGroup
// controller, which counts every pod of the group, whatever its phase, and
// updates the counts only past Pending.
func schedulerPluginsStep(status *spv1alpha1.PodGroupStatus, min int32, s *gang.Status, member func() *v1.Pod) {
	switch status.Phase {
	case "":
		status.Phase = spv1alpha1.PodGroupPending
	case spv1alpha1.PodGroupPending:
		if s.Members >= min {
			status.Phase = spv1alpha1.PodGroupScheduling
			if p := member(); p != nil {
				fillOccupiedBy(status, p)
			}
		}
	case spv1alpha1.PodGroupFinished, spv1alpha1.PodGroupFailed:
	default:
		status.Running, status.Succeeded, status.Failed = s.Running, s.Succeeded, s.Failed
		if s.Members < min {
			status.Phase = spv1alpha1.PodGroupPending
			return
		}
		status.Phase = spv1alpha1.PodGroupRunning
		if s.Succeeded+s.Running < min {
			status.Phase = spv1alpha1.PodGroupScheduling
		}
		if s.Failed != 0 && s.Failed+s.Running+s.Succeeded >= min {
			status.Phase = spv1alpha1.PodGroupFailed
		}
		if s.Succeeded >= min {
			status.Phase = spv1alpha1.PodGroupFinished
		}
	}
}

// fillOccupiedBy names the workload that occupies the group: the owners of
// a member, "namespace/name" each, sorted and joined by commas; a pod with
// no owner leaves it as it is.
func fillOccupiedBy(status *spv1alpha1.PodGroupStatus, pod *v1.Pod) {
	if len(pod.OwnerReferences) == 0 {
		return
	}
	refs := make([]string, 0, len(pod.OwnerReferences))
	for _, ref := range pod.OwnerReferences {
		refs = append(refs, fmt.Sprintf("%s/%s", pod.Namespace, ref.Name))
	}
	sort.Strings(refs)
	status.OccupiedBy = strings.Join(refs, ",")
}

package podgroup

import (
	"context"
	"encoding/json"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/uuid"
	vcv1beta1 "volcano.sh/apis/pkg/apis/scheduling/v1beta1"

	"github.com/muster-sched/muster/pkg/gang"
)

// VolcanoReasonScheduled is vc-scheduler's reason of the Scheduled
// condition (its gang plugin has no constant for it).
const VolcanoReasonScheduled = "tasks in gang are ready to be scheduled"

// syncVolcano writes the status of a scheduling.volcano.sh PodGroup as
// vc-scheduler writes it, so that Volcano's Job controller (which creates
// a Job's pods once its PodGroup leaves Pending), vcctl and dashboards read
// Muster's decisions. Volcano's CRD has no status subresource: the object
// is written (its status patched), which bumps its generation; the
// gang state and the scheduling queue ignore such updates (gang.SpecChanged),
// so the write wakes nothing that would write again.
func (c *Controller) syncVolcano(ctx context.Context, key gang.Key, s *gang.Status) (requeue bool, err error) {
	if c.volcano == nil {
		return false, nil
	}
	pg := c.manager.VolcanoPodGroup(key)
	if pg == nil {
		return false, nil
	}
	now := metav1.Now()
	status := volcanoStatus(pg, s, c.isAdmitted(key), now, newTransitionID)
	if s.Members == 0 && status.Phase == vcv1beta1.PodGroupPending {
		phase, why, retry := c.enqueueVolcano(pg)
		status.Phase = phase
		// While it stays refused, its condition is not rewritten for every
		// move of its queue's figures, which the message quotes.
		if i := lastTransitioned(status.Conditions); why != "" && (i < 0 || !refusedAtEnqueue(status.Conditions[i])) {
			cond := vcv1beta1.PodGroupCondition{Type: vcv1beta1.PodGroupUnschedulableType, Status: v1.ConditionTrue, Reason: vcv1beta1.NotEnoughResourcesReason, Message: why}
			status.Conditions = setVolcanoCondition(status.Conditions, cond, now, newTransitionID)
		}
		if retry {
			c.retryAfter(key, enqueueRetry)
		}
	}
	if equality.Semantic.DeepEqual(status, pg.Status) {
		return false, nil
	}
	// A merge patch of status alone, on the version read: an update of the
	// whole object would drop the spec fields a newer Volcano has and
	// these types lack.
	patch, err := json.Marshal(map[string]any{
		"metadata": map[string]any{"resourceVersion": pg.ResourceVersion},
		"status":   status,
	})
	if err != nil {
		return false, err
	}
	_, err = c.volcano.SchedulingV1beta1().PodGroups(pg.Namespace).Patch(ctx, pg.Name, types.MergePatchType, patch, metav1.PatchOptions{})
	if err != nil {
		return written(err)
	}
	if status.Phase != pg.Status.Phase && pg.Status.Phase != "" {
		c.recorder.Eventf(pg, nil, v1.EventTypeNormal, string(status.Phase), "Schedule",
			"phase %s -> %s: %d running, %d succeeded, %d failed", pg.Status.Phase, status.Phase,
			status.Running, status.Succeeded, status.Failed)
	}
	if s.Members == 0 && status.Phase == vcv1beta1.PodGroupInqueue && pg.Status.Phase != vcv1beta1.PodGroupInqueue {
		c.enqueued(ctx, key, pg.ResourceVersion)
	}
	return false, nil
}

// refusedAtEnqueue reports whether c is the condition a refused enqueue
// writes.
func refusedAtEnqueue(c vcv1beta1.PodGroupCondition) bool {
	return c.Type == vcv1beta1.PodGroupUnschedulableType && c.Reason == vcv1beta1.NotEnoughResourcesReason
}

// newTransitionID identifies a condition's transition, where vc-scheduler
// puts the UID of the session that made it.
func newTransitionID() string { return string(uuid.NewUUID()) }

// volcanoStatus is the status pg should have given its gang's state.
func volcanoStatus(pg *vcv1beta1.PodGroup, s *gang.Status, admitted bool, now metav1.Time, newID func() string) vcv1beta1.PodGroupStatus {
	status := *pg.Status.DeepCopy()
	status.Phase = volcanoPhase(s, pg.Status.Phase, admitted)
	status.Running, status.Succeeded, status.Failed = s.Running, s.Succeeded, s.Failed
	if cond, ok := volcanoCondition(s, status.Phase); ok {
		status.Conditions = setVolcanoCondition(status.Conditions, cond, now, newID)
	}
	return status
}

// volcanoPhase is vc-scheduler's phase of the gang (getPodGroupPhase, after
// its enqueue action): Unknown while members run but the gang cannot be
// completed; Running once minMember members are bound, Completed once
// every bound member finished (Volcano has no Failed phase: failed members
// count as finished, and its Job controller judges failures); otherwise
// Inqueue once admitted by its queue, which lasts until it runs, else
// Pending. Muster's admission lasts one placement attempt: a gang tried
// (a plan, or a failed try) was admitted for that try.
func volcanoPhase(s *gang.Status, prev vcv1beta1.PodGroupPhase, admitted bool) vcv1beta1.PodGroupPhase {
	_, waiting := waitingReason(s)
	switch {
	case s.Running > 0 && waiting != "":
		return vcv1beta1.PodGroupUnknown
	case s.Scheduled >= max(s.Spec.MinMember, 1):
		// Placed counts live members bound or reserved, succeeded ones
		// included: all of them succeeded, and no member being deleted
		// is still on its node.
		if s.Placed <= s.Succeeded && s.Succeeded+s.Failed >= s.Scheduled {
			return vcv1beta1.PodGroupCompleted
		}
		return vcv1beta1.PodGroupRunning
	case prev == vcv1beta1.PodGroupInqueue || admitted || s.Tried:
		return vcv1beta1.PodGroupInqueue
	}
	return vcv1beta1.PodGroupPending
}

// volcanoCondition is the condition vc-scheduler's gang plugin records for
// the gang: Scheduled once minMember members (each role its minimum) are
// placed, Unschedulable with why while it cannot be; ok is false when there
// is nothing to record: no members (Volcano records nothing for a job with
// no tasks), being placed, or finished.
func volcanoCondition(s *gang.Status, phase vcv1beta1.PodGroupPhase) (c vcv1beta1.PodGroupCondition, ok bool) {
	if s.Members == 0 || phase == vcv1beta1.PodGroupCompleted {
		return c, false
	}
	if s.Ready() {
		return vcv1beta1.PodGroupCondition{Type: vcv1beta1.PodGroupScheduled, Status: v1.ConditionTrue, Reason: VolcanoReasonScheduled}, true
	}
	_, msg := waitingReason(s)
	if msg == "" {
		return c, false
	}
	return vcv1beta1.PodGroupCondition{Type: vcv1beta1.PodGroupUnschedulableType, Status: v1.ConditionTrue, Reason: volcanoReason(s), Message: msg}, true
}

// volcanoReason is Volcano's reason for a gang that waits: too few
// members, too few of a role, or (valid) no room for it. A gang invalid
// for another reason (its PodGroup names a PriorityClass that does not
// exist, say) has Muster's reason.
func volcanoReason(s *gang.Status) string {
	switch {
	case s.Invalid == "":
		return vcv1beta1.NotEnoughResourcesReason
	case s.Live < s.Spec.MinMember:
		return vcv1beta1.NotEnoughPodsReason
	}
	for role, min := range s.Spec.MinTaskMember {
		if s.LiveByRole[role] < min {
			return vcv1beta1.NotEnoughPodsOfTaskReason
		}
	}
	return ReasonInvalid
}

// setVolcanoCondition puts cond in conds, replacing the condition of its
// type, as vc-scheduler does. vc-scheduler never sets a condition False:
// readers (its Job controller) take the True condition transitioned last
// as the gang's state, so cond keeps its transition only while it is
// unchanged (transition time and ID aside, as vc-scheduler compares) and
// still the last; otherwise it transitions now, with a new ID, and goes
// first, where it wins a tie within the second of the timestamps.
func setVolcanoCondition(conds []vcv1beta1.PodGroupCondition, cond vcv1beta1.PodGroupCondition, now metav1.Time, newID func() string) []vcv1beta1.PodGroupCondition {
	if i := lastTransitioned(conds); i >= 0 {
		old := conds[i]
		if old.Type == cond.Type && old.Status == cond.Status && old.Reason == cond.Reason && old.Message == cond.Message {
			return conds
		}
		if old.LastTransitionTime.After(now.Time) {
			// Written by a clock ahead of this one: a tie, not an
			// earlier time, keeps cond the last, and its write the last.
			now = old.LastTransitionTime
		}
	}
	cond.LastTransitionTime, cond.TransitionID = now, newID()
	out := make([]vcv1beta1.PodGroupCondition, 0, len(conds)+1)
	out = append(out, cond)
	for _, c := range conds {
		if c.Type != cond.Type {
			out = append(out, c)
		}
	}
	return out
}

// lastTransitioned is the index of the True condition that Volcano's Job
// controller reads as the latest: the first of those transitioned last;
// -1 when none is True.
func lastTransitioned(conds []vcv1beta1.PodGroupCondition) int {
	last := -1
	for i, c := range conds {
		if c.Status == v1.ConditionTrue && (last < 0 || c.LastTransitionTime.After(conds[last].LastTransitionTime.Time)) {
			last = i
		}
	}
	return last
}

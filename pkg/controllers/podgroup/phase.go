// Package podgroup writes the status of Muster PodGroups: phase, member
// counts, and conditions that say why a gang waits; and that of upstream's,
// Volcano's and scheduler-plugins' PodGroups as their own schedulers and
// controllers write it. It runs in the scheduler process, one
// leader-elected instance per cluster, and reads everything from the gang
// state the scheduler keeps.
package podgroup

import (
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/muster-sched/muster/apis/scheduling/v1alpha1"
	"github.com/muster-sched/muster/pkg/gang"
)

// ConditionScheduled is True once at least minMember members are bound.
const ConditionScheduled = "Scheduled"

// Reasons of the Scheduled condition.
const (
	ReasonScheduled     = "MinMemberScheduled"
	ReasonInvalid       = "Invalid"
	ReasonUnschedulable = "Unschedulable"
	ReasonScheduling    = "Scheduling"
	ReasonFinished      = "Finished"
)

// PhaseOf derives the gang's phase from its members; prev is the phase
// recorded before, which tells Unknown (was running) from Inqueue.
func PhaseOf(s *gang.Status, prev v1alpha1.PodGroupPhase) v1alpha1.PodGroupPhase {
	min := s.Spec.MinMember
	switch {
	case s.Failed > 0 && s.Members-s.Failed < min:
		return v1alpha1.PodGroupFailed
	case s.Succeeded >= min && s.Succeeded+s.Failed == s.Members:
		return v1alpha1.PodGroupCompleted
	case s.Scheduled >= min:
		return v1alpha1.PodGroupRunning
	case prev == v1alpha1.PodGroupRunning || prev == v1alpha1.PodGroupUnknown:
		return v1alpha1.PodGroupUnknown
	case s.Invalid == "":
		return v1alpha1.PodGroupInqueue
	}
	return v1alpha1.PodGroupPending
}

// scheduledCondition says whether minMember members are bound and, if not,
// why not, in words a user can act on.
func scheduledCondition(s *gang.Status, phase v1alpha1.PodGroupPhase, generation int64) metav1.Condition {
	c := metav1.Condition{Type: ConditionScheduled, Status: metav1.ConditionFalse, ObservedGeneration: generation}
	switch {
	case phase == v1alpha1.PodGroupCompleted || phase == v1alpha1.PodGroupFailed:
		c.Status, c.Reason = metav1.ConditionTrue, ReasonFinished
		c.Message = fmt.Sprintf("%d succeeded, %d failed of %d members", s.Succeeded, s.Failed, s.Members)
	case s.Scheduled >= s.Spec.MinMember:
		c.Status, c.Reason = metav1.ConditionTrue, ReasonScheduled
		c.Message = fmt.Sprintf("%d members scheduled, minMember %d", s.Scheduled, s.Spec.MinMember)
	case s.Invalid != "":
		c.Reason, c.Message = ReasonInvalid, s.Invalid
	case s.Waiting != "":
		c.Reason, c.Message = ReasonUnschedulable, s.Waiting
	default:
		c.Reason = ReasonScheduling
		c.Message = fmt.Sprintf("%d of minMember %d placed", s.Placed, s.Spec.MinMember)
	}
	return c
}

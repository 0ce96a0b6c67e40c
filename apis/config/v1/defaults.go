package v1

import (
	corev1 "k8s.io/api/core/v1"
	schedulerconfigv1 "k8s.io/kube-scheduler/config/v1"
	"k8s.io/utils/ptr"

	"github.com/muster-sched/muster/apis/scheduling/v1alpha1"
)

func defaultBinpackResources() []schedulerconfigv1.ResourceSpec {
	return []schedulerconfigv1.ResourceSpec{
		{Name: string(corev1.ResourceCPU), Weight: 1},
		{Name: string(corev1.ResourceMemory), Weight: 1},
	}
}

// DefaultScheduleTimeoutSeconds is how long placed gang members wait for
// the rest by default.
const DefaultScheduleTimeoutSeconds int64 = 60

// DefaultPlanStepMilliseconds is how long one cycle may plan a gang by
// default: pods in no gang then wait at most about that long for a big
// gang's plan.
const DefaultPlanStepMilliseconds int64 = 100

// SetDefaults_GangArgs sets the default Permit timeout and plan step.
func SetDefaults_GangArgs(obj *GangArgs) {
	if obj.DefaultScheduleTimeoutSeconds == nil {
		v := DefaultScheduleTimeoutSeconds
		obj.DefaultScheduleTimeoutSeconds = &v
	}
	if obj.PlanStepMilliseconds == nil {
		obj.PlanStepMilliseconds = ptr.To(DefaultPlanStepMilliseconds)
	}
	if len(obj.TopologyLevels) == 0 {
		obj.TopologyLevels = DefaultTopologyLevels()
	}
}

// DefaultTopologyLevels are host, rack, block and zone.
func DefaultTopologyLevels() []string {
	return []string{corev1.LabelHostname, v1alpha1.LabelRack, v1alpha1.LabelBlock, corev1.LabelTopologyZone}
}

// DefaultOvercommitFactor is how far queue admission may commit the
// cluster by default.
const DefaultOvercommitFactor = 1.2

// DefaultAuditIntervalSeconds is how often the queue accounting is audited
// by default.
const DefaultAuditIntervalSeconds int64 = 30

// SetDefaults_ProportionArgs sets the default overcommit factor and audit
// interval; DRF preemption is off unless asked for.
func SetDefaults_ProportionArgs(obj *ProportionArgs) {
	if obj.OvercommitFactor == nil {
		v := DefaultOvercommitFactor
		obj.OvercommitFactor = &v
	}
	if obj.DRFPreemption == nil {
		obj.DRFPreemption = ptr.To(false)
	}
	if obj.AuditIntervalSeconds == nil {
		obj.AuditIntervalSeconds = ptr.To(DefaultAuditIntervalSeconds)
	}
}

// SetDefaults_CapacityArgs sets the default overcommit factor and audit
// interval; DRF preemption is off unless asked for.
func SetDefaults_CapacityArgs(obj *CapacityArgs) {
	if obj.OvercommitFactor == nil {
		v := DefaultOvercommitFactor
		obj.OvercommitFactor = &v
	}
	if obj.DRFPreemption == nil {
		obj.DRFPreemption = ptr.To(false)
	}
	if obj.AuditIntervalSeconds == nil {
		obj.AuditIntervalSeconds = ptr.To(DefaultAuditIntervalSeconds)
	}
}

// SetDefaults_BinpackArgs packs on cpu and memory, weight 1 each, unless
// resources are given.
func SetDefaults_BinpackArgs(obj *BinpackArgs) {
	if len(obj.Resources) == 0 {
		obj.Resources = defaultBinpackResources()
	}
}

package v1

import (
	corev1 "k8s.io/api/core/v1"
	schedulerconfigv1 "k8s.io/kube-scheduler/config/v1"
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

// SetDefaults_GangArgs sets the default Permit timeout.
func SetDefaults_GangArgs(obj *GangArgs) {
	if obj.DefaultScheduleTimeoutSeconds == nil {
		v := DefaultScheduleTimeoutSeconds
		obj.DefaultScheduleTimeoutSeconds = &v
	}
}

// SetDefaults_BinpackArgs packs on cpu and memory, weight 1 each, unless
// resources are given.
func SetDefaults_BinpackArgs(obj *BinpackArgs) {
	if len(obj.Resources) == 0 {
		obj.Resources = defaultBinpackResources()
	}
}

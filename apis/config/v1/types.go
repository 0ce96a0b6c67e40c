package v1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	schedulerconfigv1 "k8s.io/kube-scheduler/config/v1"
)

// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object

// GangArgs configures the Gang plugin.
type GangArgs struct {
	metav1.TypeMeta `json:",inline"`

	// DefaultScheduleTimeoutSeconds bounds how long placed members wait at
	// Permit for the rest of their gang, for gangs that set no
	// scheduleTimeoutSeconds of their own. Default 60.
	DefaultScheduleTimeoutSeconds *int64 `json:"defaultScheduleTimeoutSeconds,omitempty"`
	// PlanStepMilliseconds bounds the time one scheduling cycle spends on
	// a gang's placement plan: a bigger gang is planned over several of
	// its members' cycles, and other pods are scheduled in between, with
	// the room planned so far kept for the gang. Default 100; at least 1.
	PlanStepMilliseconds *int64 `json:"planStepMilliseconds,omitempty"`
	// TopologyLevels are the node label keys of the topology levels,
	// tightest first. A gang's preferred level falls back along them, one
	// at a time, and a Volcano PodGroup's networkTopology tier N is level
	// N. Default: kubernetes.io/hostname, topology.muster.dev/rack,
	// topology.muster.dev/block, topology.kubernetes.io/zone.
	TopologyLevels []string `json:"topologyLevels,omitempty"`
}

// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object

// ProportionArgs configures the Proportion queue policy: deserved shares by
// weight, and deserved as the ceiling for placement.
type ProportionArgs struct {
	metav1.TypeMeta `json:",inline"`

	// OvercommitFactor bounds admission: a gang starts only if its
	// minResources plus what other admitted gangs still need fit within
	// factor × the cluster's allocatable, less what is in use. Default 1.2;
	// from 1 to 100.
	OvercommitFactor *float64 `json:"overcommitFactor,omitempty"`
	// DRFPreemption lets a gang evict members above minMember of another
	// gang of the same queue and priority when that lowers the gap between
	// their dominant shares (the preemptor's share after < the victim's
	// share after): DRF fairness among running jobs, at the price of
	// evicting work of equal priority. Default false.
	DRFPreemption *bool `json:"drfPreemption,omitempty"`
	// AuditIntervalSeconds is how often the queue accounting's running
	// sums are recounted from the informers' caches, and repaired where
	// they drifted (muster_accounting_drift_total counts it). Default 30;
	// 0 turns the periodic audit off (SIGUSR2 still runs one).
	AuditIntervalSeconds *int64 `json:"auditIntervalSeconds,omitempty"`
}

// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object

// CapacityArgs configures the Capacity queue policy: deserved from each
// Queue's spec, and realCapability as the ceiling for placement.
type CapacityArgs struct {
	metav1.TypeMeta `json:",inline"`

	// OvercommitFactor: as for ProportionArgs. Default 1.2; from 1 to 100.
	OvercommitFactor *float64 `json:"overcommitFactor,omitempty"`
	// DRFPreemption: as for ProportionArgs. Default false.
	DRFPreemption *bool `json:"drfPreemption,omitempty"`
	// AuditIntervalSeconds: as for ProportionArgs. Default 30; 0: off.
	AuditIntervalSeconds *int64 `json:"auditIntervalSeconds,omitempty"`
}

// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object

// BinpackArgs configures the Binpack score plugin.
type BinpackArgs struct {
	metav1.TypeMeta `json:",inline"`

	// Resources are the resources packed on and their weights (1..100).
	// Defaults to cpu and memory with weight 1. An extended resource such as
	// nvidia.com/gpu is scored only when listed here.
	// +listType=map
	// +listMapKey=name
	Resources []schedulerconfigv1.ResourceSpec `json:"resources,omitempty"`
	// DomainLevels are node label keys of topology domains, e.g.
	// topology.muster.dev/rack: nodes in fuller domains score higher, so
	// that whole domains stay free for the gangs that need them. Empty
	// (the default): nodes are scored alone.
	DomainLevels []string `json:"domainLevels,omitempty"`
}

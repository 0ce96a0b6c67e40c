package config

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	schedconfig "k8s.io/kubernetes/pkg/scheduler/apis/config"
)

// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object

// GangArgs configures the Gang plugin.
type GangArgs struct {
	metav1.TypeMeta

	// DefaultScheduleTimeoutSeconds bounds how long placed members wait at
	// Permit for the rest of their gang, for gangs that set no
	// scheduleTimeoutSeconds of their own.
	DefaultScheduleTimeoutSeconds int64
	// PlanStepMilliseconds bounds the time one scheduling cycle spends on
	// a gang's placement plan: a bigger gang is planned over several of
	// its members' cycles, and other pods are scheduled in between.
	PlanStepMilliseconds int64
	// TopologyLevels are the node label keys of the topology levels,
	// tightest first: a gang's preferred level falls back along them.
	TopologyLevels []string
}

// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object

// ProportionArgs configures the Proportion queue policy.
type ProportionArgs struct {
	metav1.TypeMeta

	// OvercommitFactor bounds admission: a gang starts only if its
	// minResources plus what other admitted gangs still need fit within
	// factor × the cluster's allocatable, less what is in use.
	OvercommitFactor float64
	// DRFPreemption lets a gang evict members above minMember of a gang of
	// the same queue and priority when that lowers the gap between their
	// dominant shares: the preemptor's share after < the victim's after.
	DRFPreemption bool
	// AuditIntervalSeconds is how often the queue accounting is recounted
	// from the informers' caches and repaired where it drifted; 0: never.
	AuditIntervalSeconds int64
}

// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object

// CapacityArgs configures the Capacity queue policy.
type CapacityArgs struct {
	metav1.TypeMeta

	// OvercommitFactor, DRFPreemption and AuditIntervalSeconds: as for
	// ProportionArgs.
	OvercommitFactor     float64
	DRFPreemption        bool
	AuditIntervalSeconds int64
}

// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object

// BinpackArgs configures the Binpack score plugin.
type BinpackArgs struct {
	metav1.TypeMeta

	// Resources are the resources packed on and their weights (1..100).
	// A resource a pod does not request is not scored for that pod.
	Resources []schedconfig.ResourceSpec
	// DomainLevels are node label keys of topology domains (racks,
	// blocks); nodes in fuller domains score higher, so that whole domains
	// stay free. Empty: nodes are scored alone.
	DomainLevels []string
}

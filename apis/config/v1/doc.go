// Package v1 is the versioned (kubescheduler.config.k8s.io/v1) form of
// Muster's plugin arguments, as users write them in a
// KubeSchedulerConfiguration.
//
// +k8s:deepcopy-gen=package
// +k8s:conversion-gen=github.com/muster-sched/muster/apis/config
// +k8s:defaulter-gen=TypeMeta
// +k8s:defaulter-gen-input=github.com/muster-sched/muster/apis/config/v1
// +groupName=kubescheduler.config.k8s.io
package v1

// Package v1alpha1 holds Muster's batch API: PodGroup (one gang) and Queue
// (a share of the cluster), group scheduling.muster.dev.
//
// +kubebuilder:object:generate=true
// +groupName=scheduling.muster.dev
package v1alpha1

package config

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	schedconfig "k8s.io/kubernetes/pkg/scheduler/apis/config"
)

// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object

// BinpackArgs configures the Binpack score plugin.
type BinpackArgs struct {
	metav1.TypeMeta

	// Resources are the resources packed on and their weights (1..100).
	// A resource a pod does not request is not scored for that pod.
	Resources []schedconfig.ResourceSpec
}

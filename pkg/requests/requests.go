// Package requests says what a pod requests as kube-scheduler charges it
// to its node: one function for gang status, queue accounting, the gang
// filter and Binpack alike, so that no figure of Muster's differs from
// what the nodes are charged.
package requests

import (
	v1 "k8s.io/api/core/v1"
	utilfeature "k8s.io/apiserver/pkg/util/feature"
	resourcehelper "k8s.io/component-helpers/resource"
	"k8s.io/kubernetes/pkg/features"
)

// Options are the options kube-scheduler sums a pod's requests with under
// the process's feature gates (framework.PodInfo.CalculateResource): init
// containers and sidecars, pod overhead and pod-level resources always;
// the resources of an in-place resize and of DRA claims on node-allocatable
// devices where their gates are on.
func Options() resourcehelper.PodResourcesOptions {
	return resourcehelper.PodResourcesOptions{
		UseStatusResources: utilfeature.DefaultFeatureGate.Enabled(features.InPlacePodVerticalScaling),
		InPlacePodLevelResourcesVerticalScalingEnabled: utilfeature.DefaultFeatureGate.Enabled(features.InPlacePodLevelResourcesVerticalScaling),
		SkipPodLevelResources:                          !utilfeature.DefaultFeatureGate.Enabled(features.PodLevelResources),
		UseDRANodeAllocatableResourceClaimStatus:       utilfeature.DefaultFeatureGate.Enabled(features.DRANodeAllocatableResources),
	}
}

// Of is what pod requests, as kube-scheduler charges it to its node.
func Of(pod *v1.Pod) v1.ResourceList {
	return resourcehelper.PodRequests(pod, Options())
}

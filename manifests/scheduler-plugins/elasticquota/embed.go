// Package elasticquota embeds scheduler-plugins' ElasticQuota CRD
// (scheduling.x-k8s.io/v1alpha1, copied from sigs.k8s.io/scheduler-plugins
// v0.34.7), which its CapacityScheduling plugin reads. The scenario runner
// installs it for the capacityscheduling profile.
package elasticquota

import "embed"

// FS holds the CRD manifest.
//
//go:embed *.yaml
var FS embed.FS

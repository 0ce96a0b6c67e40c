// Package schedulerplugins embeds scheduler-plugins' PodGroup CRD
// (scheduling.x-k8s.io/v1alpha1, copied from sigs.k8s.io/scheduler-plugins
// v0.34.7), for clusters whose operators create those PodGroups and have no
// scheduler-plugins installation of their own.
package schedulerplugins

import "embed"

// FS holds the CRD manifest.
//
//go:embed *.yaml
var FS embed.FS

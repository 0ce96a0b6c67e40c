// Package volcano embeds Volcano's PodGroup and Queue CRDs
// (scheduling.volcano.sh/v1beta1), generated from volcano.sh/apis, for
// tests and for clusters that run Muster without Volcano installed.
package volcano

import "embed"

// FS holds the CRD manifests.
//
//go:embed *.yaml
var FS embed.FS

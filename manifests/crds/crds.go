// Package crds embeds Muster's generated CustomResourceDefinitions so that
// the sandbox and the tests install exactly what users apply.
package crds

import "embed"

// FS holds the CRD manifests, one file per kind.
//
//go:embed *.yaml
var FS embed.FS

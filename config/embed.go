// Package config embeds the shipped KubeSchedulerConfigurations so that the
// muster CLI runs exactly what users deploy.
package config

import "embed"

// FS holds the configurations, by file name.
//
//go:embed *.yaml
var FS embed.FS

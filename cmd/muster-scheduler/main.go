// Command muster-scheduler is kube-scheduler with Muster's batch plugins
// registered: every kube-scheduler flag and KubeSchedulerConfiguration works.
package main

import (
	"os"

	"k8s.io/component-base/cli"
	_ "k8s.io/component-base/logs/json/register"
	_ "k8s.io/component-base/metrics/prometheus/clientgo"
	_ "k8s.io/component-base/metrics/prometheus/version"
	"k8s.io/kubernetes/cmd/kube-scheduler/app"

	"github.com/muster-sched/muster/pkg/plugins"
)

func main() {
	command := app.NewSchedulerCommand(plugins.Options()...)
	command.Use = "muster-scheduler"
	os.Exit(cli.Run(command))
}

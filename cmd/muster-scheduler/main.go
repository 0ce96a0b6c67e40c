// Command muster-scheduler is kube-scheduler with Muster's batch plugins
// registered: every kube-scheduler flag and KubeSchedulerConfiguration works.
package main

import (
	"os"

	"k8s.io/component-base/cli"
	_ "k8s.io/component-base/logs/json/register"
	_ "k8s.io/component-base/metrics/prometheus/clientgo"
	_ "k8s.io/component-base/metrics/prometheus/version"

	"github.com/muster-sched/muster/pkg/server"
)

func main() {
	os.Exit(cli.Run(server.NewCommand()))
}

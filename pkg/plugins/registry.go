// Package plugins registers Muster's scheduler-framework plugins and their
// arguments with kube-scheduler.
package plugins

import (
	"k8s.io/kubernetes/cmd/kube-scheduler/app"

	// Muster's plugin args decode, default and validate through
	// kube-scheduler's own config scheme.
	_ "github.com/muster-sched/muster/apis/config/scheme"
	"github.com/muster-sched/muster/pkg/plugins/binpack"
	"github.com/muster-sched/muster/pkg/plugins/gang"
	"github.com/muster-sched/muster/pkg/plugins/queue"
)

// Options registers every Muster plugin with kube-scheduler's command.
func Options() []app.Option {
	return []app.Option{
		app.WithPlugin(binpack.Name, binpack.New),
		app.WithPlugin(gang.Name, gang.New),
		app.WithPlugin(queue.ProportionName, queue.NewProportion),
		app.WithPlugin(queue.CapacityName, queue.NewCapacity),
	}
}

// Package plugins registers Muster's scheduler-framework plugins and their
// arguments with kube-scheduler.
package plugins

import (
	"context"

	"k8s.io/apimachinery/pkg/runtime"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/cmd/kube-scheduler/app"

	// Muster's plugin args decode, default and validate through
	// kube-scheduler's own config scheme.
	_ "github.com/muster-sched/muster/apis/config/scheme"
	"github.com/muster-sched/muster/pkg/batch"
	"github.com/muster-sched/muster/pkg/plugins/binpack"
	"github.com/muster-sched/muster/pkg/plugins/gang"
	"github.com/muster-sched/muster/pkg/plugins/queue"
)

// Options registers every Muster plugin with kube-scheduler; the plugins of
// every profile share the batch state of
// process; the queue plugins share one set of reclaim records.
func Options(process *batch.Process) []app.Option {
	records := queue.NewRecords()
	return []app.Option{
		app.WithPlugin(binpack.Name, binpack.New),
		app.WithPlugin(gang.Name, func(ctx context.Context, args runtime.Object, h fwk.Handle) (fwk.Plugin, error) {
			return gang.New(ctx, args, h, process)
		}),
		app.WithPlugin(queue.ProportionName, func(ctx context.Context, args runtime.Object, h fwk.Handle) (fwk.Plugin, error) {
			return queue.NewProportion(ctx, args, h, process, records)
		}),
		app.WithPlugin(queue.CapacityName, func(ctx context.Context, args runtime.Object, h fwk.Handle) (fwk.Plugin, error) {
			return queue.NewCapacity(ctx, args, h, process, records)
		}),
	}
}

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
	"github.com/muster-sched/muster/pkg/plugins/gangscheduling"
	"github.com/muster-sched/muster/pkg/plugins/queuepolicy"
)

// Options registers every Muster plugin with kube-scheduler. The plugins of
// every profile share the batch state of process, and the queue plugins one
// set of reclaim records.
func Options(process *batch.Process) []app.Option {
	records := queuepolicy.NewRecords()
	return []app.Option{
		app.WithPlugin(binpack.Name, binpack.New),
		app.WithPlugin(gangscheduling.Name, func(ctx context.Context, args runtime.Object, h fwk.Handle) (fwk.Plugin, error) {
			return gangscheduling.New(ctx, args, h, process)
		}),
		app.WithPlugin(queuepolicy.ProportionName, func(ctx context.Context, args runtime.Object, h fwk.Handle) (fwk.Plugin, error) {
			return queuepolicy.NewProportion(ctx, args, h, process, records)
		}),
		app.WithPlugin(queuepolicy.CapacityName, func(ctx context.Context, args runtime.Object, h fwk.Handle) (fwk.Plugin, error) {
			return queuepolicy.NewCapacity(ctx, args, h, process, records)
		}),
	}
}

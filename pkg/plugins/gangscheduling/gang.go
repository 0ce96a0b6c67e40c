// Package gang is the scheduler-framework adapter of Muster's gang
// scheduling: all members of a gang are placed together or none is, and a
// gang that cannot be placed whole reserves nothing. The gang state lives in
// pkg/gang, shared by every profile of the process.
package gangscheduling

import (
	"context"
	"fmt"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework"

	"github.com/muster-sched/muster/apis/config"
	"github.com/muster-sched/muster/apis/config/validation"
	"github.com/muster-sched/muster/pkg/batch"
	"github.com/muster-sched/muster/pkg/gang"
	"github.com/muster-sched/muster/pkg/placement"
	"github.com/muster-sched/muster/pkg/queue"
)

// Name is the plugin's name in the registry and in configurations.
const Name = "Gang"

// Plugin implements gang scheduling.
type Plugin struct {
	handle    fwk.Handle
	framework framework.Framework
	placer    *placement.Placer
	batch     *batch.Batch
	manager   *gang.Manager
	binds     *batch.Binds
	timeout   time.Duration
	// planStep bounds the time a cycle spends on a gang's plan.
	planStep   time.Duration
	now        func() time.Time
	schedulers map[string]bool
	// queues is the queue accounting, nil while no queue policy is on.
	queues func() *queue.State
	// orders keeps what QueueSort read of each member (see Less).
	orders *orders
}

var (
	_ fwk.PreEnqueuePlugin  = &Plugin{}
	_ fwk.QueueSortPlugin   = &Plugin{}
	_ fwk.PreFilterPlugin   = &Plugin{}
	_ fwk.FilterPlugin      = &Plugin{}
	_ fwk.PostFilterPlugin  = &Plugin{}
	_ fwk.ReservePlugin     = &Plugin{}
	_ fwk.PermitPlugin      = &Plugin{}
	_ fwk.PreBindPlugin     = &Plugin{}
	_ fwk.PostBindPlugin    = &Plugin{}
	_ fwk.EnqueueExtensions = &Plugin{}
	_ fwk.SignPlugin        = &Plugin{}
)

// New builds the plugin. Every profile of the process shares its gang
// state, built on first use and stopped with ctx.
func New(ctx context.Context, obj runtime.Object, h fwk.Handle, process *batch.Process) (fwk.Plugin, error) {
	args, ok := obj.(*config.GangArgs)
	if !ok {
		return nil, fmt.Errorf("want args to be of type GangArgs, got %T", obj)
	}
	if err := validation.ValidateGangArgs(field.NewPath("gangArgs"), args); err != nil {
		return nil, err
	}
	fw, ok := h.(framework.Framework)
	if !ok {
		return nil, fmt.Errorf("gang scheduling needs the scheduler framework as its handle, got %T", h)
	}
	b, err := process.Batch(ctx, h)
	if err != nil {
		return nil, err
	}
	pl := &Plugin{
		handle:    h,
		framework: fw,
		placer:    &placement.Placer{Handle: h, Framework: fw},
		batch:     b,
		manager:   b.Gangs,
		binds:     b.Binds,
		timeout:   time.Duration(args.DefaultScheduleTimeoutSeconds) * time.Second,
		planStep:  time.Duration(args.PlanStepMilliseconds) * time.Millisecond,
		now:       time.Now,
		queues:    b.Queues,
		orders:    newOrders(),
	}
	b.SetTopologyLevels(fw.ProfileName(), args.TopologyLevels)
	if err := pl.watchWaiting(ctx); err != nil {
		return nil, err
	}
	return pl, nil
}

// Name returns the plugin's name.
func (pl *Plugin) Name() string { return Name }

// keyOf returns the pod's gang, if it has one.
func (pl *Plugin) keyOf(pod *v1.Pod) (gang.Key, bool) { return pl.manager.KeyOf(pod) }

// SignPod lets kube-scheduler's opportunistic batching reuse a cycle's
// results for a pod in no gang, which Gang's PreFilter skips; a profile
// with a plugin that cannot sign batches nothing at all. A member is never
// batched: it follows its gang's plan. Nor is any pod while a plan
// promises room: a reused result would skip Filter, which keeps pods off
// that room.
func (pl *Plugin) SignPod(_ context.Context, pod *v1.Pod) ([]fwk.SignFragment, *fwk.Status) {
	if _, ok := pl.keyOf(pod); ok {
		return nil, fwk.NewStatus(fwk.Unschedulable, "a gang member follows its gang's plan")
	}
	if pl.manager.Promising() {
		return nil, fwk.NewStatus(fwk.Unschedulable, "a gang's plan promises room: every pod is filtered")
	}
	return nil, nil
}

// PreEnqueue keeps a member out of the active queue until its gang is valid:
// enough members exist (per role too) and its labels or PodGroup make sense.
func (pl *Plugin) PreEnqueue(ctx context.Context, pod *v1.Pod) *fwk.Status {
	if _, ok := pl.keyOf(pod); !ok {
		return nil // not a gang's: PreEnqueue costs it nothing
	}
	if pl.batch.Hold(ctx, pod) {
		return fwk.NewStatus(fwk.UnschedulableAndUnresolvable, "waiting for the gang state to take in the cluster's pods (scheduler start)")
	}
	key, invalid, ok := pl.manager.Observe(pod)
	if !ok {
		return nil
	}
	if invalid != "" {
		klog.FromContext(ctx).V(5).Info("Gang not valid yet", "pod", klog.KObj(pod), "gang", key, "reason", invalid)
		return fwk.NewStatus(fwk.UnschedulableAndUnresolvable, "gang "+key.Namespace+"/"+key.Name+": "+invalid)
	}
	return nil
}

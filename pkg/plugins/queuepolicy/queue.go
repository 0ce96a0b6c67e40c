// Package queue holds the Proportion and Capacity plugins: two policies of
// queue sharing, alternatives to each other. Both admit a gang only when
// its queue can start it (admission before placement) and keep each queue
// under its ceiling: deserved for Proportion, realCapability for Capacity.
// The accounting lives in pkg/queue, shared by every profile.
package queuepolicy

import (
	"context"
	"fmt"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/events"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework"

	"github.com/muster-sched/muster/apis/config"
	"github.com/muster-sched/muster/apis/config/validation"
	"github.com/muster-sched/muster/pkg/batch"
	"github.com/muster-sched/muster/pkg/gang"
	"github.com/muster-sched/muster/pkg/metrics"
	"github.com/muster-sched/muster/pkg/placement"
	"github.com/muster-sched/muster/pkg/queue"
)

// Names of the two policies' plugins.
const (
	ProportionName = "Proportion"
	CapacityName   = "Capacity"
)

// Plugin enforces one queue policy.
type Plugin struct {
	name     string
	gangs    *gang.Manager
	state    *queue.State
	placer   *placement.Placer
	client   kubernetes.Interface
	recorder events.EventRecorder
	// pdbs reports whether disruption budgets forbid evicting the pods
	// together now.
	pdbs func([]*v1.Pod) bool
	// drfPreemption lets gangs of one queue and priority preempt each
	// other's members above minMember when that evens their dominant
	// shares.
	drfPreemption bool
	// volcanoQueues says that Volcano's Queues are queues too.
	volcanoQueues bool
	// topology is a gang's topology constraint as this profile places it
	// (batch.Batch.Topology): reclaim for a gang with a required key
	// evicts within one domain of it.
	topology func(*gang.Status) (keys []string, required string)

	// records are shared by every profile's queue plugin.
	records *Records
}

var (
	_ fwk.PreFilterPlugin   = &Plugin{}
	_ fwk.PostFilterPlugin  = &Plugin{}
	_ fwk.EnqueueExtensions = &Plugin{}
	_ fwk.SignPlugin        = &Plugin{}
)

// NewProportion builds the Proportion plugin.
// Every profile's queue plugin shares the process's batch state and
// reclaim records.
func NewProportion(ctx context.Context, obj runtime.Object, h fwk.Handle, process *batch.Process, records *Records) (fwk.Plugin, error) {
	args, ok := obj.(*config.ProportionArgs)
	if !ok {
		return nil, fmt.Errorf("want args to be of type ProportionArgs, got %T", obj)
	}
	return newPlugin(ctx, h, process, records, ProportionName, queue.Proportion, args.OvercommitFactor, args.DRFPreemption, args.AuditIntervalSeconds)
}

// NewCapacity builds the Capacity plugin.
func NewCapacity(ctx context.Context, obj runtime.Object, h fwk.Handle, process *batch.Process, records *Records) (fwk.Plugin, error) {
	args, ok := obj.(*config.CapacityArgs)
	if !ok {
		return nil, fmt.Errorf("want args to be of type CapacityArgs, got %T", obj)
	}
	return newPlugin(ctx, h, process, records, CapacityName, queue.Capacity, args.OvercommitFactor, args.DRFPreemption, args.AuditIntervalSeconds)
}

func newPlugin(ctx context.Context, h fwk.Handle, process *batch.Process, records *Records, name string, policy queue.Policy, overcommit float64, drfPreemption bool, auditSeconds int64) (*Plugin, error) {
	if err := validation.ValidateOvercommitFactor(field.NewPath(name+"Args"), overcommit); err != nil {
		return nil, err
	}
	if err := validation.ValidateAuditInterval(field.NewPath(name+"Args"), auditSeconds); err != nil {
		return nil, err
	}
	b, err := process.Batch(ctx, h)
	if err != nil {
		return nil, err
	}
	s, err := b.EnableQueues(ctx, policy, overcommit, time.Duration(auditSeconds)*time.Second)
	if err != nil {
		return nil, err
	}
	fw, ok := h.(framework.Framework)
	if !ok {
		return nil, fmt.Errorf("queue policies need the scheduler framework as their handle, got %T", h)
	}
	pdbLister := h.SharedInformerFactory().Policy().V1().PodDisruptionBudgets().Lister()
	pl := &Plugin{
		name: name, gangs: b.Gangs, state: s, drfPreemption: drfPreemption,
		volcanoQueues: b.VolcanoQueues(),
		placer:        &placement.Placer{Handle: h, Framework: fw},
		client:        h.ClientSet(),
		recorder:      b.Recorder(),
		pdbs: pdbBlocks(func(ns string) ([]pdb, error) {
			list, err := pdbLister.PodDisruptionBudgets(ns).List(labels.Everything())
			if err != nil {
				return nil, err
			}
			out := make([]pdb, 0, len(list))
			for _, b := range list {
				sel, err := metav1.LabelSelectorAsSelector(b.Spec.Selector)
				if err != nil {
					return nil, err
				}
				out = append(out, pdb{selector: sel, allowed: b.Status.DisruptionsAllowed})
			}
			return out, nil
		}),
		topology: func(s *gang.Status) ([]string, string) {
			return b.Topology(fw.ProfileName(), s)
		},
	}
	records.attach(ctx, b, s, h)
	pl.records = records
	return pl, nil
}

// Name returns the plugin's name.
func (pl *Plugin) Name() string { return pl.name }

// SignPod lets kube-scheduler's opportunistic batching reuse a cycle's
// results for a pod in no gang and no queue, which the queue policies do
// not limit; a managed pod's admission and ceiling change with every
// placement, so it is never batched.
func (pl *Plugin) SignPod(_ context.Context, pod *v1.Pod) ([]fwk.SignFragment, *fwk.Status) {
	if _, ok := pl.gangs.KeyOf(pod); ok {
		return nil, fwk.NewStatus(fwk.Unschedulable, "a managed pod is admitted and limited by its queue")
	}
	return nil, nil
}

// PreFilter admits the pod's gang to its queue if it is not yet admitted,
// and checks that the queue can take what the gang still needs (the pod
// alone once the gang is ready) without going over its ceiling. Pods in
// no gang and no queue are not Muster's to limit.
func (pl *Plugin) PreFilter(ctx context.Context, state fwk.CycleState, pod *v1.Pod, _ []fwk.NodeInfo) (*fwk.PreFilterResult, *fwk.Status) {
	if gang.IsTrial(state) {
		return nil, fwk.NewStatus(fwk.Skip)
	}
	key, ok := pl.gangs.KeyOf(pod)
	if !ok {
		return nil, fwk.NewStatus(fwk.Skip)
	}
	st := pl.gangs.Status(key)
	if st.Invalid != "" {
		return nil, fwk.NewStatus(fwk.Skip) // Gang says why
	}
	snap := pl.state.Refresh()
	ok, why, reason := pl.state.Decide(&st, snap)
	if reason != "" {
		result := metrics.Admitted
		if !ok {
			result = metrics.Refused
		}
		q := snap.QueueOf(&st)
		if snap.Queues[q] == nil {
			q = "" // a name no Queue has: any string a user wrote
		}
		metrics.AdmissionDecisions.WithLabelValues(q, result, reason).Inc()
	}
	if !ok {
		klog.FromContext(ctx).V(3).Info("Gang not admitted", "gang", key, "reason", why)
		pl.gangs.SetWaiting(key, why)
		return nil, fwk.NewStatus(fwk.UnschedulableAndUnresolvable, why)
	}
	q, n := snap.QueueOf(&st), need(&st, pl.requests(key, pod))
	if ok, why := snap.FitsCeiling(q, n); !ok && !snap.Lends(q, n, held(&st, snap, n), false) {
		// Unresolvable by stock preemption: evicting another pod from a
		// node never raises this queue's ceiling.
		pl.gangs.SetWaiting(key, why)
		return nil, fwk.NewStatus(fwk.UnschedulableAndUnresolvable, why)
	}
	// Admitted and under its ceiling: a blocked gang claims room again
	// (one refused above stays blocked, so that its claim does not come
	// and go with every attempt, waking the queue's waiters each time).
	pl.state.Retry(key)
	if st.Waiting != "" && !st.Ready() {
		pl.gangs.SetWaiting(key, "")
	}
	return nil, fwk.NewStatus(fwk.Skip)
}

// requests are the pod's resource requests, as the gang state holds them.
func (pl *Plugin) requests(key gang.Key, pod *v1.Pod) v1.ResourceList {
	if r, ok := pl.gangs.Requests(key, pod.UID); ok {
		return r
	}
	return podRequests(pod)
}

// need is what placing a pod of these requests commits its queue to: the
// rest of the gang's minimum while it is not ready, the pod alone after.
func need(st *gang.Status, requests v1.ResourceList) queue.Vector {
	if st.Ready() || st.Spec.MinMember == 1 {
		return queue.FromList(requests)
	}
	n := queue.FromList(st.MinResources)
	n.Sub(queue.FromList(st.Allocated))
	for k, v := range n {
		if v < 0 {
			n[k] = 0
		}
	}
	return n
}

// held is the part of need already admitted to the gang: all of it while
// a gang recorded as admitted (see queue.State.Admit) is placed up to its
// minimum (its queue's inqueue holds that room for it), none after.
func held(st *gang.Status, snap *queue.Snapshot, need queue.Vector) queue.Vector {
	recorded := st.Spec.MinMember > 1 || len(st.Spec.MinTaskMember) > 0
	if g := snap.Gang(st.Key); g != nil && g.Admitted && !st.Ready() && recorded {
		return need
	}
	return nil
}

// PreFilterExtensions is nil: the plugin keeps no per-node state.
func (pl *Plugin) PreFilterExtensions() fwk.PreFilterExtensions { return nil }

// Package binpack scores nodes by how full they would be after placing the
// pod, so that pods pack onto the fewest nodes and whole nodes stay free for
// large workloads.
package binpack

import (
	"context"
	"fmt"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"
	fwk "k8s.io/kube-scheduler/framework"
	schedconfig "k8s.io/kubernetes/pkg/scheduler/apis/config"

	"github.com/muster-sched/muster/apis/config"
	"github.com/muster-sched/muster/apis/config/validation"
	"github.com/muster-sched/muster/pkg/requests"
)

// Name is the plugin's name in the registry and in configurations.
const Name = "Binpack"

const preScoreStateKey = "PreScore" + Name

// Binpack is a Score plugin. For the weighted resources a pod requests it
// scores a node 100 · Σ w·(used+request)/allocatable ÷ Σ w, and 0 when any
// of them would overflow the node. With domain levels it also scores how
// used the node's topology domains are; see domain.go.
type Binpack struct {
	resources []schedconfig.ResourceSpec
	// levels are node label keys of topology domains; empty: nodes alone.
	levels []string
	handle fwk.Handle
}

var (
	_ fwk.PreScorePlugin = &Binpack{}
	_ fwk.ScorePlugin    = &Binpack{}
	_ fwk.SignPlugin     = &Binpack{}
)

// New builds the plugin from validated BinpackArgs.
func New(_ context.Context, obj runtime.Object, h fwk.Handle) (fwk.Plugin, error) {
	args, ok := obj.(*config.BinpackArgs)
	if !ok {
		return nil, fmt.Errorf("want args to be of type BinpackArgs, got %T", obj)
	}
	if err := validation.ValidateBinpackArgs(field.NewPath("binpackArgs"), args); err != nil {
		return nil, err
	}
	if len(args.DomainLevels) > 0 && (h == nil || h.SnapshotSharedLister() == nil) {
		return nil, fmt.Errorf("binpackArgs.domainLevels: scoring domains needs the scheduler's snapshot lister")
	}
	return &Binpack{
		resources: args.Resources,
		levels:    args.DomainLevels,
		handle:    h,
	}, nil
}

// Name returns the plugin's name.
func (b *Binpack) Name() string { return Name }

// request is one weighted resource the pod asks for.
type request struct {
	name   v1.ResourceName
	amount int64 // milli-units for cpu, units otherwise
}

// preScoreState holds the pod's weighted requests, computed once per cycle,
// and with domain levels each domain's usage (see domain.go).
type preScoreState struct {
	requests  []request
	weights   []int64
	weightSum int64
	// domains maps, per level, a domain's label value to its s_d + φ_d; nil
	// without domain levels.
	domains []map[string]float64
}

// Clone shares the state: it is never modified after PreScore.
func (s *preScoreState) Clone() fwk.StateData { return s }

// PreScore computes the pod's requests of the weighted resources and, with
// domain levels, the domains' usage over all nodes of the snapshot, not only
// the feasible ones: a domain is used whichever nodes the pod may land on.
// A pod that requests none of the weighted resources is not scored.
func (b *Binpack) PreScore(_ context.Context, state fwk.CycleState, pod *v1.Pod, _ []fwk.NodeInfo) *fwk.Status {
	s := b.podState(pod)
	if len(s.requests) == 0 {
		return fwk.NewStatus(fwk.Skip)
	}
	if len(b.levels) > 0 {
		nodeInfos, err := b.handle.SnapshotSharedLister().NodeInfos().List()
		if err != nil {
			return fwk.AsStatus(fmt.Errorf("listing nodes: %w", err))
		}
		s.domains = domainUsage(s, b.levels, nodeInfos)
	}
	state.Write(preScoreStateKey, s)
	return nil
}

// podState collects the pod's requests of the weighted resources.
func (b *Binpack) podState(pod *v1.Pod) *preScoreState {
	podRequests := requests.Of(pod)
	s := &preScoreState{}
	for _, r := range b.resources {
		name := v1.ResourceName(r.Name)
		q, ok := podRequests[name]
		if !ok {
			continue
		}
		amount := q.Value()
		if name == v1.ResourceCPU {
			amount = q.MilliValue()
		}
		if amount <= 0 {
			continue
		}
		s.requests = append(s.requests, request{name: name, amount: amount})
		s.weights = append(s.weights, int64(r.Weight))
		s.weightSum += int64(r.Weight)
	}
	return s
}

func getPreScoreState(state fwk.CycleState) (*preScoreState, error) {
	c, err := state.Read(preScoreStateKey)
	if err != nil {
		return nil, fmt.Errorf("reading %q from cycleState: %w", preScoreStateKey, err)
	}
	s, ok := c.(*preScoreState)
	if !ok {
		return nil, fmt.Errorf("%+v convert to binpack.preScoreState error", c)
	}
	return s, nil
}

// signerName keys the pod's weighted requests in its signature.
const signerName = "muster.dev/Binpack.weightedRequests"

// errDomainsNotSignable refuses batching for profiles that score domains.
var errDomainsNotSignable = fwk.NewStatus(fwk.Unschedulable, "Binpack with domainLevels scores a node by other nodes' usage; pods are not signable")

// SignPod lets kube-scheduler's opportunistic batching reuse a cycle's
// scores for a pod like the one before it: Binpack's score depends on the
// pod only through its requests of the weighted resources.
// The framework signs with the fragments' JSON, so the value is a map.
//
// With domain levels it refuses: the batch keeps the other nodes' scores
// and rescores only the node the last pod went to, but that pod also
// raised the scores of the other nodes in its domains, so the kept scores
// would be stale and the hint could open a node in another domain.
func (b *Binpack) SignPod(_ context.Context, pod *v1.Pod) ([]fwk.SignFragment, *fwk.Status) {
	if len(b.levels) > 0 {
		return nil, errDomainsNotSignable
	}
	s := b.podState(pod)
	requests := make(map[v1.ResourceName]int64, len(s.requests))
	for _, r := range s.requests {
		requests[r.name] = r.amount
	}
	return []fwk.SignFragment{{Key: signerName, Value: requests}}, nil
}

// Score returns how full the node would be, in [0, 100], blended with how
// used its domains are when PreScore computed them. When the profile
// enables Binpack for Score only, PreScore did not run: the pod's requests
// are computed here and the node is scored alone, since the domains would
// cost a pass over all nodes for every node.
func (b *Binpack) Score(_ context.Context, state fwk.CycleState, pod *v1.Pod, nodeInfo fwk.NodeInfo) (int64, *fwk.Status) {
	s, err := getPreScoreState(state)
	if err != nil {
		s = b.podState(pod)
	}
	if s.domains != nil {
		return domainScore(s, b.levels, nodeInfo), nil
	}
	return score(s, nodeInfo), nil
}

func score(s *preScoreState, nodeInfo fwk.NodeInfo) int64 {
	if s.weightSum == 0 {
		return fwk.MinNodeScore
	}
	var sum float64
	for i, r := range s.requests {
		allocatable, used := allocatableAndUsed(nodeInfo, r.name)
		if allocatable == 0 {
			continue // counts with its weight, contributes nothing
		}
		after := used + r.amount
		if after > allocatable {
			return fwk.MinNodeScore
		}
		sum += float64(s.weights[i]) * float64(after) / float64(allocatable)
	}
	return int64(float64(fwk.MaxNodeScore) * sum / float64(s.weightSum))
}

// allocatableAndUsed returns the node's allocatable amount of a resource and
// the sum of requests of the pods already on it, in the units of request.
func allocatableAndUsed(nodeInfo fwk.NodeInfo, name v1.ResourceName) (int64, int64) {
	allocatable, requested := nodeInfo.GetAllocatable(), nodeInfo.GetRequested()
	switch name {
	case v1.ResourceCPU:
		return allocatable.GetMilliCPU(), requested.GetMilliCPU()
	case v1.ResourceMemory:
		return allocatable.GetMemory(), requested.GetMemory()
	case v1.ResourceEphemeralStorage:
		return allocatable.GetEphemeralStorage(), requested.GetEphemeralStorage()
	default:
		return allocatable.GetScalarResources()[name], requested.GetScalarResources()[name]
	}
}

// ScoreExtensions is nil: scores are already in [0, 100].
func (b *Binpack) ScoreExtensions() fwk.ScoreExtensions { return nil }

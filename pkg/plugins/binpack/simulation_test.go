package binpack

import (
	"fmt"
	"math/rand/v2"
	"testing"

	v1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2/ktesting"
	fwk "k8s.io/kube-scheduler/framework"
	schedconfig "k8s.io/kubernetes/pkg/scheduler/apis/config"
	"k8s.io/kubernetes/pkg/scheduler/backend/cache"
	"k8s.io/kubernetes/pkg/scheduler/framework"
	st "k8s.io/kubernetes/pkg/scheduler/testing"

	"github.com/muster-sched/muster/apis/config"
)

const (
	simRacks        = 4
	simNodesPerRack = 4
	simGPUsPerNode  = 8
)

// simEvent is one step of the stream: a pod of gpus GPUs arrives, or, with
// gpus 0, the running pod at index leave (modulo the running count) ends.
type simEvent struct {
	gpus  int
	leave int
}

// simStream is a fixed stream of 120 steps of 1- and 2-GPU pods in which
// about one step in three ends a running pod, so freed GPUs fragment nodes
// and racks.
func simStream() []simEvent {
	r := rand.New(rand.NewPCG(27, 4))
	var events []simEvent
	for range 120 {
		if r.IntN(3) == 0 {
			events = append(events, simEvent{leave: r.IntN(1 << 20)})
			continue
		}
		events = append(events, simEvent{gpus: 1 + r.IntN(2)})
	}
	return events
}

type simResult struct {
	wholeNodes, wholeRacks, running int
}

// simulate places the stream greedily on the node of highest score, ties
// broken at random with a fixed seed as kube-scheduler breaks them.
func simulate(t *testing.T, levels []string) simResult {
	t.Helper()
	logger, ctx := ktesting.NewTestContext(t)
	var nodes []*v1.Node
	for r := range simRacks {
		for n := range simNodesPerRack {
			nodes = append(nodes, st.MakeNode().Name(fmt.Sprintf("r%d-n%d", r, n)).Label(rackLabel, fmt.Sprintf("r%d", r)).Capacity(map[v1.ResourceName]string{
				v1.ResourceCPU: "32", v1.ResourceMemory: "256Gi", v1.ResourcePods: "110", gpu: fmt.Sprint(simGPUsPerNode),
			}).Obj())
		}
	}
	snapshot := cache.NewSnapshot(nil, nodes)
	resources := append([]schedconfig.ResourceSpec{{Name: gpu, Weight: 8}}, cpuMem...)
	p := newDomainPlugin(ctx, t, &config.BinpackArgs{Resources: resources, DomainLevels: levels}, snapshot)
	// The snapshot lists nodes in map order; ties are broken in node order.
	var nodeInfos []fwk.NodeInfo
	for _, n := range nodes {
		ni, err := snapshot.Get(n.Name)
		if err != nil {
			t.Fatal(err)
		}
		nodeInfos = append(nodeInfos, ni)
	}
	ties := rand.New(rand.NewPCG(1, 2))
	type placed struct {
		pod  *v1.Pod
		node *framework.NodeInfo
	}
	var running []placed
	for i, e := range simStream() {
		if e.gpus == 0 {
			if len(running) == 0 {
				continue
			}
			k := e.leave % len(running)
			if err := running[k].node.RemovePod(logger, running[k].pod); err != nil {
				t.Fatal(err)
			}
			running = append(running[:k], running[k+1:]...)
			continue
		}
		name := fmt.Sprintf("p%d", i)
		pod := st.MakePod().Name(name).UID(name).Req(map[v1.ResourceName]string{
			gpu: fmt.Sprint(e.gpus), v1.ResourceCPU: fmt.Sprint(2 * e.gpus), v1.ResourceMemory: fmt.Sprintf("%dGi", 16*e.gpus),
		}).Obj()
		state := framework.NewCycleState()
		if s := p.PreScore(ctx, state, pod, nodeInfos); !s.IsSuccess() {
			t.Fatalf("PreScore: %v", s)
		}
		var best *framework.NodeInfo
		bestScore, tied := int64(-1), 0
		for _, ni := range nodeInfos {
			if freeGPUs(ni.(*framework.NodeInfo)) < int64(e.gpus) {
				continue // Filter would reject it
			}
			score, s := p.Score(ctx, state, pod, ni)
			if !s.IsSuccess() {
				t.Fatalf("Score: %v", s)
			}
			switch {
			case score > bestScore:
				best, bestScore, tied = ni.(*framework.NodeInfo), score, 1
			case score == bestScore:
				if tied++; ties.IntN(tied) == 0 {
					best = ni.(*framework.NodeInfo)
				}
			}
		}
		if best == nil {
			t.Fatalf("pod %s of %d GPUs fits no node", name, e.gpus)
		}
		best.AddPod(pod)
		running = append(running, placed{pod, best})
	}
	res := simResult{running: len(running)}
	brokenRacks := map[string]bool{}
	for _, ni := range nodeInfos {
		if freeGPUs(ni.(*framework.NodeInfo)) == simGPUsPerNode {
			res.wholeNodes++
		} else {
			brokenRacks[ni.Node().Labels[rackLabel]] = true
		}
	}
	res.wholeRacks = simRacks - len(brokenRacks)
	return res
}

func freeGPUs(ni *framework.NodeInfo) int64 {
	return ni.GetAllocatable().GetScalarResources()[gpu] - ni.GetRequested().GetScalarResources()[gpu]
}

// TestDomainLevelsKeepRacksWhole runs one stream of 1- and 2-GPU pods on 4
// racks of 4 8-GPU nodes with and without the rack level: scoring racks
// must keep at least as many whole free nodes and strictly more whole free
// racks for gangs that need a whole rack.
func TestDomainLevelsKeepRacksWhole(t *testing.T) {
	alone := simulate(t, nil)
	racks := simulate(t, []string{rackLabel})
	t.Logf("nodes alone: %+v; with racks: %+v", alone, racks)
	if alone.running != racks.running {
		t.Fatalf("running pods differ: %d alone, %d with racks", alone.running, racks.running)
	}
	if racks.wholeNodes < alone.wholeNodes {
		t.Errorf("whole free nodes: %d with racks, want at least %d as alone", racks.wholeNodes, alone.wholeNodes)
	}
	if racks.wholeRacks <= alone.wholeRacks {
		t.Errorf("whole free racks: %d with racks, want more than %d alone", racks.wholeRacks, alone.wholeRacks)
	}
}

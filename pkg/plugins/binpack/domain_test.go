package binpack

import (
	"context"
	"fmt"
	"testing"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/klog/v2/ktesting"
	fwk "k8s.io/kube-scheduler/framework"
	schedconfig "k8s.io/kubernetes/pkg/scheduler/apis/config"
	"k8s.io/kubernetes/pkg/scheduler/backend/cache"
	"k8s.io/kubernetes/pkg/scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework/plugins/defaultbinder"
	"k8s.io/kubernetes/pkg/scheduler/framework/plugins/queuesort"
	frameworkruntime "k8s.io/kubernetes/pkg/scheduler/framework/runtime"
	"k8s.io/kubernetes/pkg/scheduler/metrics"
	st "k8s.io/kubernetes/pkg/scheduler/testing"
	tf "k8s.io/kubernetes/pkg/scheduler/testing/framework"

	"github.com/muster-sched/muster/apis/config"
	"github.com/muster-sched/muster/apis/scheduling/v1alpha1"
)

const (
	rackLabel  = v1alpha1.LabelRack
	blockLabel = v1alpha1.LabelBlock
)

var gpuOnly = []schedconfig.ResourceSpec{{Name: gpu, Weight: 1}}

// gpuNode is an 8-cpu, 8-GPU node labelled "key=value" pairs from kv.
func gpuNode(name string, kv ...string) *v1.Node {
	w := st.MakeNode().Name(name).Capacity(map[v1.ResourceName]string{
		v1.ResourceCPU: "8", v1.ResourceMemory: "64Gi", v1.ResourcePods: "110", gpu: "8",
	})
	for i := 0; i+1 < len(kv); i += 2 {
		w = w.Label(kv[i], kv[i+1])
	}
	return w.Obj()
}

func gpuPod(name, node, gpus string) *v1.Pod {
	return st.MakePod().Name(name).Node(node).Req(map[v1.ResourceName]string{gpu: gpus}).Obj()
}

// newDomainPlugin builds Binpack on a framework whose snapshot holds nodes
// and pods.
func newDomainPlugin(ctx context.Context, t testing.TB, args *config.BinpackArgs, snapshot *cache.Snapshot) *Binpack {
	t.Helper()
	fh, err := frameworkruntime.NewFramework(ctx, nil, nil, frameworkruntime.WithSnapshotSharedLister(snapshot))
	if err != nil {
		t.Fatal(err)
	}
	p, err := New(ctx, args, fh)
	if err != nil {
		t.Fatal(err)
	}
	return p.(*Binpack)
}

func TestScoreDomains(t *testing.T) {
	tests := []struct {
		name         string
		resources    []schedconfig.ResourceSpec
		levels       []string
		pod          *v1.Pod
		nodes        []*v1.Node
		existingPods []*v1.Pod
		wantScores   fwk.NodeScoreList
	}{
		{
			name:      "a partly used rack beats an empty rack at equal node fill",
			resources: gpuOnly,
			levels:    []string{rackLabel},
			pod:       gpuPod("p", "", "1"),
			nodes:     []*v1.Node{gpuNode("a1", rackLabel, "a"), gpuNode("a2", rackLabel, "a"), gpuNode("b1", rackLabel, "b")},
			existingPods: []*v1.Pod{
				gpuPod("e1", "a1", "4"),
			},
			// Rack a is used and 4/16 full. a1 is used: 100·(5/8 + (1+1+1/4)/3)/2;
			// a2 100·(1/8 + (0+1+1/4)/3)/2; b1 in the empty rack 100·(1/8 + 0)/2.
			wantScores: fwk.NodeScoreList{{Name: "a1", Score: 68}, {Name: "a2", Score: 27}, {Name: "b1", Score: 6}},
		},
		{
			name:      "node fill decides within a rack, the fuller rack among empty nodes",
			resources: gpuOnly,
			levels:    []string{rackLabel},
			pod:       gpuPod("p", "", "1"),
			nodes: []*v1.Node{
				gpuNode("a1", rackLabel, "a"), gpuNode("a2", rackLabel, "a"),
				gpuNode("b1", rackLabel, "b"), gpuNode("b2", rackLabel, "b"),
			},
			existingPods: []*v1.Pod{gpuPod("e1", "a1", "6"), gpuPod("e2", "b1", "2")},
			// a1 100·(7/8 + (2+6/16)/3)/2; a2 100·(1/8 + (1+6/16)/3)/2;
			// b1 100·(3/8 + (2+2/16)/3)/2; b2 100·(1/8 + (1+2/16)/3)/2.
			wantScores: fwk.NodeScoreList{{Name: "a1", Score: 83}, {Name: "a2", Score: 29}, {Name: "b1", Score: 54}, {Name: "b2", Score: 25}},
		},
		{
			name:      "an empty rack in a used block beats one in an empty block",
			resources: gpuOnly,
			levels:    []string{rackLabel, blockLabel},
			pod:       gpuPod("p", "", "1"),
			nodes: []*v1.Node{
				gpuNode("a1", rackLabel, "a", blockLabel, "x"),
				gpuNode("b1", rackLabel, "b", blockLabel, "x"),
				gpuNode("c1", rackLabel, "c", blockLabel, "y"),
			},
			existingPods: []*v1.Pod{gpuPod("e1", "a1", "4")},
			// a1 100·(5/8 + (2+4/8)/3 + (2+4/16)/3)/3;
			// b1 100·(1/8 + 0 + (1+4/16)/3)/3; c1 100·(1/8)/3.
			wantScores: fwk.NodeScoreList{{Name: "a1", Score: 73}, {Name: "b1", Score: 18}, {Name: "c1", Score: 4}},
		},
		{
			name:      "a node without the label is a domain of its own",
			resources: gpuOnly,
			levels:    []string{rackLabel},
			pod:       gpuPod("p", "", "1"),
			nodes:     []*v1.Node{gpuNode("u1"), gpuNode("u2"), gpuNode("a1", rackLabel, "a"), gpuNode("a2", rackLabel, "a")},
			existingPods: []*v1.Pod{
				gpuPod("e1", "u1", "4"), gpuPod("e2", "a2", "4"),
			},
			// u1 100·(5/8 + (2+4/8)/3)/2. u2 is alone and empty, so it
			// breaks its own domain; a1 does not.
			wantScores: fwk.NodeScoreList{{Name: "u1", Score: 72}, {Name: "u2", Score: 6}, {Name: "a1", Score: 27}, {Name: "a2", Score: 68}},
		},
		{
			name:      "cpu that every node uses weakens the pull of a used rack, not voids it",
			resources: []schedconfig.ResourceSpec{{Name: gpu, Weight: 8}, {Name: "cpu", Weight: 1}},
			levels:    []string{rackLabel},
			pod:       st.MakePod().Name("p").Req(map[v1.ResourceName]string{gpu: "1", "cpu": "1"}).Obj(),
			nodes:     []*v1.Node{gpuNode("a1", rackLabel, "a"), gpuNode("a2", rackLabel, "a"), gpuNode("b1", rackLabel, "b")},
			existingPods: []*v1.Pod{
				st.MakePod().Name("d1").Node("a1").Req(map[v1.ResourceName]string{"cpu": "1"}).Obj(),
				st.MakePod().Name("d2").Node("a2").Req(map[v1.ResourceName]string{"cpu": "1"}).Obj(),
				st.MakePod().Name("d3").Node("b1").Req(map[v1.ResourceName]string{"cpu": "1"}).Obj(),
				gpuPod("e1", "a1", "4"),
			},
			// a2 and b1 are equally full and use cpu only (share 1/9); a2's
			// rack uses GPUs too (share 1), b1's only cpu (share 1/9).
			wantScores: fwk.NodeScoreList{{Name: "a1", Score: 66}, {Name: "a2", Score: 29}, {Name: "b1", Score: 10}},
		},
		{
			name:      "a node the pod would overflow scores 0",
			resources: gpuOnly,
			levels:    []string{rackLabel},
			pod:       gpuPod("p", "", "2"),
			nodes:     []*v1.Node{gpuNode("a1", rackLabel, "a"), gpuNode("a2", rackLabel, "a")},
			existingPods: []*v1.Pod{
				gpuPod("e1", "a1", "7"),
			},
			// a2: 100·(2/8 + (0+1+7/16)/3)/2.
			wantScores: fwk.NodeScoreList{{Name: "a1", Score: 0}, {Name: "a2", Score: 36}},
		},
		{
			name:      "nodes and domains without the resource score without panicking",
			resources: gpuOnly,
			levels:    []string{rackLabel},
			pod:       gpuPod("p", "", "1"),
			nodes: []*v1.Node{
				node("z1", "4", "8Gi", ""), node("z2", "4", "8Gi", ""),
				gpuNode("a1", rackLabel, "a"),
			},
			existingPods: []*v1.Pod{gpuPod("e1", "a1", "4")},
			wantScores:   fwk.NodeScoreList{{Name: "z1", Score: 0}, {Name: "z2", Score: 0}, {Name: "a1", Score: 72}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, ctx := ktesting.NewTestContext(t)
			snapshot := cache.NewSnapshot(tt.existingPods, tt.nodes)
			p := newDomainPlugin(ctx, t, &config.BinpackArgs{Resources: tt.resources, DomainLevels: tt.levels}, snapshot)
			state := framework.NewCycleState()
			if status := p.PreScore(ctx, state, tt.pod, nil); !status.IsSuccess() {
				t.Fatalf("PreScore: %v", status)
			}
			got := scoreNodes(ctx, t, p, state, tt.pod, snapshot, tt.nodes)
			if diff := cmp.Diff(tt.wantScores, got); diff != "" {
				t.Errorf("scores (-want,+got):\n%s", diff)
			}
		})
	}
}

// TestSignPodWithDomainLevels: a node's score then depends on other nodes,
// which opportunistic batching does not rescore, so Binpack refuses to sign.
func TestSignPodWithDomainLevels(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	snapshot := cache.NewSnapshot(nil, nil)
	p := newDomainPlugin(ctx, t, &config.BinpackArgs{Resources: gpuOnly, DomainLevels: []string{rackLabel}}, snapshot)
	f, status := p.SignPod(ctx, gpuPod("p", "", "1"))
	if status.Code() != fwk.Unschedulable || f != nil {
		t.Errorf("SignPod = %v, %v; want no fragments, Unschedulable", f, status)
	}
}

// TestScoreDomainsWithoutPreScore: without PreScore's pass over all nodes
// the node is scored alone, as without domain levels.
func TestScoreDomainsWithoutPreScore(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	snapshot := cache.NewSnapshot([]*v1.Pod{gpuPod("e1", "a1", "4")}, []*v1.Node{gpuNode("a1", rackLabel, "a"), gpuNode("a2", rackLabel, "a")})
	p := newDomainPlugin(ctx, t, &config.BinpackArgs{Resources: gpuOnly, DomainLevels: []string{rackLabel}}, snapshot)
	nodeInfo, err := snapshot.Get("a2")
	if err != nil {
		t.Fatal(err)
	}
	got, status := p.Score(ctx, framework.NewCycleState(), gpuPod("p", "", "1"), nodeInfo)
	if want := int64(12); !status.IsSuccess() || got != want {
		t.Errorf("Score(a2) = %d, %v; want %d, success", got, status, want)
	}
}

// TestFrameworkSignsOnlyWithoutDomainLevels: kube-scheduler's framework
// gives a pod no signature, and so no batched hint, once Binpack refuses.
func TestFrameworkSignsOnlyWithoutDomainLevels(t *testing.T) {
	metrics.Register() // the framework records plugin metrics
	for _, tt := range []struct {
		levels   []string
		wantSign bool
	}{
		{nil, true},
		{[]string{rackLabel}, false},
	} {
		_, ctx := ktesting.NewTestContext(t)
		args := &config.BinpackArgs{Resources: gpuOnly, DomainLevels: tt.levels}
		newBinpack := func(ctx context.Context, _ runtime.Object, h fwk.Handle) (fwk.Plugin, error) {
			return New(ctx, args, h)
		}
		fh, err := tf.NewFramework(ctx, []tf.RegisterPluginFunc{
			tf.RegisterQueueSortPlugin(queuesort.Name, queuesort.New),
			tf.RegisterBindPlugin(defaultbinder.Name, defaultbinder.New),
			tf.RegisterPluginAsExtensions(Name, newBinpack, "PreScore", "Score"),
		}, "default", frameworkruntime.WithSnapshotSharedLister(cache.NewSnapshot(nil, nil)))
		if err != nil {
			t.Fatal(err)
		}
		if got := fh.SignPod(ctx, gpuPod("p", "", "1")) != nil; got != tt.wantSign {
			t.Errorf("levels %v: signed %v, want %v", tt.levels, got, tt.wantSign)
		}
	}
}

func TestNewDomainLevelsNeedsLister(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	if _, err := New(ctx, &config.BinpackArgs{Resources: gpuOnly, DomainLevels: []string{rackLabel}}, nil); err == nil {
		t.Error("want an error without a handle")
	}
	_, err := New(ctx, &config.BinpackArgs{Resources: gpuOnly, DomainLevels: []string{"not a label/key/"}}, nil)
	if err == nil {
		t.Error("want an error for an invalid label key")
	}
}

// BenchmarkScoreDomainLevels measures PreScore once and Score on every node
// of 1000 nodes in 10 racks, as the framework calls them for one pod, with
// and without the rack level.
func BenchmarkScoreDomainLevels(b *testing.B) {
	var nodes []*v1.Node
	var pods []*v1.Pod
	for i := range 1000 {
		name := fmt.Sprintf("n%d", i)
		nodes = append(nodes, st.MakeNode().Name(name).Label(rackLabel, fmt.Sprintf("r%d", i/100)).Capacity(map[v1.ResourceName]string{
			v1.ResourceCPU: "32", v1.ResourceMemory: "128Gi", v1.ResourcePods: "110", gpu: "8",
		}).Obj())
		pods = append(pods, st.MakePod().Name("e"+name).Node(name).Req(map[v1.ResourceName]string{"cpu": "4", "memory": "8Gi", gpu: "2"}).Obj())
	}
	resources := append([]schedconfig.ResourceSpec{{Name: gpu, Weight: 4}}, cpuMem...)
	pod := st.MakePod().Name("p").Req(map[v1.ResourceName]string{"cpu": "1", "memory": "2Gi", gpu: "1"}).Obj()
	for _, bc := range []struct {
		name   string
		levels []string
	}{
		{"without", nil},
		{"rack", []string{rackLabel}},
	} {
		b.Run(bc.name, func(b *testing.B) {
			_, ctx := ktesting.NewTestContext(b)
			snapshot := cache.NewSnapshot(pods, nodes)
			nodeInfos, err := snapshot.NodeInfos().List()
			if err != nil {
				b.Fatal(err)
			}
			p := newDomainPlugin(ctx, b, &config.BinpackArgs{Resources: resources, DomainLevels: bc.levels}, snapshot)
			b.ResetTimer()
			for range b.N {
				state := framework.NewCycleState()
				if s := p.PreScore(ctx, state, pod, nil); !s.IsSuccess() {
					b.Fatal(s)
				}
				for _, ni := range nodeInfos {
					if _, s := p.Score(ctx, state, pod, ni); !s.IsSuccess() {
						b.Fatal(s)
					}
				}
			}
		})
	}
}

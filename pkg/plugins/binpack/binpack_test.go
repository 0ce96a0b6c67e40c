package binpack

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2/ktesting"
	fwk "k8s.io/kube-scheduler/framework"
	schedconfig "k8s.io/kubernetes/pkg/scheduler/apis/config"
	"k8s.io/kubernetes/pkg/scheduler/backend/cache"
	"k8s.io/kubernetes/pkg/scheduler/framework"
	frameworkruntime "k8s.io/kubernetes/pkg/scheduler/framework/runtime"
	st "k8s.io/kubernetes/pkg/scheduler/testing"
	tf "k8s.io/kubernetes/pkg/scheduler/testing/framework"

	"github.com/muster-sched/muster/apis/config"
)

const gpu = "nvidia.com/gpu"

var cpuMem = []schedconfig.ResourceSpec{{Name: "cpu", Weight: 1}, {Name: "memory", Weight: 1}}

func node(name, cpu, mem string, gpus string) *v1.Node {
	capacity := map[v1.ResourceName]string{v1.ResourceCPU: cpu, v1.ResourceMemory: mem, v1.ResourcePods: "110"}
	if gpus != "" {
		capacity[gpu] = gpus
	}
	return st.MakeNode().Name(name).Capacity(capacity).Obj()
}

func TestScore(t *testing.T) {
	tests := []struct {
		name         string
		resources    []schedconfig.ResourceSpec
		pod          *v1.Pod
		nodes        []*v1.Node
		existingPods []*v1.Pod
		wantSkip     bool
		wantScores   fwk.NodeScoreList
	}{
		{
			name:      "empty nodes score by the pod's own fraction",
			resources: cpuMem,
			pod:       st.MakePod().Name("p").Req(map[v1.ResourceName]string{"cpu": "1", "memory": "1Gi"}).Obj(),
			nodes:     []*v1.Node{node("n1", "4", "8Gi", ""), node("n2", "2", "2Gi", "")},
			// n1: 100·(1/4 + 1/8)/2 = 18.75; n2: 100·(1/2 + 1/2)/2 = 50.
			wantScores: fwk.NodeScoreList{{Name: "n1", Score: 18}, {Name: "n2", Score: 50}},
		},
		{
			name:      "the fuller node scores higher",
			resources: cpuMem,
			pod:       st.MakePod().Name("p").Req(map[v1.ResourceName]string{"cpu": "1", "memory": "1Gi"}).Obj(),
			nodes:     []*v1.Node{node("n1", "4", "4Gi", ""), node("n2", "4", "4Gi", "")},
			existingPods: []*v1.Pod{
				st.MakePod().Name("e1").Node("n2").Req(map[v1.ResourceName]string{"cpu": "2", "memory": "2Gi"}).Obj(),
			},
			// n1: 100·(1/4+1/4)/2 = 25; n2: 100·(3/4+3/4)/2 = 75.
			wantScores: fwk.NodeScoreList{{Name: "n1", Score: 25}, {Name: "n2", Score: 75}},
		},
		{
			name:      "a node the pod would overflow scores 0",
			resources: cpuMem,
			pod:       st.MakePod().Name("p").Req(map[v1.ResourceName]string{"cpu": "3"}).Obj(),
			nodes:     []*v1.Node{node("n1", "4", "4Gi", ""), node("n2", "4", "4Gi", "")},
			existingPods: []*v1.Pod{
				st.MakePod().Name("e1").Node("n2").Req(map[v1.ResourceName]string{"cpu": "2"}).Obj(),
			},
			// Only cpu is requested, so only cpu is scored: n1 75, n2 overflows.
			wantScores: fwk.NodeScoreList{{Name: "n1", Score: 75}, {Name: "n2", Score: 0}},
		},
		{
			name:       "a full node scores 100",
			resources:  cpuMem,
			pod:        st.MakePod().Name("p").Req(map[v1.ResourceName]string{"cpu": "2", "memory": "2Gi"}).Obj(),
			nodes:      []*v1.Node{node("n1", "2", "2Gi", "")},
			wantScores: fwk.NodeScoreList{{Name: "n1", Score: 100}},
		},
		{
			name:      "weights tilt the score towards the heavier resource",
			resources: []schedconfig.ResourceSpec{{Name: "cpu", Weight: 3}, {Name: "memory", Weight: 1}},
			pod:       st.MakePod().Name("p").Req(map[v1.ResourceName]string{"cpu": "1", "memory": "1Gi"}).Obj(),
			nodes:     []*v1.Node{node("n1", "2", "8Gi", ""), node("n2", "8", "2Gi", "")},
			// n1: 100·(3·1/2 + 1·1/8)/4 = 40.6; n2: 100·(3·1/8 + 1·1/2)/4 = 21.9.
			wantScores: fwk.NodeScoreList{{Name: "n1", Score: 40}, {Name: "n2", Score: 21}},
		},
		{
			name:      "a weighted GPU packs onto the GPU node already in use",
			resources: append([]schedconfig.ResourceSpec{{Name: gpu, Weight: 8}}, cpuMem...),
			pod:       st.MakePod().Name("p").Req(map[v1.ResourceName]string{"cpu": "1", "memory": "1Gi", gpu: "1"}).Obj(),
			nodes:     []*v1.Node{node("n1", "8", "8Gi", "8"), node("n2", "8", "8Gi", "8")},
			existingPods: []*v1.Pod{
				st.MakePod().Name("e1").Node("n2").Req(map[v1.ResourceName]string{gpu: "4"}).Obj(),
			},
			// n1: 100·(8·1/8 + 1/8 + 1/8)/10 = 12.5; n2: 100·(8·5/8 + 1/8 + 1/8)/10 = 52.5.
			wantScores: fwk.NodeScoreList{{Name: "n1", Score: 12}, {Name: "n2", Score: 52}},
		},
		{
			name:      "an extended resource that is not listed is not scored",
			resources: cpuMem,
			pod:       st.MakePod().Name("p").Req(map[v1.ResourceName]string{"cpu": "1", gpu: "1"}).Obj(),
			nodes:     []*v1.Node{node("n1", "4", "8Gi", "8")},
			existingPods: []*v1.Pod{
				st.MakePod().Name("e1").Node("n1").Req(map[v1.ResourceName]string{gpu: "7"}).Obj(),
			},
			wantScores: fwk.NodeScoreList{{Name: "n1", Score: 25}},
		},
		{
			name:      "a resource the node lacks contributes 0 but keeps its weight",
			resources: []schedconfig.ResourceSpec{{Name: "cpu", Weight: 1}, {Name: "example.com/fpga", Weight: 1}},
			pod:       st.MakePod().Name("p").Req(map[v1.ResourceName]string{"cpu": "2", "example.com/fpga": "1"}).Obj(),
			nodes:     []*v1.Node{node("n1", "4", "8Gi", "")},
			// 100·(2/4 + 0)/2 = 25.
			wantScores: fwk.NodeScoreList{{Name: "n1", Score: 25}},
		},
		{
			name:      "a pod requesting none of the weighted resources is skipped",
			resources: cpuMem,
			pod:       st.MakePod().Name("p").Obj(),
			nodes:     []*v1.Node{node("n1", "4", "8Gi", "")},
			wantSkip:  true,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, ctx := ktesting.NewTestContext(t)
			ctx, cancel := context.WithCancel(ctx)
			defer cancel()
			snapshot := cache.NewSnapshot(tt.existingPods, tt.nodes)
			fh, err := frameworkruntime.NewFramework(ctx, nil, nil, frameworkruntime.WithSnapshotSharedLister(snapshot))
			if err != nil {
				t.Fatal(err)
			}
			p, err := New(ctx, &config.BinpackArgs{Resources: tt.resources}, fh)
			if err != nil {
				t.Fatal(err)
			}
			state := framework.NewCycleState()
			status := p.(fwk.PreScorePlugin).PreScore(ctx, state, tt.pod, tf.BuildNodeInfos(tt.nodes))
			if tt.wantSkip {
				if !status.IsSkip() {
					t.Fatalf("PreScore: want Skip, got %v", status)
				}
				return
			}
			if !status.IsSuccess() {
				t.Fatalf("PreScore: %v", status)
			}
			got := scoreNodes(ctx, t, p.(fwk.ScorePlugin), state, tt.pod, snapshot, tt.nodes)
			if diff := cmp.Diff(tt.wantScores, got); diff != "" {
				t.Errorf("scores (-want,+got):\n%s", diff)
			}
		})
	}
}

// scoreNodes scores the pod on each node, in order, after PreScore.
func scoreNodes(ctx context.Context, t *testing.T, p fwk.ScorePlugin, state fwk.CycleState, pod *v1.Pod, snapshot *cache.Snapshot, nodes []*v1.Node) fwk.NodeScoreList {
	t.Helper()
	var got fwk.NodeScoreList
	for _, n := range nodes {
		nodeInfo, err := snapshot.Get(n.Name)
		if err != nil {
			t.Fatal(err)
		}
		score, status := p.Score(ctx, state, pod, nodeInfo)
		if !status.IsSuccess() {
			t.Fatalf("Score(%s): %v", n.Name, status)
		}
		got = append(got, fwk.NodeScore{Name: n.Name, Score: score})
	}
	return got
}

// TestScoreWithoutPreScore covers profiles that enable Binpack for Score
// only: the framework then never calls PreScore.
func TestScoreWithoutPreScore(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	nodes := []*v1.Node{node("n1", "4", "8Gi", "")}
	snapshot := cache.NewSnapshot(nil, nodes)
	p, err := New(ctx, &config.BinpackArgs{Resources: cpuMem}, nil)
	if err != nil {
		t.Fatal(err)
	}
	nodeInfo, err := snapshot.Get("n1")
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		pod  *v1.Pod
		want int64
	}{
		{st.MakePod().Name("p").Req(map[v1.ResourceName]string{"cpu": "2"}).Obj(), 50},
		{st.MakePod().Name("best-effort").Obj(), 0},
	} {
		got, status := p.(fwk.ScorePlugin).Score(ctx, framework.NewCycleState(), tt.pod, nodeInfo)
		if !status.IsSuccess() || got != tt.want {
			t.Errorf("Score(%s) = %d, %v; want %d, success", tt.pod.Name, got, status, tt.want)
		}
	}
}

func TestNewRejectsBadArgs(t *testing.T) {
	tests := []struct {
		name    string
		args    *config.BinpackArgs
		wantErr string
	}{
		{
			name:    "negative weight",
			args:    &config.BinpackArgs{Resources: []schedconfig.ResourceSpec{{Name: "cpu", Weight: -1}}},
			wantErr: `binpackArgs.resources[0].weight: Invalid value: -1: must be in the range [1, 100]`,
		},
		{
			name:    "weight above 100",
			args:    &config.BinpackArgs{Resources: []schedconfig.ResourceSpec{{Name: "cpu", Weight: 101}}},
			wantErr: `binpackArgs.resources[0].weight: Invalid value: 101: must be in the range [1, 100]`,
		},
		{
			name:    "duplicate resource",
			args:    &config.BinpackArgs{Resources: []schedconfig.ResourceSpec{{Name: "cpu", Weight: 1}, {Name: "cpu", Weight: 2}}},
			wantErr: `binpackArgs.resources[1].name: Duplicate value: "cpu"`,
		},
		{
			name:    "no resources",
			args:    &config.BinpackArgs{},
			wantErr: `binpackArgs.resources: Required value: at least one resource must be scored`,
		},
		{
			name:    "invalid resource name",
			args:    &config.BinpackArgs{Resources: []schedconfig.ResourceSpec{{Name: "nvidia.com/gpu/x", Weight: 1}}},
			wantErr: `binpackArgs.resources[0].name: Invalid value: "nvidia.com/gpu/x"`,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, ctx := ktesting.NewTestContext(t)
			_, err := New(ctx, tt.args, nil)
			if err == nil {
				t.Fatalf("want error %q, got none", tt.wantErr)
			}
			if got := err.Error(); len(got) < len(tt.wantErr) || got[:len(tt.wantErr)] != tt.wantErr {
				t.Errorf("error:\n got %q\nwant prefix %q", got, tt.wantErr)
			}
		})
	}
	_, ctx := ktesting.NewTestContext(t)
	if _, err := New(ctx, &schedconfig.NodeResourcesFitArgs{}, nil); err == nil {
		t.Error("want an error for args of the wrong type")
	}
}

// BenchmarkScore measures PreScore once and Score on every node of a
// 1000-node cluster, as the framework calls them for one pod.
func BenchmarkScore(b *testing.B) {
	_, ctx := ktesting.NewTestContext(b)
	var nodes []*v1.Node
	var pods []*v1.Pod
	for i := range 1000 {
		name := fmt.Sprintf("n%d", i)
		nodes = append(nodes, node(name, "32", "128Gi", "8"))
		pods = append(pods, st.MakePod().Name("e"+name).Node(name).Req(map[v1.ResourceName]string{"cpu": "4", "memory": "8Gi", gpu: "2"}).Obj())
	}
	snapshot := cache.NewSnapshot(pods, nodes)
	nodeInfos, err := snapshot.NodeInfos().List()
	if err != nil {
		b.Fatal(err)
	}
	p, err := New(ctx, &config.BinpackArgs{Resources: append([]schedconfig.ResourceSpec{{Name: gpu, Weight: 4}}, cpuMem...)}, nil)
	if err != nil {
		b.Fatal(err)
	}
	pl := p.(*Binpack)
	pod := st.MakePod().Name("p").Req(map[v1.ResourceName]string{"cpu": "1", "memory": "2Gi", gpu: "1"}).Obj()
	b.ResetTimer()
	for range b.N {
		state := framework.NewCycleState()
		if s := pl.PreScore(ctx, state, pod, nil); !s.IsSuccess() {
			b.Fatal(s)
		}
		for _, ni := range nodeInfos {
			if _, s := pl.Score(ctx, state, pod, ni); !s.IsSuccess() {
				b.Fatal(s)
			}
		}
	}
}

// TestSignPod: pods with the same requests of the weighted resources are
// signed alike, others not.
func TestSignPod(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	p, err := New(ctx, &config.BinpackArgs{Resources: cpuMem}, nil)
	if err != nil {
		t.Fatal(err)
	}
	bp := p.(*Binpack)
	// The framework compares the fragments' JSON.
	sign := func(pod *v1.Pod) string {
		f, status := bp.SignPod(ctx, pod)
		if !status.IsSuccess() {
			t.Fatalf("SignPod(%s): %v", pod.Name, status)
		}
		data, err := json.Marshal(f)
		if err != nil {
			t.Fatal(err)
		}
		return string(data)
	}
	a := sign(st.MakePod().Name("a").Req(map[v1.ResourceName]string{v1.ResourceCPU: "1", v1.ResourceMemory: "1Gi"}).Obj())
	b := sign(st.MakePod().Name("b").Req(map[v1.ResourceName]string{v1.ResourceCPU: "1", v1.ResourceMemory: "1Gi"}).Obj())
	c := sign(st.MakePod().Name("c").Req(map[v1.ResourceName]string{v1.ResourceCPU: "2", v1.ResourceMemory: "1Gi"}).Obj())
	if diff := cmp.Diff(a, b); diff != "" {
		t.Errorf("pods with the same requests signed differently (-a +b):\n%s", diff)
	}
	if a == c {
		t.Errorf("pods with other cpu requests signed alike: %s", a)
	}
}

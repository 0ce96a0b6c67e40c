package scenario

import (
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	schedulingv1beta1 "k8s.io/api/scheduling/v1beta1"

	musterv1alpha1 "github.com/muster-sched/muster/apis/scheduling/v1alpha1"
)

const topologyScenario = `name: racks
profiles: [stock, coscheduling, muster-topology]
cluster:
  nodes:
  - name: gpu
    count: 8
    cpu: "64"
    memory: 256Gi
    gpus: 8
    topology: {nodesPerRack: 2, racksPerBlock: 2}
  - name: cpu
    count: 2
    cpu: "16"
    memory: 64Gi
workloads:
- name: rack-gang
  kind: gang
  members: 2
  requests: {nvidia.com/gpu: "8"}
  topology: {required: topology.muster.dev/rack, preferred: kubernetes.io/hostname}
- name: small
  kind: pods
  members: 2
  requests: {nvidia.com/gpu: "1"}
expect:
- profile: muster-topology
  minRequiredPlacement: 1
  minPreferredPlacement: 0.5
  minWholeFreeNodes: 2
  relative:
  - {metric: wholeFreeNodes, of: others, min: 1.2}
`

func TestParseTopology(t *testing.T) {
	s, err := Parse("racks.yaml", []byte(topologyScenario))
	if err != nil {
		t.Fatal(err)
	}
	var labels []map[string]string
	for _, g := range s.Cluster.Nodes {
		for _, i := range []int{0, g.Count - 1} {
			n, err := g.node(i)
			if err != nil {
				t.Fatal(err)
			}
			labels = append(labels, n.Labels)
		}
	}
	want := []map[string]string{
		{"kubernetes.io/hostname": "gpu-0", LabelNodeGroup: "gpu", musterv1alpha1.LabelRack: "gpu-rack-0", musterv1alpha1.LabelBlock: "gpu-block-0"},
		{"kubernetes.io/hostname": "gpu-7", LabelNodeGroup: "gpu", musterv1alpha1.LabelRack: "gpu-rack-3", musterv1alpha1.LabelBlock: "gpu-block-1"},
		{"kubernetes.io/hostname": "cpu-0", LabelNodeGroup: "cpu"},
		{"kubernetes.io/hostname": "cpu-1", LabelNodeGroup: "cpu"},
	}
	if diff := cmp.Diff(want, labels); diff != "" {
		t.Errorf("node labels (-want +got):\n%s", diff)
	}
	if got := s.Racks(); got != 4 {
		t.Errorf("Racks() = %d, want 4", got)
	}

	a := s.timeline()[0]
	wantAnnotations := map[string]string{
		musterv1alpha1.AnnotationTopologyRequired:  musterv1alpha1.LabelRack,
		musterv1alpha1.AnnotationTopologyPreferred: "kubernetes.io/hostname",
	}
	for _, profile := range []string{ProfileStock, ProfileStockBinpack, ProfileCoscheduling, ProfileUpstream} {
		if diff := cmp.Diff(wantAnnotations, a.pods(profile)[1].Annotations); diff != "" {
			t.Errorf("%s: member annotations (-want +got):\n%s", profile, diff)
		}
	}
	if got := a.pods(ProfileMusterTopology)[0].Annotations; len(got) != 0 {
		t.Errorf("muster-topology: member annotations %v, want none (the PodGroup holds the constraint)", got)
	}
	wantSpec := &musterv1alpha1.TopologySpec{Required: musterv1alpha1.LabelRack, Preferred: "kubernetes.io/hostname"}
	if diff := cmp.Diff(wantSpec, a.musterPodGroup(s.gangWait).Spec.Topology); diff != "" {
		t.Errorf("PodGroup spec.topology (-want +got):\n%s", diff)
	}
	wantUpstream := &schedulingv1beta1.PodGroupSchedulingConstraints{Topology: []schedulingv1beta1.TopologyConstraint{{Key: musterv1alpha1.LabelRack}}}
	if diff := cmp.Diff(wantUpstream, a.upstreamPodGroup().Spec.SchedulingConstraints); diff != "" {
		t.Errorf("upstream PodGroup spec.schedulingConstraints (-want +got):\n%s", diff)
	}
	if got := s.timeline()[1].pods(ProfileStock)[0].Annotations; len(got) != 0 {
		t.Errorf("plain pod annotations %v, want none", got)
	}
}

func TestParseTopologyErrors(t *testing.T) {
	tests := []struct {
		name    string
		edit    func(string) string
		wantErr []string
	}{
		{
			name:    "no whole racks",
			edit:    func(s string) string { return strings.Replace(s, "nodesPerRack: 2", "nodesPerRack: 3", 1) },
			wantErr: []string{"line 10: cluster.nodes[0].topology.nodesPerRack: must divide the group's count (8) into whole racks (got 3)"},
		},
		{
			name:    "no racks",
			edit:    func(s string) string { return strings.Replace(s, "nodesPerRack: 2", "nodesPerRack: 0", 1) },
			wantErr: []string{"line 10: cluster.nodes[0].topology.nodesPerRack: must be at least 1 (got 0)"},
		},
		{
			name:    "no whole blocks",
			edit:    func(s string) string { return strings.Replace(s, "racksPerBlock: 2", "racksPerBlock: 3", 1) },
			wantErr: []string{"line 10: cluster.nodes[0].topology.racksPerBlock: must divide the group's 4 racks into whole blocks (got 3)"},
		},
		{
			name: "rack label set twice",
			edit: func(s string) string {
				return strings.Replace(s, "    gpus: 8\n", "    gpus: 8\n    labels: {topology.muster.dev/rack: r1}\n", 1)
			},
			wantErr: []string{"line 10: cluster.nodes[0].labels.topology.muster.dev/rack: is set by topology"},
		},
		{
			name:    "unknown field",
			edit:    func(s string) string { return strings.Replace(s, "racksPerBlock", "racksPerBlok", 1) },
			wantErr: []string{"line 10: cluster.nodes[0].topology.racksPerBlok: unknown field"},
		},
		{
			name: "a key no node carries",
			edit: func(s string) string {
				return strings.Replace(s, "required: topology.muster.dev/rack", "required: topology.muster.dev/rak", 1)
			},
			wantErr: []string{`line 20: workloads[0].topology.required: no node carries the label "topology.muster.dev/rak" (the nodes have kubernetes.io/hostname, scenario.muster.dev/node-group, topology.muster.dev/block, topology.muster.dev/rack)`},
		},
		{
			name: "not a label key",
			edit: func(s string) string {
				return strings.Replace(s, "preferred: kubernetes.io/hostname", "preferred: rack level", 1)
			},
			wantErr: []string{`line 20: workloads[0].topology.preferred: must be a node label key such as topology.muster.dev/rack (got "rack level"`},
		},
		{
			name: "plain pods have no topology",
			edit: func(s string) string {
				return strings.Replace(s, "  requests: {nvidia.com/gpu: \"1\"}\n", "  requests: {nvidia.com/gpu: \"1\"}\n  topology: {preferred: topology.muster.dev/rack}\n", 1)
			},
			wantErr: []string{"line 25: workloads[1].topology: only a gang has a topology"},
		},
		{
			name: "an empty topology",
			edit: func(s string) string {
				return strings.Replace(s, "{required: topology.muster.dev/rack, preferred: kubernetes.io/hostname}", "{}", 1)
			},
			wantErr: []string{"line 20: workloads[0].topology: set required, preferred or both"},
		},
		{
			name: "a share above 1",
			edit: func(s string) string {
				return strings.Replace(s, "minRequiredPlacement: 1", "minRequiredPlacement: 100", 1)
			},
			wantErr: []string{"line 27: expect[0].minRequiredPlacement: must be a share from 0 to 1, such as 1 for every gang (got 100)"},
		},
		{
			name:    "a placement bound without such gangs",
			edit:    func(s string) string { return strings.Replace(s, ", preferred: kubernetes.io/hostname", "", 1) },
			wantErr: []string{"line 28: expect[0].minPreferredPlacement: no gang has a preferred topology"},
		},
		{
			name: "unknown relative metric",
			edit: func(s string) string {
				return strings.Replace(s, "metric: wholeFreeNodes", "metric: wholeFreeRacks", 1)
			},
			wantErr: []string{`line 31: expect[0].relative[0].metric: unknown metric "wholeFreeRacks"`},
		},
		{
			name:    "relative to a profile not run",
			edit:    func(s string) string { return strings.Replace(s, "of: others", "of: muster", 1) },
			wantErr: []string{`line 31: expect[0].relative[0].of: profile "muster" is not run by this scenario (or "others": every other profile)`},
		},
		{
			name:    "unknown profile",
			edit:    func(s string) string { return strings.Replace(s, "[stock, coscheduling", "[stock, stock-pack", 1) },
			wantErr: []string{`line 2: profiles[1]: unknown profile "stock-pack" (known: stock, stock-binpack, upstream`},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse("racks.yaml", []byte(tc.edit(topologyScenario)))
			if err == nil {
				t.Fatalf("Parse succeeded, want errors %q", tc.wantErr)
			}
			for _, want := range tc.wantErr {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("error %q does not contain %q", err, want)
				}
			}
		})
	}
}

func TestFreeCapacity(t *testing.T) {
	racked := []gpuNode{
		{name: "g-0", rack: "r0", gpus: 8}, {name: "g-1", rack: "r0", gpus: 8},
		{name: "g-2", rack: "r1", gpus: 8}, {name: "g-3", rack: "r1", gpus: 8},
	}
	tests := []struct {
		name  string
		nodes []gpuNode
		used  map[string]int
		want  FreeCapacity
	}{
		{"an idle cluster", racked, nil, FreeCapacity{WholeNodes: 4, WholeNodeGPUs: 32, FreeGPUs: 32, RackWholeNodes: 2, RackFreeGPUs: 16}},
		{
			name:  "one GPU in use on each rack",
			nodes: racked,
			used:  map[string]int{"g-0": 1, "g-3": 1},
			want:  FreeCapacity{WholeNodes: 2, WholeNodeGPUs: 16, FreeGPUs: 30, RackWholeNodes: 1, RackFreeGPUs: 15},
		},
		{
			name:  "one rack full, the other whole",
			nodes: racked,
			used:  map[string]int{"g-0": 8, "g-1": 8},
			want:  FreeCapacity{WholeNodes: 2, WholeNodeGPUs: 16, FreeGPUs: 16, RackWholeNodes: 2, RackFreeGPUs: 16},
		},
		{
			name:  "nodes in no rack",
			nodes: []gpuNode{{name: "a", gpus: 8}, {name: "b", gpus: 4}},
			used:  map[string]int{"a": 2},
			want:  FreeCapacity{WholeNodes: 1, WholeNodeGPUs: 4, FreeGPUs: 10},
		},
		{"no GPU nodes", nil, map[string]int{"cpu-0": 0}, FreeCapacity{}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, freeCapacity(tc.nodes, tc.used)); diff != "" {
				t.Errorf("freeCapacity (-want +got):\n%s", diff)
			}
		})
	}
}

func TestTopologyPlacement(t *testing.T) {
	labels := map[string]map[string]string{
		"n0": {"rack": "r0", "block": "b0"},
		"n1": {"rack": "r0", "block": "b0"},
		"n2": {"rack": "r1", "block": "b0"},
		"n3": {"block": "b0"},
	}
	bound := time.Unix(100, 0)
	members := func(nodes ...string) []*podRecord {
		var out []*podRecord
		for _, n := range nodes {
			p := &podRecord{node: n, bound: bound}
			if n == "" {
				p.bound = time.Time{}
			}
			out = append(out, p)
		}
		return out
	}
	tests := []struct {
		name      string
		gangs     []*gangRecord
		key       string
		wantGangs int
		wantIn    int
		wantShare float64
	}{
		{
			name:      "one rack, two racks",
			gangs:     []*gangRecord{{minMember: 2, members: members("n0", "n1")}, {minMember: 2, members: members("n0", "n2")}},
			key:       "rack",
			wantGangs: 2, wantIn: 1, wantShare: 0.5,
		},
		{
			name:      "two racks, one block",
			gangs:     []*gangRecord{{minMember: 2, members: members("n0", "n2")}},
			key:       "block",
			wantGangs: 1, wantIn: 1, wantShare: 1,
		},
		{
			name:      "a node without the key is a domain apart",
			gangs:     []*gangRecord{{minMember: 2, members: members("n3", "n3")}},
			key:       "rack",
			wantGangs: 1, wantIn: 0, wantShare: 0,
		},
		{
			name:      "gangs below their minimum are not placed",
			gangs:     []*gangRecord{{minMember: 2, members: members("n0", "")}, {minMember: 1, members: members("", "")}},
			key:       "rack",
			wantGangs: 0, wantIn: 0, wantShare: 0,
		},
		{
			name:      "members never bound do not count",
			gangs:     []*gangRecord{{minMember: 2, members: members("n0", "n1", "")}},
			key:       "rack",
			wantGangs: 1, wantIn: 1, wantShare: 1,
		},
		{
			name:      "no key, no count",
			gangs:     []*gangRecord{{minMember: 1, members: members("n0")}},
			key:       "",
			wantGangs: 0, wantIn: 0, wantShare: 0,
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var p placement
			for _, g := range tc.gangs {
				p.add(g, tc.key, labels)
			}
			got := []float64{float64(p.gangs), float64(p.inDomain), p.share()}
			want := []float64{float64(tc.wantGangs), float64(tc.wantIn), tc.wantShare}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("gangs, in one domain, share (-want +got):\n%s", diff)
			}
		})
	}
}

func TestSummarizeFree(t *testing.T) {
	samples := []sample{
		{at: 0, working: true, free: FreeCapacity{WholeNodes: 2, WholeNodeGPUs: 16, FreeGPUs: 20, RackWholeNodes: 1, RackFreeGPUs: 10}},
		{at: time.Second, working: true, free: FreeCapacity{WholeNodes: 4, WholeNodeGPUs: 32, FreeGPUs: 40, RackWholeNodes: 2, RackFreeGPUs: 16}},
		{at: 2 * time.Second, working: true, free: FreeCapacity{WholeNodes: 6, WholeNodeGPUs: 48, FreeGPUs: 60, RackWholeNodes: 3, RackFreeGPUs: 24}},
		{at: 3 * time.Second, working: false, free: FreeCapacity{WholeNodes: 8, WholeNodeGPUs: 64, RackWholeNodes: 4, RackFreeGPUs: 32}},
	}
	tests := []struct {
		name        string
		lastArrival time.Duration
		want        []float64
	}{
		{"everything arrives at the start: while work remained", 0, []float64{4, 32, 40, 2, 50.0 / 3}},
		{"up to the last arrival", time.Second, []float64{3, 24, 30, 1.5, 13}},
		{"an arrival after the work was done", 5 * time.Second, []float64{4, 32, 40, 2, 50.0 / 3}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var r Result
			r.summarizeFree(samples, tc.lastArrival)
			got := []float64{r.MeanWholeFreeNodes, r.MeanWholeFreeNodeGPUs, r.MeanFreeGPUs, r.MeanRackWholeFreeNodes, r.MeanRackFreeGPUs}
			if diff := cmp.Diff(tc.want, got, cmpopts.EquateApprox(0, 1e-9)); diff != "" {
				t.Errorf("means (-want +got):\n%s", diff)
			}
		})
	}
}

func TestCheckTopology(t *testing.T) {
	s, err := Parse("racks.yaml", []byte(topologyScenario))
	if err != nil {
		t.Fatal(err)
	}
	results := func(topo Result) []*Result {
		topo.Profile = ProfileMusterTopology
		return []*Result{
			{Profile: ProfileStock, MeanWholeFreeNodes: 2},
			{Profile: ProfileCoscheduling, MeanWholeFreeNodes: 3},
			&topo,
		}
	}
	tests := []struct {
		name string
		topo Result
		want []string
	}{
		{
			name: "every bound holds",
			topo: Result{RequiredGangs: 3, RequiredInDomain: 3, RequiredPlacement: 1, PreferredGangs: 3, PreferredInDomain: 2, PreferredPlacement: 2.0 / 3, MeanWholeFreeNodes: 3.6},
		},
		{
			name: "a gang outside its rack, few whole nodes",
			topo: Result{RequiredGangs: 3, RequiredInDomain: 2, RequiredPlacement: 2.0 / 3, PreferredGangs: 3, PreferredInDomain: 1, PreferredPlacement: 1.0 / 3, MeanWholeFreeNodes: 3},
			want: []string{
				"racks/muster-topology: topologyRequiredPlacement is 0.6667 (2 of 3 gangs in one domain), bound ≥ 1",
				"racks/muster-topology: topologyPreferredPlacement is 0.3333 (1 of 3 gangs in one domain), bound ≥ 0.5",
				"racks/muster-topology: wholeFreeNodes is 1 × coscheduling's (3 vs 3), bound ≥ 1.2×",
			},
		},
		{
			name: "no gang placed",
			topo: Result{MeanWholeFreeNodes: 1},
			want: []string{
				"racks/muster-topology: topologyRequiredPlacement: no gang it bounds was placed, bound ≥ 1",
				"racks/muster-topology: topologyPreferredPlacement: no gang it bounds was placed, bound ≥ 0.5",
				"racks/muster-topology: meanWholeFreeNodes is 1.00, bound ≥ 2",
				"racks/muster-topology: wholeFreeNodes is 0.3333 × coscheduling's (1 vs 3), bound ≥ 1.2×",
				"racks/muster-topology: wholeFreeNodes is 0.5 × stock's (1 vs 2), bound ≥ 1.2×",
			},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := Check(s, results(tc.topo))
			if diff := cmp.Diff(tc.want, got, cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("failures (-want +got):\n%s", diff)
			}
		})
	}
}

package scenario

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

const validScenario = `name: small
speedup: 5
cluster:
  nodes:
  - name: gpu
    count: 2
    cpu: "32"
    memory: 128Gi
    gpus: 8
queues:
- name: team-a
  weight: 2
workloads:
- name: train
  kind: gang
  repeat: 3
  every: 1s
  queue: team-a
  roles:
  - {name: ps, members: 1}
  - {name: worker, members: 4, min: 2, requests: {nvidia.com/gpu: "1"}}
  requests: {cpu: "2", memory: 4Gi}
  runTime: 30s
- name: web
  kind: pods
  members: 3
  requests: {cpu: 500m}
expect:
- profile: muster
  partialGangs: 0
  relative:
  - {metric: makespan, of: coscheduling, max: 0.5}
`

func TestParseValid(t *testing.T) {
	s, err := Parse("small.yaml", []byte(validScenario))
	if err != nil {
		t.Fatal(err)
	}
	got := struct {
		Profiles  []string
		Pods      int
		MinMember int
		Arrivals  int
		Gangs     bool
	}{s.Profiles, s.PodCount(), s.Workloads[0].minMember(), len(s.timeline()), s.HasGangs()}
	want := struct {
		Profiles  []string
		Pods      int
		MinMember int
		Arrivals  int
		Gangs     bool
	}{[]string{"stock", "upstream", "coscheduling", "muster"}, 3*5 + 3, 3, 4, true}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("parsed scenario (-want +got):\n%s", diff)
	}
	a := s.timeline()[3]
	pods := a.pods(ProfileMuster)
	var labels []map[string]string
	for _, p := range pods {
		labels = append(labels, p.Labels)
	}
	wantLabels := []map[string]string{
		{"muster.dev/pod-group": "train-2", "muster.dev/queue": "team-a", "muster.dev/role": "ps", LabelGang: "train-2", LabelWorkload: "train"},
		{"muster.dev/pod-group": "train-2", "muster.dev/queue": "team-a", "muster.dev/role": "worker", LabelGang: "train-2", LabelWorkload: "train"},
	}
	if diff := cmp.Diff(wantLabels, labels[:2]); diff != "" {
		t.Errorf("labels of the last copy's first pods (-want +got):\n%s", diff)
	}
	if got := a.pods(ProfileStock)[0].Labels; got["muster.dev/pod-group"] != "" || got["scheduling.x-k8s.io/pod-group"] != "" {
		t.Errorf("stock pods carry group labels: %v", got)
	}
	if got := a.pods(ProfileCoscheduling)[0].Labels["scheduling.x-k8s.io/pod-group"]; got != "train-2" {
		t.Errorf("coscheduling pod group label = %q, want train-2", got)
	}
	pg := a.musterPodGroup(s.gangWait)
	if diff := cmp.Diff(map[string]int32{"worker": 2}, pg.Spec.MinTaskMember); diff != "" {
		t.Errorf("minTaskMember (-want +got):\n%s", diff)
	}
}

func TestParseErrors(t *testing.T) {
	tests := []struct {
		name    string
		edit    func(string) string
		wantErr []string
	}{
		{
			name:    "unknown field",
			edit:    func(s string) string { return strings.Replace(s, "  every: 1s", "  evry: 1s", 1) },
			wantErr: []string{"line 17: workloads[0].evry: unknown field"},
		},
		{
			name:    "negative count",
			edit:    func(s string) string { return strings.Replace(s, "count: 2", "count: -2", 1) },
			wantErr: []string{"line 6: cluster.nodes[0].count: must be at least 1 (got -2)"},
		},
		{
			name:    "unknown resource",
			edit:    func(s string) string { return strings.Replace(s, "{cpu: 500m}", "{cpu: 500m, example.com/fpga: 1}", 1) },
			wantErr: []string{`line 27: workloads[1].requests.example.com/fpga: unknown resource "example.com/fpga"`},
		},
		{
			name: "negative repeat and bad duration",
			edit: func(s string) string {
				return strings.Replace(strings.Replace(s, "repeat: 3", "repeat: -1", 1), "runTime: 30s", "runTime: soon", 1)
			},
			wantErr: []string{"line 16: workloads[0].repeat: must not be negative", `line 23: workloads[0].runTime: must be a non-negative duration such as 30s or 2m (got "soon")`},
		},
		{
			name: "run time without the kubelet",
			edit: func(s string) string {
				return strings.Replace(s, "    gpus: 8\n", "    gpus: 8\n  kubelet: false\n", 1)
			},
			wantErr: []string{"line 24: workloads[0].runTime: needs the simulated kubelet, which cluster.kubelet turns off"},
		},
		{
			name:    "unknown queue",
			edit:    func(s string) string { return strings.Replace(s, "queue: team-a", "queue: team-b", 1) },
			wantErr: []string{`line 18: workloads[0].queue: no queue "team-b"`},
		},
		{
			name:    "role minimum above members",
			edit:    func(s string) string { return strings.Replace(s, "min: 2", "min: 5", 1) },
			wantErr: []string{"line 21: workloads[0].roles[1].min: must be between 0 and members (4) (got 5)"},
		},
		{
			name:    "bad quantity",
			edit:    func(s string) string { return strings.Replace(s, "memory: 128Gi", "memory: lots", 1) },
			wantErr: []string{`line 8: cluster.nodes[0].memory: must be a quantity`},
		},
		{
			name:    "relative bound against a profile not run",
			edit:    func(s string) string { return strings.Replace(s, "of: coscheduling", "of: capacityscheduling", 1) },
			wantErr: []string{`line 32: expect[0].relative[0].of: profile "capacityscheduling" is not run`},
		},
		{
			name: "fair share tolerance out of range",
			edit: func(s string) string {
				return strings.Replace(s, "speedup: 5\n", "speedup: 5\nfairShareTolerance: 1.5\n", 1)
			},
			wantErr: []string{"line 3: fairShareTolerance: must be a dominant share between 0 and 1, both excluded, such as 0.05 (got 1.5)"},
		},
		{
			name:    "runs out of range",
			edit:    func(s string) string { return strings.Replace(s, "speedup: 5\n", "speedup: 5\nruns: -2\n", 1) },
			wantErr: []string{"line 3: runs: must be between 1 and 25 (got -2)"},
		},
		{
			name: "time to fair share without a burst",
			edit: func(s string) string {
				return strings.Replace(s, "  partialGangs: 0\n", "  partialGangs: 0\n  maxTimeToFairShare: 2\n", 1)
			},
			wantErr: []string{"line 31: expect[0].maxTimeToFairShare: no burst to time: no workload of a queue arrives after the start"},
		},
		{
			name: "negative time to fair share",
			edit: func(s string) string {
				s = strings.Replace(s, "  every: 1s\n", "  every: 1s\n  arrival: 2s\n", 1)
				return strings.Replace(s, "  partialGangs: 0\n", "  partialGangs: 0\n  maxTimeToFairShare: -1\n", 1)
			},
			wantErr: []string{"line 32: expect[0].maxTimeToFairShare: must be a non-negative number of seconds (got -1)"},
		},
		{
			name:    "wrong type",
			edit:    func(s string) string { return strings.Replace(s, "members: 3", "members: three", 1) },
			wantErr: []string{"line 26: workloads[1].members: cannot unmarshal !!str `three` into int"},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse("small.yaml", []byte(tc.edit(validScenario)))
			if err == nil {
				t.Fatalf("Parse succeeded, want errors %q", tc.wantErr)
			}
			for _, want := range tc.wantErr {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("error %q does not contain %q", err, want)
				}
			}
			if !strings.HasPrefix(err.Error(), "small.yaml: ") {
				t.Errorf("error %q does not name the file", err)
			}
		})
	}
}

func TestParseManifests(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "extra.yaml")
	if err := os.WriteFile(file, []byte("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: a}\n---\napiVersion: v1\nkind: ConfigMap\nmetadata: {name: b}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	data := validScenario + "manifests:\n- extra.yaml\n- {apiVersion: v1, kind: Secret, metadata: {name: c}}\n- {kind: Secret}\n"
	_, err := Parse(filepath.Join(dir, "s.yaml"), []byte(data))
	if err == nil || !strings.Contains(err.Error(), "line 36: manifests[2]: line 36: a manifest needs apiVersion, kind and metadata.name") {
		t.Fatalf("error = %v, want the incomplete manifest named", err)
	}
	s, err := Parse(filepath.Join(dir, "s.yaml"), []byte(strings.TrimSuffix(data, "- {kind: Secret}\n")))
	if err != nil {
		t.Fatal(err)
	}
	var sources []string
	for _, o := range s.objects {
		sources = append(sources, o.source)
	}
	if diff := cmp.Diff([]string{"extra.yaml document 1", "extra.yaml document 2", "line 35"}, sources); diff != "" {
		t.Errorf("manifest objects (-want +got):\n%s", diff)
	}
}

func TestShippedScenariosParse(t *testing.T) {
	files, err := filepath.Glob("../../test/scenarios/*.yaml")
	if err != nil || len(files) == 0 {
		t.Fatalf("no scenarios found: %v", err)
	}
	for _, f := range files {
		if _, err := Load(f); err != nil {
			t.Error(err)
		}
	}
}

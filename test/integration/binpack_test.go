package integration

import (
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"

	"github.com/muster-sched/muster/pkg/simulator"
)

func TestBinpackPacksOntoFewestNodes(t *testing.T) {
	tests := []struct {
		name      string
		config    string
		wantNodes int
	}{
		{name: "binpack profile", config: readConfig(t, "binpack.yaml"), wantNodes: 2},
		{name: "stock profile spreads", config: stockConfig, wantNodes: 6},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnv(t)
			e.nodes("cpu", 6, simulator.NodeShape{CPU: "4", Memory: "16Gi"})
			e.startScheduler(tt.config)
			for _, n := range names("p", 8) {
				e.create(e.pod(n, map[v1.ResourceName]string{v1.ResourceCPU: "1"}))
			}
			used := distinctNodes(e.waitBound(names("p", 8)...))
			if len(used) != tt.wantNodes {
				t.Errorf("8 pods of 1 cpu landed on %d nodes %v, want %d", len(used), used, tt.wantNodes)
			}
		})
	}
}

func TestBinpackPacksGPUs(t *testing.T) {
	tests := []struct {
		name      string
		config    string
		wantNodes int
	}{
		{name: "binpack profile", config: readConfig(t, "binpack.yaml"), wantNodes: 2},
		{name: "stock profile spreads", config: stockConfig, wantNodes: 4},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnv(t)
			e.nodes("gpu", 4, simulator.NodeShape{CPU: "64", Memory: "256Gi", GPUs: 8})
			e.startScheduler(tt.config)
			for _, n := range names("train", 8) {
				e.create(e.pod(n, map[v1.ResourceName]string{v1.ResourceCPU: "2", v1.ResourceMemory: "8Gi", simulator.GPUResource: "2"}))
			}
			used := distinctNodes(e.waitBound(names("train", 8)...))
			if len(used) != tt.wantNodes {
				t.Errorf("8 pods of 2 GPUs landed on %d nodes %v, want %d", len(used), used, tt.wantNodes)
			}
		})
	}
}

func TestBinpackArgsRefusedAtStart(t *testing.T) {
	tests := []struct {
		name    string
		args    string
		wantErr string
	}{
		{
			name:    "negative weight",
			args:    "resources: [{name: cpu, weight: -1}]",
			wantErr: "binpackArgs.resources[0].weight: Invalid value: -1: must be in the range [1, 100]",
		},
		{
			name:    "unknown field",
			args:    "resources: [{name: cpu, weight: 1}]\n      packHarder: true",
			wantErr: `unknown field "packHarder"`,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnv(t)
			config := stockConfig + `profiles:
- schedulerName: default-scheduler
  plugins:
    score:
      enabled: [{name: Binpack}]
  pluginConfig:
  - name: Binpack
    args:
      ` + tt.args + "\n"
			s, err := simulator.StartScheduler(e.ctx, kubeconfig, []byte(config))
			if err == nil {
				s.Stop()
				t.Fatalf("the scheduler started; want it refused with %q", tt.wantErr)
			}
			if !strings.Contains(err.Error(), tt.wantErr) {
				t.Fatalf("refused with:\n  %v\nwant a message containing:\n  %s", err, tt.wantErr)
			}
		})
	}
}

package integration

import (
	"fmt"
	"testing"

	v1 "k8s.io/api/core/v1"
	"k8s.io/component-base/metrics/legacyregistry"

	"github.com/muster-sched/muster/pkg/simulator"
)

// TestPlainPodsAreBatched: kube-scheduler batches a pod like the one
// before it (opportunistic batching, on by default since 1.35) only when
// every PreFilter, Filter, PreScore and Score plugin of the profile can
// sign it. Muster's plugins sign the pods they do not manage, so those are
// batched as the stock scheduler batches them under every Muster
// configuration. (Default topology spreading signs no pod: the profiles
// here turn it off, as a cluster that wants batching does.)
func TestPlainPodsAreBatched(t *testing.T) {
	stock := "apiVersion: kubescheduler.config.k8s.io/v1\nkind: KubeSchedulerConfiguration\nprofiles:\n- schedulerName: default-scheduler\n"
	for _, name := range []string{"stock", "replace-default.yaml", "binpack.yaml", "capacity.yaml"} {
		t.Run(name, func(t *testing.T) {
			config := stock
			if name != "stock" {
				config = readConfig(t, name)
			}
			e := newEnv(t)
			e.nodes("n", 4, simulator.NodeShape{CPU: "32", Memory: "64Gi"})
			e.startScheduler(withoutDefaultSpreading(t, config))
			before := batchHintsUsed(t)
			var pods []string
			for i := range 30 {
				name := fmt.Sprintf("web-%d", i)
				e.create(e.pod(name, map[v1.ResourceName]string{v1.ResourceCPU: "100m"}))
				pods = append(pods, name)
			}
			e.waitBound(pods...)
			if used := batchHintsUsed(t) - before; used == 0 {
				t.Errorf("none of 30 identical plain pods was scheduled from a batch hint: the profile does not batch")
			}
		})
	}
}

// withoutDefaultSpreading sets PodTopologySpread's defaultingType to List
// (no default constraints) in every profile of config.
func withoutDefaultSpreading(t *testing.T, config string) string {
	return withPluginArgs(t, config, "PodTopologySpread", map[string]any{"defaultingType": "List"})
}

// batchHintsUsed is kube-scheduler's count of pods scheduled on a hint
// from the batch of the pod before, over every profile of the process.
func batchHintsUsed(t *testing.T) float64 {
	t.Helper()
	families, err := legacyregistry.DefaultGatherer.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var n float64
	for _, f := range families {
		if f.GetName() != "scheduler_batch_attempts_total" {
			continue
		}
		for _, m := range f.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "result" && l.GetValue() == "hint_used" {
					n += m.GetCounter().GetValue()
				}
			}
		}
	}
	return n
}

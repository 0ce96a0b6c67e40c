package integration

import (
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/klog/v2/ktesting"
	"k8s.io/kubernetes/cmd/kube-scheduler/app/options"
	schedconfig "k8s.io/kubernetes/pkg/scheduler/apis/config"
	"k8s.io/kubernetes/pkg/scheduler/apis/config/validation"

	"github.com/muster-sched/muster/apis/scheduling/v1alpha1"
	"github.com/muster-sched/muster/pkg/simulator"
)

// TestConfigsStart loads every shipped configuration through kube-scheduler's
// own options, validation and setup, and schedules a pod with it.
func TestConfigsStart(t *testing.T) {
	for _, tt := range []struct{ file, schedulerName string }{
		{"second-scheduler.yaml", "muster-scheduler"},
		{"replace-default.yaml", "default-scheduler"},
		{"binpack.yaml", "default-scheduler"},
		{"volcano.yaml", "volcano"},
	} {
		t.Run(tt.file, func(t *testing.T) {
			e := newEnv(t)
			e.nodes("n", 2, simulator.NodeShape{CPU: "4", Memory: "8Gi"})
			e.startScheduler(readConfig(t, tt.file))
			p := e.pod("p", map[v1.ResourceName]string{v1.ResourceCPU: "1"})
			p.Spec.SchedulerName = tt.schedulerName
			e.create(p)
			e.waitBound("p")
		})
	}
}

// TestReplaceDefaultPlacesPlainPodsLikeStock schedules the same plain pods on
// the same cluster state under the stock profile and under Muster's
// replace-default profile, one pod at a time (each sees the ones before it),
// and compares the nodes chosen. The cluster is built so that every probe has
// a single best node.
func TestReplaceDefaultPlacesPlainPodsLikeStock(t *testing.T) {
	probes := func(e *env) []*v1.Pod {
		small := e.pod("small", map[v1.ResourceName]string{v1.ResourceCPU: "500m", v1.ResourceMemory: "1Gi"})
		big := e.pod("big", map[v1.ResourceName]string{v1.ResourceCPU: "6", v1.ResourceMemory: "4Gi"})
		memory := e.pod("memory", map[v1.ResourceName]string{v1.ResourceMemory: "20Gi"})
		zoned := e.pod("zoned", map[v1.ResourceName]string{v1.ResourceCPU: "1"})
		zoned.Spec.NodeSelector = map[string]string{"zone": "b"}
		tolerating := e.pod("tolerating", map[v1.ResourceName]string{v1.ResourceCPU: "1"})
		tolerating.Spec.Tolerations = []v1.Toleration{{Key: "dedicated", Operator: v1.TolerationOpExists}}
		bestEffort := e.pod("best-effort", nil)
		return []*v1.Pod{small, big, memory, zoned, tolerating, bestEffort}
	}
	placements := map[string]map[string]string{}
	for _, profile := range []struct{ name, config string }{
		{"stock", stockConfig},
		{"muster", readConfig(t, "replace-default.yaml")},
	} {
		t.Run(profile.name, func(t *testing.T) {
			e := newEnv(t)
			e.nodes("a", 1, simulator.NodeShape{CPU: "8", Memory: "16Gi", Labels: map[string]string{"zone": "a"}})
			e.nodes("b", 1, simulator.NodeShape{CPU: "16", Memory: "24Gi", Labels: map[string]string{"zone": "b"}})
			e.nodes("c", 1, simulator.NodeShape{CPU: "4", Memory: "64Gi", Labels: map[string]string{"zone": "c"}})
			e.nodes("t", 1, simulator.NodeShape{CPU: "32", Memory: "64Gi",
				Taints: []v1.Taint{{Key: "dedicated", Value: "batch", Effect: v1.TaintEffectNoSchedule}}})
			// Existing load, bound directly as if scheduled earlier.
			load := e.pod("load", map[v1.ResourceName]string{v1.ResourceCPU: "10", v1.ResourceMemory: "4Gi"})
			load.Spec.NodeName = "b-0"
			e.create(load)
			e.startScheduler(profile.config)
			placements[profile.name] = map[string]string{}
			for _, p := range probes(e) {
				e.create(p)
				placements[profile.name][p.Name] = e.waitBound(p.Name)[p.Name]
			}
		})
	}
	if diff := cmp.Diff(placements["stock"], placements["muster"]); diff != "" {
		t.Errorf("plain pods placed differently (-stock,+muster):\n%s", diff)
	}
	t.Logf("placements: %v", placements["muster"])
}

// TestVolcanoConfigProfiles loads config/volcano.yaml through kube-scheduler's
// own config loading (decoding, defaulting) and validation, and checks that
// it serves default-scheduler and volcano with the same plugins and plugin
// args: the volcano profile is the default one under Volcano's name. The
// QueueSort plugins of multiPoint are compared by kube-scheduler only when it
// builds the profiles (TestConfigsStart's volcano.yaml case goes through it).
func TestVolcanoConfigProfiles(t *testing.T) {
	logger, _ := ktesting.NewTestContext(t)
	cfg, err := options.LoadConfigFromFile(logger, "../../config/volcano.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if err := validation.ValidateKubeSchedulerConfiguration(cfg); err != nil {
		t.Fatalf("kube-scheduler refuses the configuration: %v", err)
	}
	var names []string
	for _, p := range cfg.Profiles {
		names = append(names, p.SchedulerName)
	}
	if diff := cmp.Diff([]string{"default-scheduler", "volcano"}, names); diff != "" {
		t.Fatalf("profiles (-want,+got):\n%s", diff)
	}
	def, volcano := cfg.Profiles[0], cfg.Profiles[1]
	if diff := cmp.Diff(def.Plugins, volcano.Plugins); diff != "" {
		t.Errorf("plugins differ (-default-scheduler,+volcano):\n%s", diff)
	}
	if diff := cmp.Diff(def.PluginConfig, volcano.PluginConfig); diff != "" {
		t.Errorf("plugin args differ (-default-scheduler,+volcano):\n%s", diff)
	}
	named := func(name string) func(schedconfig.Plugin) bool {
		return func(p schedconfig.Plugin) bool { return p.Name == name }
	}
	mp := def.Plugins.MultiPoint
	if !slices.ContainsFunc(mp.Enabled, named("Gang")) || !slices.ContainsFunc(mp.Disabled, named("PrioritySort")) {
		t.Errorf("multiPoint enables %v and disables %v; want Gang in place of PrioritySort", mp.Enabled, mp.Disabled)
	}
}

// TestVolcanoConfigSharesQueues runs config/volcano.yaml and puts a pod of
// each profile in one queue with room for one of them: the queue's ceiling
// counts both profiles' pods, so one waits, and binds when the other goes.
func TestVolcanoConfigSharesQueues(t *testing.T) {
	e := newEnv(t)
	e.nodes("n", 1, simulator.NodeShape{CPU: "8", Memory: "16Gi"})
	e.queue("shared", v1alpha1.QueueSpec{Weight: 1, Capability: res("cpu", "2")})
	e.startScheduler(readConfig(t, "volcano.yaml"))
	var pods []string
	for _, name := range []string{"default-scheduler", "volcano"} {
		p := e.member(name, "2", map[string]string{v1alpha1.LabelQueue: "shared"})
		p.Spec.SchedulerName = name
		e.create(p)
		pods = append(pods, p.Name)
	}
	refused := e.waitOneRefused(pods, "queue shared")
	i := slices.Index(pods, refused)
	other := pods[1-i]
	if err := cluster.Client.CoreV1().Pods(e.ns).Delete(e.ctx, other, metav1.DeleteOptions{GracePeriodSeconds: new(int64)}); err != nil {
		t.Fatal(err)
	}
	e.waitBound(refused)
}

package scenario

import (
	"context"
	"fmt"
	"io/fs"
	"sync"
	"time"

	"k8s.io/kubernetes/cmd/kube-scheduler/app"
	"sigs.k8s.io/yaml"

	"github.com/muster-sched/muster/config"
	"github.com/muster-sched/muster/pkg/simulator"
)

// stockConfig is kube-scheduler's default profile.
const stockConfig = `
apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
profiles:
- schedulerName: default-scheduler
`

// stockBinpackConfig is kube-scheduler's default profile packing as its
// documentation shows (resource bin packing): NodeResourcesFit scores
// MostAllocated, GPUs weighted as Muster's binpack profile weighs them,
// and NodeResourcesBalancedAllocation, which would fight the packing, is
// off, as there. Stock plugins only.
const stockBinpackConfig = `
apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
profiles:
- schedulerName: default-scheduler
  plugins:
    score:
      disabled:
      - name: NodeResourcesBalancedAllocation
  pluginConfig:
  - name: NodeResourcesFit
    args:
      scoringStrategy:
        type: MostAllocated
        resources:
        - name: cpu
          weight: 1
        - name: memory
          weight: 1
        - name: nvidia.com/gpu
          weight: 5
`

// musterConfigs are the shipped configurations of Muster's profiles.
var musterConfigs = map[string]string{
	ProfileMuster:         "replace-default.yaml",
	ProfileMusterBinpack:  "binpack.yaml",
	ProfileMusterTopology: "topology.yaml",
}

// coschedulingConfig is scheduler-plugins' Coscheduling as its README
// configures it: the one QueueSort, and every other point it implements.
const coschedulingConfig = `
apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
profiles:
- schedulerName: default-scheduler
  plugins:
    multiPoint:
      enabled:
      - name: Coscheduling
      disabled:
      - name: PrioritySort
  pluginConfig:
  - name: Coscheduling
    args:
      permitWaitingTimeSeconds: %d
`

// capacitySchedulingConfig is scheduler-plugins' CapacityScheduling as its
// README configures it: its PostFilter replaces DefaultPreemption.
const capacitySchedulingConfig = `
apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
profiles:
- schedulerName: default-scheduler
  plugins:
    preFilter:
      enabled:
      - name: CapacityScheduling
    postFilter:
      enabled:
      - name: CapacityScheduling
      disabled:
      - name: "*"
    reserve:
      enabled:
      - name: CapacityScheduling
`

// schedulerConfig is the KubeSchedulerConfiguration of a profile, with the
// recorder added to every scheduler profile's Reserve and the pod backoff
// compressed like the scenario's time.
func schedulerConfig(profile string, gangWait time.Duration, speedup float64) ([]byte, error) {
	var base []byte
	switch profile {
	case ProfileStock, ProfileUpstream:
		// The upstream profile's control plane turns GenericWorkload on
		// in this process, which puts GangScheduling among the defaults.
		base = []byte(stockConfig)
	case ProfileCoscheduling:
		base = []byte(fmt.Sprintf(coschedulingConfig, int(gangWait.Seconds())))
	case ProfileCapacityScheduling:
		base = []byte(capacitySchedulingConfig)
	case ProfileStockBinpack:
		base = []byte(stockBinpackConfig)
	case ProfileMuster, ProfileMusterBinpack, ProfileMusterTopology:
		data, err := fs.ReadFile(config.FS, musterConfigs[profile])
		if err != nil {
			return nil, err
		}
		base = data
	default:
		return nil, fmt.Errorf("unknown profile %q", profile)
	}
	return adapt(base, speedup)
}

// defaultMaxBackoff is kube-scheduler's podMaxBackoffSeconds.
const defaultMaxBackoff = 10 * time.Second

// adapt adds the recorder to the Reserve point of every scheduler profile
// of a KubeSchedulerConfiguration, and divides the longest pod backoff by
// the speedup (down to the shortest the scheduler allows, 1 s), as the
// scenario's run times are: a pod that failed often should not wait what
// is minutes of simulated time.
func adapt(data []byte, speedup float64) ([]byte, error) {
	var cfg map[string]any
	if err := yaml.Unmarshal(data, &cfg); err != nil {
		return nil, err
	}
	delete(cfg, "leaderElection") // the runner runs one scheduler, without election
	if _, set := cfg["podMaxBackoffSeconds"]; !set && speedup > 1 {
		cfg["podInitialBackoffSeconds"] = 1
		cfg["podMaxBackoffSeconds"] = max(1, int(defaultMaxBackoff.Seconds()/speedup))
	}
	profiles, _ := cfg["profiles"].([]any)
	for _, p := range profiles {
		prof, _ := p.(map[string]any)
		if prof == nil {
			continue
		}
		pl, _ := prof["plugins"].(map[string]any)
		if pl == nil {
			pl = map[string]any{}
		}
		reserve, _ := pl["reserve"].(map[string]any)
		if reserve == nil {
			reserve = map[string]any{}
		}
		enabled, _ := reserve["enabled"].([]any)
		reserve["enabled"] = append(enabled, map[string]any{"name": RecorderName})
		pl["reserve"] = reserve
		prof["plugins"] = pl
	}
	return yaml.Marshal(cfg)
}

// registry is what a profile may name besides Muster's plugins: this run's
// recorder.
func registry(rec *recorder) []app.Option {
	return []app.Option{app.WithPlugin(RecorderName, rec.factory)}
}

// outcome is what a run's scheduler recorded, read once it has stopped.
type outcome struct {
	rel, open []released
	counters  schedulerCounters
	// cpu, peakRSS and peakHeap are the comparator process's; zero for a
	// scheduler in the runner's process, whose figures include it.
	cpu               time.Duration
	peakRSS, peakHeap uint64
}

// runningScheduler is a run's scheduler, in this process or the
// comparator's.
type runningScheduler interface {
	// stop stops the scheduler, once, and returns what it recorded, with
	// reservations still open closed at end.
	stop(end time.Time) (outcome, error)
}

// startScheduler starts the profile's scheduler with the configuration
// cfg against the cluster of kubeconfig.
func startScheduler(ctx context.Context, profile, kubeconfig string, cfg []byte) (runningScheduler, error) {
	if external(profile) {
		return startComparator(ctx, kubeconfig, cfg)
	}
	p := &inProcess{rec: newRecorder(), before: readSchedulerCounters()}
	var err error
	if p.sched, err = simulator.StartScheduler(ctx, kubeconfig, cfg, registry(p.rec)...); err != nil {
		return nil, err
	}
	return p, nil
}

// inProcess is a scheduler in the runner's process.
type inProcess struct {
	sched  *simulator.Scheduler
	rec    *recorder
	before schedulerCounters
	once   sync.Once
	out    outcome
}

func (p *inProcess) stop(end time.Time) (outcome, error) {
	p.once.Do(func() {
		p.sched.Stop()
		p.out.rel, p.out.open = p.rec.snapshot(end)
		p.out.counters = readSchedulerCounters().since(p.before)
	})
	return p.out, nil
}

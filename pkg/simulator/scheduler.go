package simulator

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	"github.com/spf13/pflag"
	"k8s.io/component-base/configz"
	"k8s.io/klog/v2"
	"k8s.io/kubernetes/cmd/kube-scheduler/app"
	"k8s.io/kubernetes/cmd/kube-scheduler/app/options"
	"sigs.k8s.io/yaml"

	"github.com/muster-sched/muster/pkg/batch"
	"github.com/muster-sched/muster/pkg/plugins"
	"github.com/muster-sched/muster/pkg/queue"
	"github.com/muster-sched/muster/pkg/server"
)

// Scheduler is a muster-scheduler running in this process.
type Scheduler struct {
	cancel  context.CancelFunc
	done    chan struct{}
	dir     string
	process *batch.Process
}

// Writing is closed once the scheduler's writers run (batch.Process.Writing).
func (s *Scheduler) Writing() <-chan struct{} { return s.process.Writing() }

// Queues returns the scheduler's queue accounting, or nil while no queue
// policy is on: tests audit it.
func (s *Scheduler) Queues() *queue.State { return s.process.Queues() }

// StartScheduler runs the scheduler with a KubeSchedulerConfiguration (YAML)
// against the cluster of kubeconfig, through kube-scheduler's own options,
// config loading, validation and setup — the path the binary takes. Only the
// client connection is filled in: the kubeconfig, and a high QPS unless the
// configuration sets one. Leader election is off: the scheduler leads from
// the start. Muster's plugins are registered, with extra.
func StartScheduler(ctx context.Context, kubeconfig string, config []byte, extra ...app.Option) (*Scheduler, error) {
	process := batch.NewProcess()
	registry := append(plugins.Options(process), extra...)
	dir, err := os.MkdirTemp("", "muster-scheduler")
	if err != nil {
		return nil, err
	}
	s := &Scheduler{dir: dir, done: make(chan struct{}), process: process}
	configFile := filepath.Join(dir, "config.yaml")
	if err := WriteConfig(configFile, kubeconfig, config); err != nil {
		s.cleanup()
		return nil, err
	}
	opts := options.NewOptions()
	fs := pflag.NewFlagSet("muster-scheduler", pflag.ContinueOnError)
	for _, f := range opts.Flags.FlagSets {
		fs.AddFlagSet(f)
	}
	if err := fs.Parse([]string{"--config=" + configFile, "--secure-port=0", "--leader-elect=false"}); err != nil {
		s.cleanup()
		return nil, err
	}
	if err := opts.ComponentGlobalsRegistry.Set(); err != nil {
		s.cleanup()
		return nil, err
	}
	ctx, s.cancel = context.WithCancel(ctx)
	cc, sched, err := app.Setup(ctx, opts, registry...)
	if err != nil {
		s.cancel()
		s.cleanup()
		return nil, err
	}
	go func() {
		defer close(s.done)
		if err := server.Run(ctx, cc, sched, process); err != nil && ctx.Err() == nil {
			klog.FromContext(ctx).Error(err, "Scheduler stopped")
		}
	}()
	return s, nil
}

// Stop stops the scheduler and waits until it has.
func (s *Scheduler) Stop() {
	s.cancel()
	<-s.done
	s.cleanup()
}

func (s *Scheduler) cleanup() {
	// Run registers the configuration under a process-wide name; a later
	// scheduler in this process must be able to register it again.
	configz.Delete("componentconfig")
	_ = os.RemoveAll(s.dir)
}

// WriteConfig writes config to file with its clientConnection pointed at
// kubeconfig.
func WriteConfig(file, kubeconfig string, config []byte) error {
	var cfg map[string]any
	if err := yaml.Unmarshal(config, &cfg); err != nil {
		return fmt.Errorf("decoding scheduler configuration: %w", err)
	}
	if cfg == nil {
		return fmt.Errorf("empty scheduler configuration")
	}
	conn, _ := cfg["clientConnection"].(map[string]any)
	if conn == nil {
		conn = map[string]any{}
	}
	conn["kubeconfig"] = kubeconfig
	if _, ok := conn["qps"]; !ok {
		conn["qps"], conn["burst"] = 5000, 5000
	}
	cfg["clientConnection"] = conn
	data, err := yaml.Marshal(cfg)
	if err != nil {
		return err
	}
	return os.WriteFile(file, data, 0o600)
}

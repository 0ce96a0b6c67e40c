// Command muster is Muster's command-line tool. `muster sandbox` runs the
// scheduler on an in-process control plane with simulated nodes, applies
// manifests, and reports where every pod landed and why pending pods wait.
package main

import (
	"context"
	"fmt"
	"io/fs"
	"os"
	"os/signal"
	"runtime/debug"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"
	kubeversion "k8s.io/component-base/version"

	"github.com/muster-sched/muster/config"
	"github.com/muster-sched/muster/pkg/controlplane"
	"github.com/muster-sched/muster/pkg/sandbox"
)

func main() {
	// Interrupted, `muster top --watch` stops between refreshes.
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := newCommand().ExecuteContext(ctx)
	stop()
	if err != nil {
		os.Exit(1)
	}
}

func newCommand() *cobra.Command {
	root := &cobra.Command{
		Use:           "muster",
		Short:         "Muster: batch scheduling inside kube-scheduler",
		SilenceUsage:  true,
		SilenceErrors: false,
		// --version is component-base's flag (verflag), which the
		// scheduler packages register on the process's flag set: cobra's
		// own would clash with it.
		RunE: func(cmd *cobra.Command, args []string) error {
			if f := cmd.Flags().Lookup("version"); f != nil && f.Value.String() != "false" {
				_, err := fmt.Fprintln(cmd.OutOrStdout(), "muster", version())
				return err
			}
			return cmd.Help()
		},
	}
	root.AddCommand(newSandboxCommand())
	root.AddCommand(newBenchCommand())
	root.AddCommand(newExplainCommand())
	root.AddCommand(newTopCommand())
	return root
}

func newSandboxCommand() *cobra.Command {
	var (
		opts       sandbox.Options
		configName string
		verbosity  int
	)
	cmd := &cobra.Command{
		Use:   "sandbox [FILE|DIR]...",
		Short: "Run Muster on an embedded control plane with simulated nodes and report the placement",
		Long: `Starts a real kube-apiserver and etcd in this process, simulated nodes (the Node
objects among the manifests, or a default cluster of 4 cpu and 2 GPU nodes), a
simulated kubelet and the Muster scheduler; applies the manifests; waits until
nothing changes; and prints where every pod landed and why pending pods wait.`,
		Example: `  muster sandbox examples
  muster sandbox --config binpack.yaml examples/plain-pods.yaml
  muster sandbox --keep --kubeconfig ./sandbox-kubeconfig examples`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			controlplane.Logs(verbosity)
			schedConfig, err := readSchedulerConfig(configName)
			if err != nil {
				return err
			}
			opts.Paths, opts.SchedulerConfig = args, schedConfig
			ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			return sandbox.Run(ctx, opts, cmd.OutOrStdout())
		},
	}
	f := cmd.Flags()
	f.StringVar(&configName, "config", "replace-default.yaml", "KubeSchedulerConfiguration: a file, or the name of a shipped one (replace-default.yaml, second-scheduler.yaml, binpack.yaml)")
	f.DurationVar(&opts.Settle, "settle", 2*time.Second, "how long nothing may change before the run is over")
	f.DurationVar(&opts.Timeout, "timeout", 2*time.Minute, "the longest the run may take after the manifests are applied")
	f.Float64Var(&opts.Speedup, "speedup", 1, "divide simulated run times (annotation sim.muster.dev/run-time) by this")
	f.BoolVar(&opts.Keep, "keep", false, "keep the sandbox running after the report, for kubectl")
	f.StringVar(&opts.Kubeconfig, "kubeconfig", "", "where to write the sandbox's kubeconfig (with --keep)")
	f.IntVarP(&verbosity, "v", "v", 0, "log verbosity of the control plane and scheduler (0: no logs)")
	return cmd
}

// readSchedulerConfig reads a configuration file, or a shipped one by name.
func readSchedulerConfig(name string) ([]byte, error) {
	if data, err := fs.ReadFile(config.FS, name); err == nil {
		return data, nil
	}
	data, err := os.ReadFile(name)
	if err != nil {
		return nil, fmt.Errorf("--config %s is neither a shipped configuration nor a readable file: %w", name, err)
	}
	return data, nil
}

// version is Muster's module version or commit, and the Kubernetes release
// it is built on: the Makefile's ldflags, else the k8s.io/kubernetes module.
func version() string {
	v, kube := "(devel)", kubeversion.Get().GitVersion
	if info, ok := debug.ReadBuildInfo(); ok {
		if info.Main.Version != "" {
			v = info.Main.Version
		}
		for _, s := range info.Settings {
			if s.Key == "vcs.revision" && v == "(devel)" {
				v = s.Value
			}
		}
		for _, d := range info.Deps {
			if d.Path == "k8s.io/kubernetes" && strings.HasPrefix(kube, "v0.0.0") {
				kube = d.Version
			}
		}
	}
	return fmt.Sprintf("%s (Kubernetes %s)", v, kube)
}

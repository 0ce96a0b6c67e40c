// Command muster-comparator is kube-scheduler 1.34.7 with scheduler-plugins'
// Coscheduling and CapacityScheduling: the comparators `muster bench` runs
// beside Muster. scheduler-plugins' plugins do not compile against the
// Kubernetes release Muster is built on, so they live in this module of
// their own, pinned to the last release they support, and the runner starts
// this binary against its control plane.
//
// It runs one scheduler from --config without leader election until SIGTERM
// or SIGINT, then writes what the runner measures in-process for the other
// profiles (reservations, scheduling attempts, extension point times) to
// --report as JSON.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/spf13/pflag"
	"k8s.io/klog/v2"
	"k8s.io/kubernetes/cmd/kube-scheduler/app"
	"k8s.io/kubernetes/cmd/kube-scheduler/app/options"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/scheduler-plugins/pkg/capacityscheduling"
	"sigs.k8s.io/scheduler-plugins/pkg/coscheduling"

	// scheduler-plugins' args (CoschedulingArgs) decode through
	// kube-scheduler's scheme once registered there.
	_ "sigs.k8s.io/scheduler-plugins/apis/config/scheme"
)

func main() {
	klog.InitFlags(nil)
	config := flag.String("config", "", "KubeSchedulerConfiguration file, its clientConnection pointing at the cluster")
	report := flag.String("report", "", "file to write the run's report to (JSON) when the scheduler stops")
	flag.Parse()
	if *config == "" || *report == "" {
		fmt.Fprintln(os.Stderr, "muster-comparator: --config and --report are required")
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	if err := run(ctx, *config, *report); err != nil {
		fmt.Fprintln(os.Stderr, "muster-comparator:", err)
		os.Exit(1)
	}
}

// run schedules until ctx ends, then writes the report.
func run(ctx context.Context, config, report string) error {
	// scheduler-plugins' plugins build controller-runtime clients, which
	// complain (with a stack) unless its logger is set: send it to klog.
	ctrllog.SetLogger(klog.Background())
	opts := options.NewOptions()
	fs := pflag.NewFlagSet("muster-comparator", pflag.ContinueOnError)
	for _, f := range opts.Flags.FlagSets {
		fs.AddFlagSet(f)
	}
	if err := fs.Parse([]string{"--config=" + config, "--secure-port=0", "--leader-elect=false"}); err != nil {
		return err
	}
	if err := opts.ComponentGlobalsRegistry.Set(); err != nil {
		return err
	}
	rec := newRecorder()
	go rec.sampleHeap(ctx)
	cc, sched, err := app.Setup(ctx, opts,
		app.WithPlugin(coscheduling.Name, coscheduling.New),
		app.WithPlugin(capacityscheduling.Name, capacityscheduling.New),
		app.WithPlugin(RecorderName, rec.factory),
	)
	if err != nil {
		return err
	}
	if err := app.Run(ctx, cc, sched); err != nil && ctx.Err() == nil {
		return err
	}
	data, err := rec.report()
	if err != nil {
		return err
	}
	if err := os.WriteFile(report, data, 0o600); err != nil {
		return errors.Join(errors.New("writing the report"), err)
	}
	return nil
}

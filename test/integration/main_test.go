// Package integration runs Muster against a real kube-apiserver (embedded
// etcd + kube-apiserver in this process, Muster's CRDs installed), simulated
// nodes and a simulated kubelet. One control plane serves the whole suite;
// each case works in its own namespace and brings its own nodes, so cases
// run one after another.
package integration

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	schedulerplugins "github.com/muster-sched/muster/manifests/scheduler-plugins"
	"github.com/muster-sched/muster/manifests/volcano"
	"github.com/muster-sched/muster/pkg/controlplane"
	"github.com/muster-sched/muster/pkg/simulator"
)

var (
	cluster    *controlplane.ControlPlane
	kubeconfig string
)

func TestMain(m *testing.M) {
	os.Exit(run(m))
}

func run(m *testing.M) int {
	// The apiserver and the scheduler log through klog at a rate that buries
	// test output; MUSTER_TEST_LOGS=1 keeps their logs.
	if os.Getenv("MUSTER_TEST_LOGS") == "" {
		controlplane.QuietLogs()
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var err error
	if cluster, err = controlplane.Start(ctx, schedulerplugins.FS, volcano.FS); err != nil {
		fmt.Fprintln(os.Stderr, "starting the control plane:", err)
		return 1
	}
	defer cluster.Stop()
	dir, err := os.MkdirTemp("", "muster-integration")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(dir)
	kubeconfig = filepath.Join(dir, "kubeconfig")
	if err := cluster.WriteKubeconfig(kubeconfig); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	kubelet, err := simulator.StartKubelet(ctx, cluster.Client, 1)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer kubelet.Wait()
	defer cancel()
	return m.Run()
}

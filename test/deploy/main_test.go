// Package deploy tests Muster as it is deployed: the Helm chart (lint,
// rendering, schema, every object applied to a real kube-apiserver, helm
// install, upgrade and uninstall against it), the
// kubeadm static-pod manifests, and the built muster-scheduler binary run as
// separate processes with the chart's configuration, flags and RBAC, in both
// modes and through a leader failover.
//
// One control plane serves the whole suite. Unlike the integration suite's,
// it runs the RBAC authorizer, and every scheduler process authenticates as
// the chart's ServiceAccount (or kubeadm's system:kube-scheduler user), so a
// missing permission shows up as a "forbidden" in its log, which fails the
// test. It serves Kubernetes' own gang API (scheduling.k8s.io/v1beta1), as
// a 1.37 cluster with GenericWorkload on; the scheduler processes keep that
// gate off, as Muster's configurations do, and schedule its PodGroups.
package deploy

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/muster-sched/muster/pkg/controlplane"
	"github.com/muster-sched/muster/pkg/simulator"
)

// repoRoot is the module root, relative to this package.
const repoRoot = "../.."

var (
	cluster *controlplane.ControlPlane
	// helmBin runs helm; schedulerBin is the muster-scheduler binary built
	// from this tree.
	helmBin, schedulerBin string
	// workDir holds kubeconfigs and scheduler configurations.
	workDir string
	// auditLog is the apiserver's audit log of requests that may write.
	auditLog string
)

func TestMain(m *testing.M) {
	os.Exit(run(m))
}

func run(m *testing.M) int {
	if os.Getenv("MUSTER_TEST_LOGS") == "" {
		controlplane.QuietLogs()
	}
	var err error
	if kubeVersion, err = kubernetesRelease(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	if helmBin, err = findHelm(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	if workDir, err = os.MkdirTemp("", "muster-deploy"); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(workDir)
	if schedulerBin, err = buildScheduler(workDir); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	auditLog = filepath.Join(workDir, "audit.log")
	if cluster, err = controlplane.StartWithOptions(ctx, controlplane.Options{RBAC: true, GangAPI: true, AuditLog: auditLog}); err != nil {
		fmt.Fprintln(os.Stderr, "starting the control plane:", err)
		return 1
	}
	defer cluster.Stop()
	kubelet, err := simulator.StartKubelet(ctx, cluster.Client, 1)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer kubelet.Wait()
	defer cancel()
	return m.Run()
}

// findHelm returns the pinned helm: $HELM (set by the Makefile), else
// bin/helm.
func findHelm() (string, error) {
	path := os.Getenv("HELM")
	if path == "" {
		path = filepath.Join(repoRoot, "bin", "helm")
	}
	abs, err := filepath.Abs(path)
	if err != nil {
		return "", err
	}
	if _, err := os.Stat(abs); err != nil {
		return "", fmt.Errorf("helm not found at %s: run `make helm` (make test installs it) or set HELM", abs)
	}
	return abs, nil
}

// buildScheduler builds cmd/muster-scheduler into dir, unless
// MUSTER_SCHEDULER names a binary already built. The build cache makes this
// a link step once the test binary is built.
func buildScheduler(dir string) (string, error) {
	if path := os.Getenv("MUSTER_SCHEDULER"); path != "" {
		return filepath.Abs(path)
	}
	out := filepath.Join(dir, "muster-scheduler")
	cmd := exec.Command("go", "build", "-o", out, "./cmd/muster-scheduler")
	cmd.Dir = repoRoot
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("building muster-scheduler: %w", err)
	}
	return out, nil
}

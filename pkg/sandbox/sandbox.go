// Package sandbox runs Muster's main job with no cluster: an in-process
// control plane, simulated nodes and kubelet, the Muster scheduler, and the
// user's manifests; then it reports where every pod landed and why pending
// pods wait.
package sandbox

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/dynamic"
	"k8s.io/klog/v2"

	"github.com/muster-sched/muster/pkg/controlplane"
	"github.com/muster-sched/muster/pkg/inspect"
	"github.com/muster-sched/muster/pkg/simulator"
)

// Options says what the sandbox runs.
type Options struct {
	// Paths are manifest files or folders. Node objects among them become
	// simulated nodes (status.capacity required); without any, DefaultNodes.
	Paths []string
	// SchedulerConfig is the KubeSchedulerConfiguration (YAML) to run.
	SchedulerConfig []byte
	// Settle is how long nothing may change before the run is over.
	Settle time.Duration
	// Timeout bounds the whole run after the manifests are applied.
	Timeout time.Duration
	// Speedup compresses simulated run times (sim.muster.dev/run-time).
	Speedup float64
	// Keep keeps the control plane and scheduler running after the report,
	// until ctx ends; Kubeconfig is then written for kubectl.
	Keep       bool
	Kubeconfig string
}

// DefaultNodes is the cluster used when the manifests bring no nodes.
var DefaultNodes = []struct {
	Prefix string
	Count  int
	Shape  simulator.NodeShape
}{
	{"cpu", 4, simulator.NodeShape{CPU: "8", Memory: "32Gi"}},
	{"gpu", 2, simulator.NodeShape{CPU: "32", Memory: "128Gi", GPUs: 8}},
}

// Run runs the sandbox and writes the report to out.
func Run(ctx context.Context, opts Options, out io.Writer) error {
	logger := klog.FromContext(ctx)
	manifests, err := readManifests(opts.Paths)
	if err != nil {
		return err
	}
	nodes, objects, err := splitNodes(manifests)
	if err != nil {
		return err
	}
	sortForApply(objects)

	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	start := time.Now()
	cp, err := controlplane.Start(ctx)
	if err != nil {
		return err
	}
	defer cp.Stop()
	logger.V(1).Info("Control plane ready", "after", time.Since(start))

	if len(nodes) == 0 {
		for _, n := range DefaultNodes {
			if _, err := simulator.CreateNodes(ctx, cp.Client, n.Prefix, n.Count, n.Shape); err != nil {
				return err
			}
		}
	}
	for _, n := range nodes {
		if _, err := simulator.CreateNode(ctx, cp.Client, n); err != nil {
			return fmt.Errorf("creating node %s: %w", n.Name, err)
		}
	}

	kubelet, err := simulator.StartKubelet(ctx, cp.Client, opts.Speedup)
	if err != nil {
		return err
	}
	defer kubelet.Wait()
	defer cancel()

	kubeconfig := opts.Kubeconfig
	if kubeconfig == "" {
		dir, err := os.MkdirTemp("", "muster-sandbox")
		if err != nil {
			return err
		}
		defer os.RemoveAll(dir)
		kubeconfig = filepath.Join(dir, "kubeconfig")
	}
	if err := cp.WriteKubeconfig(kubeconfig); err != nil {
		return err
	}
	sched, err := simulator.StartScheduler(ctx, kubeconfig, opts.SchedulerConfig)
	if err != nil {
		return err
	}
	defer sched.Stop()
	// What the user gave is applied once Muster writes: the default Queue
	// exists and status is written from the complete gang state.
	select {
	case <-sched.Writing():
	case <-ctx.Done():
		return ctx.Err()
	}

	dyn, err := dynamic.NewForConfig(cp.JSONConfig())
	if err != nil {
		return err
	}
	a := newApplier(cp.Client.Discovery(), dyn)
	for _, m := range objects {
		if err := a.create(ctx, m); err != nil {
			return err
		}
	}
	applied := time.Now()
	if err := waitSettled(ctx, cp, opts.Settle, opts.Timeout); err != nil {
		return err
	}
	r, err := collect(ctx, cp)
	if err != nil {
		return err
	}
	r.Elapsed = time.Since(applied)
	r.write(out)

	if opts.Keep {
		fmt.Fprintf(out, "\nThe sandbox keeps running. Try:\n  kubectl --kubeconfig %s get nodes,pods -A -o wide\n  kubectl --kubeconfig %s get muster -A\nPress Ctrl-C to stop.\n", kubeconfig, kubeconfig)
		<-ctx.Done()
	}
	return nil
}

// waitSettled waits until the pods' placement and phases, and the status
// of PodGroups and Queues, have not changed for settle, and every PodGroup
// and Queue has a status for its spec; or until timeout has passed.
func waitSettled(ctx context.Context, cp *controlplane.ControlPlane, settle, timeout time.Duration) error {
	var last map[string]string
	lastChange := time.Now()
	err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, timeout, false, func(ctx context.Context) (bool, error) {
		pods, err := cp.Client.CoreV1().Pods(metav1.NamespaceAll).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err
		}
		now := map[string]string{}
		for _, p := range pods.Items {
			now[p.Namespace+"/"+p.Name] = p.Spec.NodeName + "|" + string(p.Status.Phase) + "|" + inspect.Waiting(&p)
		}
		groups, err := cp.Muster.SchedulingV1alpha1().PodGroups(metav1.NamespaceAll).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err
		}
		queues, err := cp.Muster.SchedulingV1alpha1().Queues().List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err
		}
		written := true
		for _, g := range groups.Items {
			now["podgroup "+g.Namespace+"/"+g.Name] = fmt.Sprintf("%+v", g.Status)
			written = written && g.Status.ObservedGeneration == g.Generation
		}
		for _, q := range queues.Items {
			now["queue "+q.Name] = fmt.Sprintf("%+v", q.Status)
			written = written && q.Status.ObservedGeneration == q.Generation
		}
		if !reflect.DeepEqual(now, last) {
			last, lastChange = now, time.Now()
			return false, nil
		}
		return written && time.Since(lastChange) >= settle, nil
	})
	if wait.Interrupted(err) && ctx.Err() == nil {
		return nil // timed out: report what there is
	}
	return err
}

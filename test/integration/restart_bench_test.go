package integration

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"golang.org/x/sync/errgroup"
	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/klog/v2"

	"github.com/muster-sched/muster/apis/scheduling/v1alpha1"
	"github.com/muster-sched/muster/pkg/simulator"
)

// The cluster a scheduler restarts into: restartNodes nodes and
// restartGangs gangs of restartGangSize one-cpu pods, each gang a Muster
// PodGroup in one of restartQueues queues; the first half of the gangs is
// bound, the second half waits.
const (
	restartNodes    = 5000
	restartGangs    = 5000
	restartGangSize = 10
	restartQueues   = 10
	pendingLabel    = "bench.muster.dev/pending"
)

// BenchmarkRestart measures restart to the first scheduling decision: from
// the start of a scheduler process (informers, Muster's state read back from
// the API) to the first waiting pod bound. A first Muster run writes every
// PodGroup's status, as the replica before would have; then each iteration
// restarts stock kube-scheduler and Muster in turn on the same objects and
// puts back the pods each bound. Run it alone:
//
//	go test ./test/integration -run '^$' -bench Restart -benchtime 3x -timeout 40m
func BenchmarkRestart(b *testing.B) {
	// A benchmark prints what it logs: the schedulers log through klog,
	// quiet unless MUSTER_TEST_LOGS is set.
	e := newEnvContext(b, context.Background())
	setUpRestartCluster(e)
	configs := []struct{ name, config string }{
		{"stock", stockConfig},
		{"muster", readConfig(b, "replace-default.yaml")},
	}
	warmUp(e, configs[1].config)
	seconds := map[string][]float64{}
	// b.Loop, not b.N: the function then runs once, and so does the setup.
	for b.Loop() {
		for _, c := range configs {
			d := firstDecision(e, c.config)
			b.Logf("%s: first decision %.2fs after start", c.name, d.Seconds())
			seconds[c.name] = append(seconds[c.name], d.Seconds())
			b.StopTimer()
			resetWaiting(e)
			b.StartTimer()
		}
	}
	for _, c := range configs {
		b.ReportMetric(median(seconds[c.name]), c.name+"-s")
	}
	b.ReportMetric(median(seconds["muster"])/median(seconds["stock"]), "muster/stock")
}

func median(xs []float64) float64 {
	s := slices.Sorted(slices.Values(xs))
	return s[len(s)/2]
}

// setUpRestartCluster creates the nodes, queues, PodGroups and pods, and
// waits until the simulated kubelet runs every bound pod.
func setUpRestartCluster(e *env) {
	e.t.Helper()
	g, ctx := errgroup.WithContext(e.ctx)
	g.SetLimit(32)
	for i := range restartNodes {
		g.Go(func() error {
			node, err := simulator.NodeShape{CPU: "32", Memory: "128Gi"}.Node(fmt.Sprintf("n-%d", i))
			if err != nil {
				return err
			}
			_, err = simulator.CreateNode(ctx, cluster.Client, node)
			return err
		})
	}
	for i := range restartQueues {
		e.queue(fmt.Sprintf("q-%d", i), v1alpha1.QueueSpec{Weight: 1})
	}
	for i := range restartGangs {
		g.Go(func() error {
			_, err := cluster.Muster.SchedulingV1alpha1().PodGroups(e.ns).Create(ctx, &v1alpha1.PodGroup{
				ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("g-%d", i)},
				Spec:       v1alpha1.PodGroupSpec{MinMember: restartGangSize, Queue: fmt.Sprintf("q-%d", i%restartQueues)},
			}, metav1.CreateOptions{})
			return err
		})
	}
	if err := g.Wait(); err != nil {
		e.t.Fatal(err)
	}
	g, ctx = errgroup.WithContext(e.ctx)
	g.SetLimit(32)
	for i := range restartGangs {
		for j := range restartGangSize {
			g.Go(func() error {
				p := restartPod(e, i, j)
				if i < restartGangs/2 {
					p.Spec.NodeName = fmt.Sprintf("n-%d", (i*restartGangSize+j)%restartNodes)
				}
				_, err := cluster.Client.CoreV1().Pods(e.ns).Create(ctx, p, metav1.CreateOptions{})
				return err
			})
		}
	}
	if err := g.Wait(); err != nil {
		e.t.Fatal(err)
	}
	bound := restartGangs / 2 * restartGangSize
	err := wait.PollUntilContextTimeout(e.ctx, 5*time.Second, 10*time.Minute, true, func(ctx context.Context) (bool, error) {
		pods, err := cluster.Client.CoreV1().Pods(e.ns).List(ctx, metav1.ListOptions{
			LabelSelector: "!" + pendingLabel, FieldSelector: "status.phase=Running", ResourceVersion: "0",
		})
		return err == nil && len(pods.Items) == bound, err
	})
	if err != nil {
		e.t.Fatalf("waiting for %d bound pods to run: %v", bound, err)
	}
}

// warmUp runs Muster until it has written the status of every PodGroup,
// as a previous leader would have, and puts back what it bound.
func warmUp(e *env, config string) {
	e.t.Helper()
	s, err := simulator.StartScheduler(e.ctx, kubeconfig, []byte(config))
	if err != nil {
		e.t.Fatal(err)
	}
	err = wait.PollUntilContextTimeout(e.ctx, time.Second, 5*time.Minute, true, func(ctx context.Context) (bool, error) {
		groups, err := cluster.Muster.SchedulingV1alpha1().PodGroups(e.ns).List(ctx, metav1.ListOptions{ResourceVersion: "0"})
		if err != nil {
			// The apiserver is loaded while Muster binds half the
			// cluster: a list may time out. Ask again.
			e.t.Logf("listing PodGroups: %v", err)
			return false, nil
		}
		for _, g := range groups.Items {
			if g.Status.Phase == "" {
				return false, nil
			}
		}
		return true, nil
	})
	s.Stop()
	if err != nil {
		e.t.Fatalf("waiting for Muster to write every PodGroup's status: %v", err)
	}
	resetWaiting(e)
}

// restartPod is member j of gang i, labelled as waiting unless the gang is
// one of the bound half.
func restartPod(e *env, i, j int) *v1.Pod {
	group := fmt.Sprintf("g-%d", i)
	p := e.member(fmt.Sprintf("%s-%d", group, j), "1", map[string]string{v1alpha1.LabelPodGroup: group})
	if i >= restartGangs/2 {
		p.Labels[pendingLabel] = "true"
	}
	return p
}

// firstDecision starts a scheduler with config and returns how long after
// its start the first waiting pod was bound; the scheduler is stopped
// before it returns.
func firstDecision(e *env, config string) time.Duration {
	e.t.Helper()
	list, err := cluster.Client.CoreV1().Pods(e.ns).List(e.ctx, metav1.ListOptions{LabelSelector: pendingLabel, Limit: 1})
	if err != nil {
		e.t.Fatal(err)
	}
	w, err := cluster.Client.CoreV1().Pods(e.ns).Watch(e.ctx, metav1.ListOptions{LabelSelector: pendingLabel, ResourceVersion: list.ResourceVersion})
	if err != nil {
		e.t.Fatal(err)
	}
	defer w.Stop()
	start := time.Now()
	klog.FromContext(e.ctx).Info("Starting a scheduler", "waiting", restartGangs/2*restartGangSize)
	s, err := simulator.StartScheduler(e.ctx, kubeconfig, []byte(config))
	if err != nil {
		e.t.Fatal(err)
	}
	defer s.Stop()
	timeout := time.After(5 * time.Minute)
	for {
		select {
		case ev, ok := <-w.ResultChan():
			if !ok {
				e.t.Fatal("the watch of waiting pods closed")
			}
			if p, isPod := ev.Object.(*v1.Pod); isPod && ev.Type == watch.Modified && p.Spec.NodeName != "" {
				return time.Since(start)
			}
		case <-timeout:
			e.t.Fatal("no waiting pod was bound within 5 minutes of the start")
		}
	}
}

// resetWaiting puts the waiting half back as it was: every gang of which a
// scheduler bound or nominated a member is created afresh, unbound.
func resetWaiting(e *env) {
	e.t.Helper()
	pods, err := cluster.Client.CoreV1().Pods(e.ns).List(e.ctx, metav1.ListOptions{LabelSelector: pendingLabel})
	if err != nil {
		e.t.Fatal(err)
	}
	touched := map[string]bool{}
	for _, p := range pods.Items {
		if p.Spec.NodeName != "" || p.Status.NominatedNodeName != "" {
			touched[p.Labels[v1alpha1.LabelPodGroup]] = true
		}
	}
	g, ctx := errgroup.WithContext(e.ctx)
	g.SetLimit(32)
	for _, p := range pods.Items {
		if !touched[p.Labels[v1alpha1.LabelPodGroup]] {
			continue
		}
		g.Go(func() error {
			err := cluster.Client.CoreV1().Pods(e.ns).Delete(ctx, p.Name, metav1.DeleteOptions{GracePeriodSeconds: new(int64)})
			if err != nil {
				return err
			}
			fresh := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: p.Name, Namespace: p.Namespace, Labels: p.Labels}, Spec: p.Spec}
			fresh.Spec.NodeName = ""
			// The deleted pod may linger a moment: retry only that.
			return wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
				_, err := cluster.Client.CoreV1().Pods(e.ns).Create(ctx, fresh, metav1.CreateOptions{})
				if apierrors.IsAlreadyExists(err) {
					return false, nil
				}
				return err == nil, err
			})
		})
	}
	if err := g.Wait(); err != nil {
		e.t.Fatal(err)
	}
	e.t.Logf("put back %d gangs", len(touched))
}

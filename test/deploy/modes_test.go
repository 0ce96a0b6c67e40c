package deploy

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/klog/v2/ktesting"
	"sigs.k8s.io/yaml"

	"github.com/muster-sched/muster/apis/scheduling/v1alpha1"
	"github.com/muster-sched/muster/pkg/simulator"
)

// TestChartModes installs the chart in each mode (every object applied for
// real), runs the built scheduler as the Deployment's container would — its
// arguments, the ConfigMap's configuration, the chart's ServiceAccount and
// nothing more — and schedules gangs with it: one with a PodGroup, whose
// status the leader-elected controller writes, and one with labels only.
func TestChartModes(t *testing.T) {
	for _, tt := range []struct {
		mode          string
		schedulerName string
		lease         string // namespace/name of the scheduler's Lease
		// schedulerPlugins installs scheduler-plugins' PodGroup CRD with the
		// chart and schedules a gang of such a PodGroup.
		schedulerPlugins bool
	}{
		{"second-scheduler", "muster-scheduler", "muster-second/muster-scheduler", true},
		{"replace-default", "default-scheduler", "kube-system/kube-scheduler", false},
	} {
		t.Run(tt.mode, func(t *testing.T) {
			_, ctx := ktesting.NewTestContext(t)
			ns := "muster-" + strings.Split(tt.mode, "-")[0]
			r := installChart(t, ctx, "muster", ns, "--set", "mode="+tt.mode,
				"--set", fmt.Sprintf("schedulerPlugins.installPodGroupCRD=%t", tt.schedulerPlugins))
			p := startReplica(t, ctx, r, "replica-0")
			if _, err := p.waitLog(ctx, leaseAcquired(tt.lease), 30*time.Second); err != nil {
				t.Fatal(err)
			}
			checkProbes(t, ctx, r, p)
			checkMetrics(t, ctx, r, p)

			w := newWorkload(t, ctx, "work-"+tt.mode, tt.schedulerName, 3, simulator.NodeShape{CPU: "4", Memory: "16Gi"})
			w.createPodGroup("trainer", 3)
			w.create(w.gangPods("trainer", 3, "2", true))
			w.create(w.gangPods("labelled", 4, "1", false))
			if tt.schedulerPlugins {
				w.createSchedulerPluginsPodGroup("legacy", 2)
				pods := w.gangPods("legacy", 2, "1", true)
				for _, p := range pods {
					p.Labels = map[string]string{v1alpha1.SchedulerPluginsLabelPodGroup: "legacy"}
				}
				w.create(pods)
			}
			w.waitAllBound(60 * time.Second)
			waitPodGroupPhase(t, ctx, w.ns, "trainer", v1alpha1.PodGroupRunning)
			if _, err := cluster.Muster.SchedulingV1alpha1().Queues().Get(ctx, "default", metav1.GetOptions{}); err != nil {
				t.Errorf("the queue default: %v", err)
			}
			p.stop()
			if lines := p.forbidden(); len(lines) > 0 {
				t.Errorf("the chart's RBAC refused the scheduler:\n%s", strings.Join(lines, "\n"))
			}
		})
	}
}

// startReplica runs the scheduler as a replica of the release's Deployment:
// its container's arguments, the ConfigMap's
// configuration, authenticated as the release's ServiceAccount.
func startReplica(t *testing.T, ctx context.Context, r *release, name string) *schedulerProcess {
	t.Helper()
	c := r.container(t)
	if !slices.Contains(c.Args, "--config=/etc/muster/config.yaml") {
		t.Fatalf("the container's args %q do not read the mounted ConfigMap", c.Args)
	}
	token := serviceAccountToken(t, ctx, r.namespace, r.fullname())
	kubeconfig := tokenKubeconfig(t, r.namespace+"-"+name+".kubeconfig", token)
	p := startSchedulerProcess(t, name, processSpec{
		args:       c.Args,
		config:     r.schedulerConfig(t),
		kubeconfig: kubeconfig,
	})
	p.credential = "JTI=" + tokenID(t, token)
	return p
}

// checkProbes probes the replica as the kubelet would the Deployment's
// probes: same paths and scheme, no credentials, on the port the container
// serves (the test moves the port; the chart's must be the one it serves).
func checkProbes(t *testing.T, ctx context.Context, r *release, p *schedulerProcess) {
	t.Helper()
	c := r.container(t)
	if len(c.Ports) != 1 || !slices.Contains(c.Args, fmt.Sprintf("--secure-port=%d", c.Ports[0].ContainerPort)) {
		t.Errorf("the container port %+v is not the --secure-port of %q", c.Ports, c.Args)
	}
	for _, probe := range []*v1.Probe{c.StartupProbe, c.LivenessProbe, c.ReadinessProbe} {
		if probe == nil || probe.HTTPGet == nil {
			t.Fatalf("probe %+v is not an HTTP probe", probe)
		}
		if probe.HTTPGet.Scheme != v1.URISchemeHTTPS || probe.HTTPGet.Port.String() != c.Ports[0].Name {
			t.Errorf("probe %+v does not target the secure port %s over HTTPS", probe.HTTPGet, c.Ports[0].Name)
		}
		if err := p.waitHTTP(ctx, probe.HTTPGet.Path, 30*time.Second); err != nil {
			t.Error(err)
		}
	}
}

// checkMetrics scrapes /metrics as Prometheus would, with a token bound to
// the chart's metrics-reader ClusterRole; the scheduler authenticates and
// authorizes it with the apiserver (TokenReview, SubjectAccessReview). An
// anonymous scrape is refused.
func checkMetrics(t *testing.T, ctx context.Context, r *release, p *schedulerProcess) {
	t.Helper()
	token := metricsScraper(t, ctx, r.namespace, r.fullname()+"-metrics-reader")
	code, body, err := p.get(ctx, "/metrics", token)
	if err != nil || code != http.StatusOK || !strings.Contains(body, "scheduler_") {
		t.Errorf("GET /metrics with the reader's token: %d %v %.200q", code, err, body)
	}
	if code, _, err := p.get(ctx, "/metrics", ""); err != nil || code == http.StatusOK {
		t.Errorf("GET /metrics without a token: %d %v, want refused", code, err)
	}
}

func waitPodGroupPhase(t *testing.T, ctx context.Context, ns, name string, phase v1alpha1.PodGroupPhase) {
	t.Helper()
	var got v1alpha1.PodGroupPhase
	err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		pg, err := cluster.Muster.SchedulingV1alpha1().PodGroups(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		got = pg.Status.Phase
		return got == phase, nil
	})
	if err != nil {
		t.Fatalf("PodGroup %s/%s phase %q, want %q: %v", ns, name, got, phase, err)
	}
}

// deleteLeases removes the Leases a scheduler may leave behind (a killed one
// does not release them), so that the next case does not wait them out.
func deleteLeases(namespace string) {
	ctx := context.Background()
	for _, l := range []struct{ ns, name string }{
		{"kube-system", "kube-scheduler"},
		{namespace, "muster-scheduler"},
	} {
		err := cluster.Client.CoordinationV1().Leases(l.ns).Delete(ctx, l.name, metav1.DeleteOptions{})
		if err != nil && !apierrors.IsNotFound(err) {
			fmt.Fprintf(os.Stderr, "deleting lease %s/%s: %v\n", l.ns, l.name, err)
		}
	}
}

// TestKubeadmStaticPod runs the kubeadm static-pod manifest's command with
// its configuration, as kubeadm's user system:kube-scheduler with only the
// roles Kubernetes gives that user plus manifests/kubeadm/rbac.yaml, and
// schedules a gang in replace-default mode. The Pod itself passes the
// apiserver's validation and admission (dry run).
func TestKubeadmStaticPod(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	dir := filepath.Join(repoRoot, "manifests", "kubeadm")
	var pod v1.Pod
	readYAML(t, filepath.Join(dir, "muster-scheduler.yaml"), &pod)
	if _, err := cluster.Client.CoreV1().Pods(pod.Namespace).Create(ctx, &pod, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}}); err != nil {
		t.Fatalf("the static pod does not pass the apiserver: %v", err)
	}
	c := pod.Spec.Containers[0]
	const configPath = "/etc/kubernetes/muster-scheduler-config.yaml"
	if !slices.Contains(c.Command, "--config="+configPath) {
		t.Fatalf("the static pod's command %q does not read %s", c.Command, configPath)
	}
	if !slices.ContainsFunc(pod.Spec.Volumes, func(v v1.Volume) bool { return v.HostPath != nil && v.HostPath.Path == configPath }) {
		t.Errorf("the static pod mounts no %s from the host", configPath)
	}
	rbac, err := os.ReadFile(filepath.Join(dir, "rbac.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	objs, err := decodeObjects(rbac)
	if err != nil {
		t.Fatal(err)
	}
	if err := newApplier(t).apply(ctx, objs, false); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { deleteLeases("kube-system") })
	config, err := os.ReadFile(filepath.Join(dir, "muster-scheduler-config.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var env []string
	for _, e := range c.Env {
		env = append(env, e.Name+"="+e.Value)
	}
	p := startSchedulerProcess(t, "static-pod", processSpec{
		args:       c.Command[1:],
		config:     config,
		kubeconfig: impersonatingKubeconfig(t, "kube-scheduler.kubeconfig", "system:kube-scheduler"),
		env:        env,
	})
	if _, err := p.waitLog(ctx, leaseAcquired("kube-system/kube-scheduler"), 30*time.Second); err != nil {
		t.Fatal(err)
	}
	for _, probe := range []*v1.Probe{c.StartupProbe, c.LivenessProbe, c.ReadinessProbe} {
		if err := p.waitHTTP(ctx, probe.HTTPGet.Path, 30*time.Second); err != nil {
			t.Error(err)
		}
	}
	w := newWorkload(t, ctx, "work-kubeadm", "default-scheduler", 3, simulator.NodeShape{CPU: "4", Memory: "16Gi"})
	w.createPodGroup("trainer", 3)
	w.create(w.gangPods("trainer", 3, "2", true))
	w.waitAllBound(60 * time.Second)
	waitPodGroupPhase(t, ctx, w.ns, "trainer", v1alpha1.PodGroupRunning)
	p.stop()
	if lines := p.forbidden(); len(lines) > 0 {
		t.Errorf("system:kube-scheduler with manifests/kubeadm/rbac.yaml was refused:\n%s", strings.Join(lines, "\n"))
	}
}

func readYAML(t *testing.T, file string, into any) {
	t.Helper()
	data, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.UnmarshalStrict(data, into); err != nil {
		t.Fatalf("%s: %v", file, err)
	}
}

package integration

import (
	"context"
	"fmt"
	"os"
	"sort"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/klog/v2/ktesting"
	"sigs.k8s.io/yaml"

	"github.com/muster-sched/muster/pkg/simulator"
)

// stockConfig is kube-scheduler's default configuration: the profile
// default-scheduler with every default plugin.
const stockConfig = `apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
`

// env is one test case's slice of the shared cluster: a namespace, and the
// cluster's nodes, which the case owns while it runs.
type env struct {
	t   testing.TB
	ctx context.Context
	ns  string
}

// newEnv gives the case a fresh namespace and a cluster with no nodes; at the
// end its pods are removed.
func newEnv(t testing.TB) *env {
	t.Helper()
	_, ctx := ktesting.NewTestContext(t)
	return newEnvContext(t, ctx)
}

// newEnvContext is newEnv logging to ctx's logger rather than the test's.
func newEnvContext(t testing.TB, ctx context.Context) *env {
	t.Helper()
	ctx, cancel := context.WithCancel(ctx)
	t.Cleanup(cancel)
	if err := simulator.DeleteNodes(ctx, cluster.Client); err != nil {
		t.Fatal(err)
	}
	ns, err := cluster.Client.CoreV1().Namespaces().Create(ctx, &v1.Namespace{
		ObjectMeta: metav1.ObjectMeta{GenerateName: "it-"},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	e := &env{t: t, ctx: ctx, ns: ns.Name}
	t.Cleanup(func() {
		// No namespace controller runs: delete the pods themselves, at once.
		_ = cluster.Client.CoreV1().Pods(e.ns).DeleteCollection(context.Background(),
			metav1.DeleteOptions{GracePeriodSeconds: new(int64)}, metav1.ListOptions{})
		// An enqueued Volcano PodGroup holds room in its queue, whose
		// name (cluster-wide) a later case may use again.
		_ = volcanoClient(t).SchedulingV1beta1().PodGroups(e.ns).DeleteCollection(context.Background(),
			metav1.DeleteOptions{}, metav1.ListOptions{})
	})
	return e
}

func (e *env) nodes(prefix string, count int, shape simulator.NodeShape) {
	e.t.Helper()
	if _, err := simulator.CreateNodes(e.ctx, cluster.Client, prefix, count, shape); err != nil {
		e.t.Fatal(err)
	}
}

// startScheduler runs a scheduler with the configuration (YAML) until the
// case ends.
func (e *env) startScheduler(config string) {
	e.t.Helper()
	s, err := simulator.StartScheduler(e.ctx, kubeconfig, []byte(config))
	if err != nil {
		e.t.Fatalf("starting the scheduler: %v", err)
	}
	e.t.Cleanup(s.Stop)
}

func readConfig(t testing.TB, name string) string {
	t.Helper()
	data, err := os.ReadFile("../../config/" + name)
	if err != nil {
		t.Fatal(err)
	}
	return string(data)
}

// pod builds a pod of the case's namespace requesting the given resources.
func (e *env) pod(name string, requests map[v1.ResourceName]string) *v1.Pod {
	req := v1.ResourceList{}
	for r, q := range requests {
		req[r] = resource.MustParse(q)
	}
	return &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: e.ns},
		Spec: v1.PodSpec{
			Containers: []v1.Container{{
				Name: "c", Image: "registry.k8s.io/pause:3.10",
				Resources: v1.ResourceRequirements{Requests: req, Limits: extendedOnly(req)},
			}},
		},
	}
}

// extendedOnly returns the extended resources of req: they must be limited
// to what is requested.
func extendedOnly(req v1.ResourceList) v1.ResourceList {
	out := v1.ResourceList{}
	for r, q := range req {
		if strings.Contains(string(r), "/") {
			out[r] = q
		}
	}
	return out
}

func (e *env) create(pods ...*v1.Pod) {
	e.t.Helper()
	for _, p := range pods {
		if _, err := cluster.Client.CoreV1().Pods(e.ns).Create(e.ctx, p, metav1.CreateOptions{}); err != nil {
			e.t.Fatal(err)
		}
	}
}

// waitBound waits until every named pod is bound and returns pod → node.
func (e *env) waitBound(names ...string) map[string]string {
	e.t.Helper()
	placed := map[string]string{}
	err := wait.PollUntilContextTimeout(e.ctx, 50*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		pods, err := cluster.Client.CoreV1().Pods(e.ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err
		}
		for _, p := range pods.Items {
			if p.Spec.NodeName != "" {
				placed[p.Name] = p.Spec.NodeName
			}
		}
		for _, n := range names {
			if placed[n] == "" {
				return false, nil
			}
		}
		return true, nil
	})
	if err != nil {
		e.t.Fatalf("waiting for pods %v to be bound (bound so far: %v): %v", names, placed, err)
	}
	return placed
}

// distinctNodes returns the sorted set of nodes in placed.
func distinctNodes(placed map[string]string) []string {
	set := map[string]bool{}
	for _, n := range placed {
		set[n] = true
	}
	var out []string
	for n := range set {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

func names(prefix string, n int) []string {
	var out []string
	for i := range n {
		out = append(out, fmt.Sprintf("%s-%d", prefix, i))
	}
	return out
}

// withPluginArgs adds args for the plugin name to every profile of config.
func withPluginArgs(t *testing.T, config, name string, args map[string]any) string {
	t.Helper()
	var cfg map[string]any
	if err := yaml.Unmarshal([]byte(config), &cfg); err != nil {
		t.Fatal(err)
	}
	profiles, _ := cfg["profiles"].([]any)
	for _, p := range profiles {
		prof := p.(map[string]any)
		pc, _ := prof["pluginConfig"].([]any)
		prof["pluginConfig"] = append(pc, map[string]any{"name": name, "args": args})
	}
	data, err := yaml.Marshal(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return string(data)
}

package integration

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/muster-sched/muster/apis/scheduling/v1alpha1"
	"github.com/muster-sched/muster/pkg/inspect"
	"github.com/muster-sched/muster/pkg/simulator"
)

var update = flag.Bool("update", false, "rewrite the golden files under testdata/ (muster explain, muster top)")

// inspectClients connects as `muster explain` does: through a kubeconfig.
func inspectClients(t *testing.T) inspect.Clients {
	t.Helper()
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	return inspect.Clients{Kube: kubernetes.NewForConfigOrDie(cfg), Dynamic: dynamic.NewForConfigOrDie(cfg)}
}

// golden compares got, with the case's generated namespace written
// it-xxxxx (same length: columns stay aligned), with the file
// testdata/name; -update rewrites the file.
func (e *env) golden(name, got string) {
	e.t.Helper()
	got = strings.ReplaceAll(got, e.ns, "it-"+strings.Repeat("x", len(e.ns)-len("it-")))
	file := filepath.Join("testdata", name)
	if *update {
		if err := os.WriteFile(file, []byte(got), 0o644); err != nil {
			e.t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(file)
	if err != nil {
		e.t.Fatalf("%v (run with -update to write it)", err)
	}
	if diff := cmp.Diff(string(want), got); diff != "" {
		e.t.Errorf("%s changed (-want +got; -update rewrites it):\n%s", file, diff)
	}
}

// explain runs `muster explain` and returns its text and JSON.
func (e *env) explain(kind, name string) (text, structured string) {
	e.t.Helper()
	x, err := inspect.Explain(e.ctx, inspectClients(e.t.(*testing.T)), kind, e.ns, name)
	if err != nil {
		e.t.Fatalf("explain %s %s: %v", kind, name, err)
	}
	var out bytes.Buffer
	x.Write(&out)
	data, err := json.MarshalIndent(x, "", "  ")
	if err != nil {
		e.t.Fatal(err)
	}
	return out.String(), string(data) + "\n"
}

// waitPodsWhy waits until every named pod's PodScheduled condition says why
// it waits, and that reason stays for a while (the scheduler retries).
func (e *env) waitPodsWhy(names ...string) {
	e.t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	last, stable := "", time.Time{}
	for time.Now().Before(deadline) {
		var whys []string
		for _, n := range names {
			p, err := cluster.Client.CoreV1().Pods(e.ns).Get(e.ctx, n, metav1.GetOptions{})
			if err != nil {
				e.t.Fatal(err)
			}
			whys = append(whys, inspect.Waiting(p))
		}
		now := strings.Join(whys, "\n")
		if now != last {
			last, stable = now, time.Now()
		} else if !strings.Contains(now, "not tried yet") && time.Since(stable) > settledFor {
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
	e.t.Fatalf("pods %v did not settle on a reason: %s", names, last)
}

func TestExplain(t *testing.T) {
	t.Run("a gang beyond its queue's capability", func(t *testing.T) {
		e := newEnv(t)
		e.nodes("n", 4, simulator.NodeShape{CPU: "8", Memory: "32Gi"})
		e.queue("explain-small", v1alpha1.QueueSpec{Capability: res("cpu", "6")})
		// The queue's gangs are listed from every namespace: leave none behind.
		t.Cleanup(func() {
			_ = cluster.Muster.SchedulingV1alpha1().PodGroups(e.ns).DeleteCollection(context.Background(), metav1.DeleteOptions{}, metav1.ListOptions{})
		})
		e.startScheduler(gangConfig(t))
		e.podGroup("big", v1alpha1.PodGroupSpec{MinMember: 4, Queue: "explain-small"})
		members := e.members("big", 4, "2", map[string]string{v1alpha1.LabelPodGroup: "big"})
		e.waitPodGroup("big", "refused by the queue", func(s *v1alpha1.PodGroupStatus) bool {
			c := scheduledCondition(s)
			return s.Phase == v1alpha1.PodGroupPending && c != nil && strings.HasPrefix(c.Message, "queue explain-small:")
		})
		e.waitPodsWhy(members...)
		text, structured := e.explain("podgroup", "big")
		e.golden("explain-podgroup.txt", text)
		readmeShows(t, "testdata/explain-podgroup.txt")
		e.golden("explain-podgroup.json", structured)
		text, _ = e.explain("pod", "big-0")
		e.golden("explain-pod.txt", text)
		text, _ = e.explain("queue", "explain-small")
		e.golden("explain-queue.txt", text)
		// Shell completion offers the names explain takes.
		for kind, want := range map[string]string{"pod": "big-3", "podgroup": "big", "queue": "explain-small"} {
			names, err := inspect.Names(e.ctx, inspectClients(t), kind, e.ns)
			if err != nil || !slices.Contains(names, want) {
				t.Errorf("completing explain %s: %v, %v; want %s among them", kind, names, err, want)
			}
		}
	})
	t.Run("a label-only gang its queue admits and no node fits", func(t *testing.T) {
		e := newEnv(t)
		e.nodes("n", 3, simulator.NodeShape{CPU: "4", Memory: "16Gi"})
		e.queue("explain-open", v1alpha1.QueueSpec{})
		e.startScheduler(gangConfig(t))
		labels := musterLabels("wide", 2)
		labels[v1alpha1.LabelQueue] = "explain-open"
		members := e.members("wide", 2, "5", labels)
		e.waitPodsWhy(members...)
		text, _ := e.explain("pod", "wide-1")
		e.golden("explain-nodes.txt", text)
	})
	t.Run("a gang no rack fits", func(t *testing.T) {
		e := newEnv(t)
		e.racks(2, 2)
		e.startScheduler(gangConfig(t))
		g := e.topologyGang(musterKind, "wide", 3, v1alpha1.TopologySpec{Required: v1alpha1.LabelRack})
		members := g.members(3, "3")
		e.waitPodsWhy(members...)
		text, _ := e.explain("podgroup", "wide")
		e.golden("explain-topology.txt", text)
	})
	t.Run("a Volcano gang no node fits", func(t *testing.T) {
		k := volcanoKind(t)
		e := newEnv(t)
		e.nodes("n", 3, simulator.NodeShape{CPU: "4", Memory: "16Gi"})
		e.queue("explain-kinds", v1alpha1.QueueSpec{})
		e.startScheduler(k.config(t))
		members := e.gang(k, "vc", v1alpha1.PodGroupSpec{MinMember: 2, Queue: "explain-kinds"}).members(2, "5")
		e.waitPodsWhy(members...)
		text, _ := e.explain("podgroup", "vc")
		e.golden("explain-volcano.txt", text)
	})
	t.Run("a scheduler-plugins gang is found by its PodGroup and its pods", func(t *testing.T) {
		k := schedulerPluginsKind(t)
		e := newEnv(t)
		e.nodes("n", 3, simulator.NodeShape{CPU: "4", Memory: "16Gi"})
		e.startScheduler(k.config(t))
		members := e.gang(k, "sp", v1alpha1.PodGroupSpec{MinMember: 2}).members(2, "5")
		e.waitPodsWhy(members...)
		for _, target := range [][2]string{{"podgroup", "sp"}, {"pod", "sp-1"}} {
			x, err := inspect.Explain(e.ctx, inspectClients(t), target[0], e.ns, target[1])
			if err != nil {
				t.Fatal(err)
			}
			if x.Gang == nil || x.Gang.Kind != "PodGroup.scheduling.x-k8s.io" || len(x.Gang.Members) != 2 || x.Gang.Members[1].State != "waiting" {
				t.Errorf("explain %s %s: gang %+v, want the scheduler-plugins PodGroup sp with 2 waiting members", target[0], target[1], x.Gang)
			}
		}
	})
	t.Run("a gang reclaim took members from", func(t *testing.T) {
		e := newEnv(t)
		e.nodes("n", 1, simulator.NodeShape{CPU: "4", Memory: "16Gi"})
		e.queue("explain-qa", v1alpha1.QueueSpec{Weight: 1})
		e.queue("explain-qb", v1alpha1.QueueSpec{Weight: 1})
		t.Cleanup(func() {
			_ = cluster.Muster.SchedulingV1alpha1().PodGroups(e.ns).DeleteCollection(context.Background(), metav1.DeleteOptions{}, metav1.ListOptions{})
		})
		e.startScheduler(gangConfig(t))
		e.waitBound(e.gangOf("a", "explain-qa", 1, 2, "2", nil)...)
		e.waitBound(e.gangOf("b", "explain-qb", 1, 1, "2", nil)...)
		want := inspect.Eviction{Object: "PodGroup a", Reason: "Reclaimed",
			Message: "evicted 1 pods of " + e.ns + "/a to give queue explain-qb its deserved share (gang " + e.ns + "/b)"}
		var got []inspect.Eviction
		for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
			x, err := inspect.Explain(e.ctx, inspectClients(t), "podgroup", e.ns, "a")
			if err != nil {
				t.Fatal(err)
			}
			if got = x.Evictions; len(got) > 0 {
				break
			}
		}
		if diff := cmp.Diff([]inspect.Eviction{want}, got); diff != "" {
			t.Errorf("explain podgroup a: evictions (-want +got):\n%s", diff)
		}
	})
}

// readmeShows fails when README.md does not quote the golden file: the
// README's example output is a real one.
func readmeShows(t *testing.T, golden string) {
	t.Helper()
	readme, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(readme), string(want)) {
		t.Errorf("README.md does not show %s as it is now: copy it into the README", golden)
	}
}

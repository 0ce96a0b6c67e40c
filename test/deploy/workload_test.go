package deploy

import (
	"context"
	"fmt"
	"sort"
	"strconv"
	"sync"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/tools/cache"

	"github.com/muster-sched/muster/apis/scheduling/v1alpha1"
	"github.com/muster-sched/muster/pkg/simulator"
)

// workload is a namespace of gangs and the nodes they run on. Cases run one
// after another; each deletes every node first and brings its own.
type workload struct {
	t             *testing.T
	ctx           context.Context
	ns            string
	schedulerName string
}

func newWorkload(t *testing.T, ctx context.Context, ns, schedulerName string, nodes int, shape simulator.NodeShape) *workload {
	t.Helper()
	if err := simulator.DeleteNodes(ctx, cluster.Client); err != nil {
		t.Fatal(err)
	}
	createNamespace(t, ctx, ns)
	t.Cleanup(func() {
		// No namespace or garbage collector runs: delete the pods and groups.
		ctx := context.Background()
		_ = cluster.Client.CoreV1().Pods(ns).DeleteCollection(ctx,
			metav1.DeleteOptions{GracePeriodSeconds: new(int64)}, metav1.ListOptions{})
		_ = cluster.Muster.SchedulingV1alpha1().PodGroups(ns).DeleteCollection(ctx, metav1.DeleteOptions{}, metav1.ListOptions{})
		if dyn, err := dynamic.NewForConfig(cluster.JSONConfig()); err == nil {
			_ = dyn.Resource(schedulerPluginsPodGroups).Namespace(ns).DeleteCollection(ctx, metav1.DeleteOptions{}, metav1.ListOptions{})
		}
		deleteUpstreamGroups(ctx, ns)
	})
	if _, err := simulator.CreateNodes(ctx, cluster.Client, ns, nodes, shape); err != nil {
		t.Fatal(err)
	}
	return &workload{t: t, ctx: ctx, ns: ns, schedulerName: schedulerName}
}

// deleteUpstreamGroups deletes the scheduling.k8s.io PodGroups and
// Workloads of ns. Their protection finalizers are removed first: no
// controller runs here that would.
func deleteUpstreamGroups(ctx context.Context, ns string) {
	release := []byte(`{"metadata":{"finalizers":null}}`)
	podGroups := cluster.Client.SchedulingV1beta1().PodGroups(ns)
	if list, err := podGroups.List(ctx, metav1.ListOptions{}); err == nil {
		for _, pg := range list.Items {
			_, _ = podGroups.Patch(ctx, pg.Name, types.MergePatchType, release, metav1.PatchOptions{})
		}
	}
	_ = podGroups.DeleteCollection(ctx, metav1.DeleteOptions{}, metav1.ListOptions{})
	workloads := cluster.Client.SchedulingV1beta1().Workloads(ns)
	if list, err := workloads.List(ctx, metav1.ListOptions{}); err == nil {
		for _, w := range list.Items {
			_, _ = workloads.Patch(ctx, w.Name, types.MergePatchType, release, metav1.PatchOptions{})
		}
	}
	_ = workloads.DeleteCollection(ctx, metav1.DeleteOptions{}, metav1.ListOptions{})
}

// gangPods builds the members of a gang: label-only (min-available) unless
// podGroup is true, when the pods name a PodGroup of the same name.
func (w *workload) gangPods(gang string, size int, cpu string, podGroup bool) []*v1.Pod {
	var pods []*v1.Pod
	for i := range size {
		labels := map[string]string{v1alpha1.LabelPodGroup: gang}
		if !podGroup {
			labels[v1alpha1.LabelMinAvailable] = strconv.Itoa(size)
		}
		pods = append(pods, &v1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("%s-%d", gang, i), Namespace: w.ns, Labels: labels},
			Spec: v1.PodSpec{
				SchedulerName: w.schedulerName,
				Containers: []v1.Container{{
					Name: "c", Image: "registry.k8s.io/pause:3.10",
					Resources: v1.ResourceRequirements{Requests: v1.ResourceList{
						v1.ResourceCPU:    resource.MustParse(cpu),
						v1.ResourceMemory: resource.MustParse("256Mi"),
					}},
				}},
			},
		})
	}
	return pods
}

func (w *workload) create(pods []*v1.Pod) {
	w.t.Helper()
	for _, p := range pods {
		if _, err := cluster.Client.CoreV1().Pods(w.ns).Create(w.ctx, p, metav1.CreateOptions{}); err != nil {
			w.t.Fatal(err)
		}
	}
}

// createPodGroup creates a Muster PodGroup.
func (w *workload) createPodGroup(name string, minMember int32) {
	w.t.Helper()
	_, err := cluster.Muster.SchedulingV1alpha1().PodGroups(w.ns).Create(w.ctx, &v1alpha1.PodGroup{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: w.ns},
		Spec:       v1alpha1.PodGroupSpec{MinMember: minMember},
	}, metav1.CreateOptions{})
	if err != nil {
		w.t.Fatal(err)
	}
}

var schedulerPluginsPodGroups = schema.GroupVersionResource{Group: "scheduling.x-k8s.io", Version: "v1alpha1", Resource: "podgroups"}

// createSchedulerPluginsPodGroup creates a scheduler-plugins PodGroup
// (scheduling.x-k8s.io), whose CRD the chart installs on request.
func (w *workload) createSchedulerPluginsPodGroup(name string, minMember int64) {
	w.t.Helper()
	dyn, err := dynamic.NewForConfig(cluster.JSONConfig())
	if err != nil {
		w.t.Fatal(err)
	}
	pg := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "scheduling.x-k8s.io/v1alpha1",
		"kind":       "PodGroup",
		"metadata":   map[string]any{"name": name, "namespace": w.ns},
		"spec":       map[string]any{"minMember": minMember},
	}}
	if _, err := dyn.Resource(schedulerPluginsPodGroups).Namespace(w.ns).Create(w.ctx, pg, metav1.CreateOptions{}); err != nil {
		w.t.Fatal(err)
	}
}

// boundByGang counts the bound pods of each gang and its size.
func (w *workload) boundByGang() (bound, size map[string]int, err error) {
	pods, err := cluster.Client.CoreV1().Pods(w.ns).List(w.ctx, metav1.ListOptions{})
	if err != nil {
		return nil, nil, err
	}
	bound, size = map[string]int{}, map[string]int{}
	for _, p := range pods.Items {
		g := p.Labels[v1alpha1.LabelPodGroup]
		size[g]++
		if p.Spec.NodeName != "" {
			bound[g]++
		}
	}
	return bound, size, nil
}

// waitAllBound waits until every pod of the namespace is bound.
func (w *workload) waitAllBound(timeout time.Duration) {
	w.t.Helper()
	var bound, size map[string]int
	err := wait.PollUntilContextTimeout(w.ctx, 100*time.Millisecond, timeout, true, func(context.Context) (bool, error) {
		var err error
		if bound, size, err = w.boundByGang(); err != nil {
			return false, err
		}
		for g, n := range size {
			if bound[g] != n {
				return false, nil
			}
		}
		return true, nil
	})
	if err != nil {
		w.t.Fatalf("waiting for every gang to be bound: %v; bound/size per gang: %s", err, describeGangs(bound, size))
	}
}

// partialGangs names the gangs with some members bound and others not.
func partialGangs(bound, size map[string]int) []string {
	var out []string
	for g, n := range size {
		if bound[g] > 0 && bound[g] < n {
			out = append(out, g)
		}
	}
	sort.Strings(out)
	return out
}

func describeGangs(bound, size map[string]int) string {
	var gangs []string
	for g := range size {
		gangs = append(gangs, g)
	}
	sort.Strings(gangs)
	s := ""
	for _, g := range gangs {
		s += fmt.Sprintf(" %s=%d/%d", g, bound[g], size[g])
	}
	return s
}

// bindWatch watches the namespace's pods from before any exists and records
// every node a pod is seen on: a pod whose spec.nodeName changes once set
// was bound twice.
type bindWatch struct {
	mu      sync.Mutex
	nodeOf  map[types.UID]string
	rebinds []string
	bound   map[string]int // per gang
	size    map[string]int // per gang, pods seen
	// notify is closed and replaced on every bind.
	notify chan struct{}
}

func watchBinds(t *testing.T, ctx context.Context, ns string) *bindWatch {
	t.Helper()
	w := &bindWatch{nodeOf: map[types.UID]string{}, bound: map[string]int{}, size: map[string]int{}, notify: make(chan struct{})}
	factory := informers.NewSharedInformerFactoryWithOptions(cluster.Client, 0, informers.WithNamespace(ns))
	inf := factory.Core().V1().Pods().Informer()
	if _, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { w.observe(obj.(*v1.Pod)) },
		UpdateFunc: func(_, obj any) { w.observe(obj.(*v1.Pod)) },
	}); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(ctx)
	t.Cleanup(func() {
		cancel()
		factory.Shutdown()
	})
	factory.Start(ctx.Done())
	if !cache.WaitForCacheSync(ctx.Done(), inf.HasSynced) {
		t.Fatal("pod informer did not sync")
	}
	return w
}

func (w *bindWatch) observe(p *v1.Pod) {
	w.mu.Lock()
	defer w.mu.Unlock()
	gang := p.Labels[v1alpha1.LabelPodGroup]
	prev, seen := w.nodeOf[p.UID]
	if !seen {
		w.size[gang]++
	}
	switch {
	case p.Spec.NodeName == "":
		if prev != "" {
			w.rebinds = append(w.rebinds, fmt.Sprintf("%s lost its node %s", p.Name, prev))
		}
		w.nodeOf[p.UID] = ""
	case prev == "":
		w.nodeOf[p.UID] = p.Spec.NodeName
		w.bound[gang]++
		close(w.notify)
		w.notify = make(chan struct{})
	case prev != p.Spec.NodeName:
		w.rebinds = append(w.rebinds, fmt.Sprintf("%s bound to %s, then to %s", p.Name, prev, p.Spec.NodeName))
	}
}

// waitFor waits until cond holds over the bound and seen counts per gang.
func (w *bindWatch) waitFor(ctx context.Context, timeout time.Duration, cond func(bound, size map[string]int) bool) error {
	deadline := time.After(timeout)
	for {
		w.mu.Lock()
		ok := cond(w.bound, w.size)
		notify := w.notify
		w.mu.Unlock()
		if ok {
			return nil
		}
		select {
		case <-notify:
		case <-deadline:
			return fmt.Errorf("condition not met in %v", timeout)
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// violations returns the pods seen bound twice.
func (w *bindWatch) violations() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([]string(nil), w.rebinds...)
}

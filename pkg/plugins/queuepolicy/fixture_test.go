package queuepolicy

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/informers"
	kubefake "k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2/ktesting"
	fwk "k8s.io/kube-scheduler/framework"
	schedconfig "k8s.io/kubernetes/pkg/scheduler/apis/config"
	schedcache "k8s.io/kubernetes/pkg/scheduler/backend/cache"
	internalqueue "k8s.io/kubernetes/pkg/scheduler/backend/queue"
	"k8s.io/kubernetes/pkg/scheduler/framework/plugins/defaultbinder"
	"k8s.io/kubernetes/pkg/scheduler/framework/plugins/feature"
	"k8s.io/kubernetes/pkg/scheduler/framework/plugins/noderesources"
	"k8s.io/kubernetes/pkg/scheduler/framework/plugins/queuesort"
	frameworkruntime "k8s.io/kubernetes/pkg/scheduler/framework/runtime"
	"k8s.io/kubernetes/pkg/scheduler/metrics"
	st "k8s.io/kubernetes/pkg/scheduler/testing"
	tf "k8s.io/kubernetes/pkg/scheduler/testing/framework"

	configv1 "github.com/muster-sched/muster/apis/config/v1"
	"github.com/muster-sched/muster/apis/scheduling/v1alpha1"
	"github.com/muster-sched/muster/pkg/gang"
	musterfake "github.com/muster-sched/muster/pkg/generated/clientset/versioned/fake"
	musterinformers "github.com/muster-sched/muster/pkg/generated/informers/externalversions"
	"github.com/muster-sched/muster/pkg/placement"
	"github.com/muster-sched/muster/pkg/queue"
)

// testNamespace holds every test gang unless it says otherwise.
const testNamespace = "ns"

// testCluster is what a test's fake apiserver holds.
type testCluster struct {
	nodes  []*v1.Node
	pods   []*v1.Pod
	queues []*v1alpha1.Queue
}

// node is a ready node with cpu cores and plenty of memory.
func node(name, cpu string) *v1.Node {
	return st.MakeNode().Name(name).
		Capacity(map[v1.ResourceName]string{v1.ResourceCPU: cpu, v1.ResourceMemory: "64Gi"}).
		Condition(v1.NodeReady, v1.ConditionTrue, "", "").Obj()
}

// inRack labels n as a node of rack.
func inRack(n *v1.Node, rack string) *v1.Node {
	metav1.SetMetaDataLabel(&n.ObjectMeta, v1alpha1.LabelRack, rack)
	return n
}

// capacityQueue is a top-level Queue for the Capacity policy: deserved and
// guarantee in cpu cores ("" for none).
func capacityQueue(name, deserved, guarantee string) *v1alpha1.Queue {
	q := &v1alpha1.Queue{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: v1alpha1.QueueSpec{Weight: 1}}
	if deserved != "" {
		q.Spec.Deserved = map[v1.ResourceName]resource.Quantity{v1.ResourceCPU: resource.MustParse(deserved)}
	}
	if guarantee != "" {
		q.Spec.Guarantee = map[v1.ResourceName]resource.Quantity{v1.ResourceCPU: resource.MustParse(guarantee)}
	}
	return q
}

// notReclaimable turns reclaim off for q.
func notReclaimable(q *v1alpha1.Queue) *v1alpha1.Queue {
	no := false
	q.Spec.Reclaimable = &no
	return q
}

// withCapability caps q's cpu.
func withCapability(q *v1alpha1.Queue, cpu string) *v1alpha1.Queue {
	q.Spec.Capability = map[v1.ResourceName]resource.Quantity{v1.ResourceCPU: resource.MustParse(cpu)}
	return q
}

// testGang describes a label-defined gang (muster.dev/pod-group and
// muster.dev/min-available) of identical members.
type testGang struct {
	namespace     string // testNamespace when empty
	name, queue   string
	minMember     int
	cpu           string
	priority      int32
	priorityClass string
	// required and preferred are the members' topology annotations.
	required, preferred string
}

// key is the gang's key in the gang state.
func (g testGang) key() gang.Key {
	return gang.Key{Family: gang.FamilyMuster, Namespace: g.ns(), Name: g.name}
}

func (g testGang) ns() string {
	if g.namespace == "" {
		return testNamespace
	}
	return g.namespace
}

// pods makes one member per entry of nodes, named <gang>-<i>, bound to that
// node ("" leaves it pending).
func (g testGang) pods(nodes ...string) []*v1.Pod {
	var out []*v1.Pod
	for i, n := range nodes {
		name := fmt.Sprintf("%s-%d", g.name, i)
		p := st.MakePod().Namespace(g.ns()).Name(name).UID(g.ns()+"/"+name).
			Label(v1alpha1.LabelPodGroup, g.name).
			Label(v1alpha1.LabelMinAvailable, fmt.Sprint(g.minMember)).
			Label(v1alpha1.LabelQueue, g.queue).
			Req(map[v1.ResourceName]string{v1.ResourceCPU: g.cpu}).
			Priority(g.priority).Node(n).Obj()
		p.Spec.PriorityClassName = g.priorityClass
		if g.required != "" {
			metav1.SetMetaDataAnnotation(&p.ObjectMeta, v1alpha1.AnnotationTopologyRequired, g.required)
		}
		if g.preferred != "" {
			metav1.SetMetaDataAnnotation(&p.ObjectMeta, v1alpha1.AnnotationTopologyPreferred, g.preferred)
		}
		if n != "" {
			p.Status.Phase = v1.PodRunning
		}
		out = append(out, p)
	}
	return out
}

// podsOf concatenates gangs' members.
func podsOf(lists ...[]*v1.Pod) []*v1.Pod {
	var out []*v1.Pod
	for _, l := range lists {
		out = append(out, l...)
	}
	return out
}

// newTestPlugin builds a Capacity plugin over fake clientsets holding c:
// the real gang state and queue accounting, fed by informers, and a
// framework whose snapshot holds c's nodes and bound pods, with
// NodeResourcesFit for the trial placements. It returns the plugin and a
// snapshot of the accounting taken once every informer delivered c.
func newTestPlugin(t testing.TB, c testCluster, drfPreemption bool) (context.Context, *Plugin, *queue.Snapshot) {
	t.Helper()
	logger, ctx := ktesting.NewTestContext(t)
	ctx, cancel := context.WithCancel(ctx)
	t.Cleanup(cancel)

	var kubeObjs, musterObjs []runtime.Object
	var bound []*v1.Pod
	usedCPU := int64(0)
	for _, n := range c.nodes {
		kubeObjs = append(kubeObjs, n)
	}
	for _, p := range c.pods {
		kubeObjs = append(kubeObjs, p)
		if p.Spec.NodeName != "" {
			bound = append(bound, p)
			usedCPU += p.Spec.Containers[0].Resources.Requests.Cpu().MilliValue()
		}
	}
	for _, q := range c.queues {
		musterObjs = append(musterObjs, q)
	}
	kube := kubefake.NewClientset(kubeObjs...)
	muster := musterfake.NewSimpleClientset(musterObjs...)

	schedulerInformers := informers.NewSharedInformerFactory(kube, 0)
	gangs, err := gang.NewManager(ctx, gang.Clients{Kube: kube, Muster: muster, Pods: schedulerInformers.Core().V1().Pods().Informer()})
	if err != nil {
		t.Fatal(err)
	}
	schedulerInformers.Start(ctx.Done())
	waitFor(ctx, t, "the gang state to hold every pod", func() bool {
		for _, p := range c.pods {
			key, _ := gang.KeyOf(p)
			if !gangs.HasMember(key, p.UID) {
				return false
			}
		}
		return true
	})

	queueInformers := musterinformers.NewSharedInformerFactory(muster, 0)
	queueLister := queueInformers.Scheduling().V1alpha1().Queues().Lister()
	queueInformer := queueInformers.Scheduling().V1alpha1().Queues().Informer()
	queueInformers.Start(ctx.Done())
	if !cache.WaitForCacheSync(ctx.Done(), queueInformer.HasSynced) {
		t.Fatal("queue informer did not sync")
	}

	metrics.Register() // the scheduling queue, the framework's nominator, records to them
	state, err := queue.NewState(queue.Capacity, queue.DefaultOvercommitFactor, gangs, queueLister, schedulerInformers)
	if err != nil {
		t.Fatal(err)
	}
	fw, err := tf.NewFramework(ctx, []tf.RegisterPluginFunc{
		tf.RegisterQueueSortPlugin(queuesort.Name, queuesort.New),
		tf.RegisterPluginAsExtensions(noderesources.Name, newFit, "PreFilter", "Filter"),
		tf.RegisterBindPlugin(defaultbinder.Name, defaultbinder.New),
	}, "",
		frameworkruntime.WithClientSet(kube),
		frameworkruntime.WithInformerFactory(schedulerInformers),
		frameworkruntime.WithPodNominator(internalqueue.NewSchedulingQueue(nil, schedulerInformers)),
		frameworkruntime.WithSnapshotSharedLister(schedcache.NewSnapshot(bound, c.nodes)),
		frameworkruntime.WithLogger(logger),
	)
	if err != nil {
		t.Fatal(err)
	}
	schedulerInformers.Start(ctx.Done())
	schedulerInformers.WaitForCacheSync(ctx.Done())
	if !cache.WaitForCacheSync(ctx.Done(), gangs.HasSynced) {
		t.Fatal("gang state did not sync")
	}
	state.WaitForNodes(ctx)
	var snap *queue.Snapshot
	waitFor(ctx, t, "the accounting to count every bound pod", func() bool {
		snap = state.Refresh()
		return snap.Used[v1.ResourceCPU] == usedCPU
	})

	pl := &Plugin{
		name: CapacityName, gangs: gangs, state: state, drfPreemption: drfPreemption,
		placer: &placement.Placer{Handle: fw, Framework: fw},
		client: kube,
		pdbs:   func([]*v1.Pod) bool { return false },
		topology: func(s *gang.Status) ([]string, string) {
			return s.Spec.Topology.Levels(configv1.DefaultTopologyLevels())
		},
	}
	pl.records = NewRecords()
	pl.records.gangs, pl.records.handle, pl.records.logger = gangs, fw, logger
	return ctx, pl, snap
}

// newFit is NodeResourcesFit with its default arguments.
func newFit(ctx context.Context, _ runtime.Object, h fwk.Handle) (fwk.Plugin, error) {
	args := &schedconfig.NodeResourcesFitArgs{ScoringStrategy: &schedconfig.ScoringStrategy{
		Type:      schedconfig.LeastAllocated,
		Resources: []schedconfig.ResourceSpec{{Name: "cpu", Weight: 1}, {Name: "memory", Weight: 1}},
	}}
	return noderesources.NewFit(ctx, args, h, feature.Features{})
}

// waitFor polls cond until it holds, failing the test after a while.
func waitFor(ctx context.Context, t testing.TB, what string, cond func() bool) {
	t.Helper()
	err := wait.PollUntilContextTimeout(ctx, 5*time.Millisecond, 30*time.Second, true, func(context.Context) (bool, error) {
		return cond(), nil
	})
	if err != nil {
		t.Fatalf("waiting for %s: %v", what, err)
	}
}

// describeUnits renders units for comparison:
// "reclaim whole ns/x [x-1 x-0] cpu=2".
func describeUnits(us []unit) []string {
	var out []string
	for _, u := range us {
		kind := "extra"
		if u.whole {
			kind = "whole"
		}
		var names []string
		for _, p := range u.pods {
			names = append(names, p.Name)
		}
		out = append(out, fmt.Sprintf("%s %s %s/%s [%s] %s", reasonName[u.reason], kind, u.gang.Namespace, u.gang.Name, strings.Join(names, " "), u.usage))
	}
	return out
}

var reasonName = map[reason]string{reclaim: "reclaim", preempt: "preempt", evenShares: "evenShares"}

// podNamed returns the pod called name among pods.
func podNamed(t *testing.T, pods []*v1.Pod, name string) *v1.Pod {
	t.Helper()
	for _, p := range pods {
		if p.Name == name {
			return p
		}
	}
	t.Fatalf("no pod %s", name)
	return nil
}

package placement

import (
	"context"
	"fmt"
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	clientsetfake "k8s.io/client-go/kubernetes/fake"
	resourceslicetracker "k8s.io/dynamic-resource-allocation/resourceslice/tracker"
	"k8s.io/klog/v2"
	"k8s.io/klog/v2/ktesting"
	configv1 "k8s.io/kube-scheduler/config/v1"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/apis/config"
	configtesting "k8s.io/kubernetes/pkg/scheduler/apis/config/testing"
	internalcache "k8s.io/kubernetes/pkg/scheduler/backend/cache"
	internalqueue "k8s.io/kubernetes/pkg/scheduler/backend/queue"
	"k8s.io/kubernetes/pkg/scheduler/framework"
	plugins "k8s.io/kubernetes/pkg/scheduler/framework/plugins"
	"k8s.io/kubernetes/pkg/scheduler/framework/plugins/defaultbinder"
	"k8s.io/kubernetes/pkg/scheduler/framework/plugins/dynamicresources"
	"k8s.io/kubernetes/pkg/scheduler/framework/plugins/feature"
	"k8s.io/kubernetes/pkg/scheduler/framework/plugins/interpodaffinity"
	"k8s.io/kubernetes/pkg/scheduler/framework/plugins/names"
	"k8s.io/kubernetes/pkg/scheduler/framework/plugins/noderesources"
	"k8s.io/kubernetes/pkg/scheduler/framework/plugins/podtopologyspread"
	"k8s.io/kubernetes/pkg/scheduler/framework/plugins/queuesort"
	"k8s.io/kubernetes/pkg/scheduler/framework/plugins/tainttoleration"
	frameworkruntime "k8s.io/kubernetes/pkg/scheduler/framework/runtime"
	"k8s.io/kubernetes/pkg/scheduler/metrics"
	st "k8s.io/kubernetes/pkg/scheduler/testing"
	tf "k8s.io/kubernetes/pkg/scheduler/testing/framework"
	"k8s.io/kubernetes/pkg/scheduler/util/assumecache"
)

// newScoringPlacer is a Placer with kube-scheduler's resource and taint
// plugins (least allocated, balanced), pod topology spread with no default
// constraints, and inter-pod affinity, on these nodes and running pods.
func newScoringPlacer(t *testing.T, nodes []*v1.Node, running []*v1.Pod) (context.Context, *Placer) {
	t.Helper()
	metrics.Register()
	_, ctx := ktesting.NewTestContext(t)
	resources := []config.ResourceSpec{{Name: "cpu", Weight: 1}, {Name: "memory", Weight: 1}}
	fit := func(ctx context.Context, _ runtime.Object, h fwk.Handle) (fwk.Plugin, error) {
		return noderesources.NewFit(ctx, &config.NodeResourcesFitArgs{ScoringStrategy: &config.ScoringStrategy{Type: config.LeastAllocated, Resources: resources}}, h, feature.Features{})
	}
	balanced := func(ctx context.Context, _ runtime.Object, h fwk.Handle) (fwk.Plugin, error) {
		return noderesources.NewBalancedAllocation(ctx, &config.NodeResourcesBalancedAllocationArgs{Resources: resources}, h, feature.Features{})
	}
	spread := func(ctx context.Context, _ runtime.Object, h fwk.Handle) (fwk.Plugin, error) {
		return podtopologyspread.New(ctx, &config.PodTopologySpreadArgs{DefaultingType: config.ListDefaulting}, h, feature.Features{})
	}
	informerFactory := informers.NewSharedInformerFactory(clientsetfake.NewClientset(), 0)
	fw, err := tf.NewFramework(ctx, []tf.RegisterPluginFunc{
		tf.RegisterQueueSortPlugin(queuesort.Name, queuesort.New),
		tf.RegisterBindPlugin(defaultbinder.Name, defaultbinder.New),
		tf.RegisterPluginAsExtensions(names.NodeResourcesFit, fit, "PreFilter", "Filter", "PreScore", "Score"),
		tf.RegisterPluginAsExtensions(names.NodeResourcesBalancedAllocation, balanced, "PreScore", "Score"),
		tf.RegisterPluginAsExtensions(names.TaintToleration, frameworkruntime.FactoryAdapter(feature.Features{}, tainttoleration.New), "Filter", "PreScore", "Score"),
		tf.RegisterPluginAsExtensions(names.PodTopologySpread, spread, "PreFilter", "Filter", "PreScore", "Score"),
		tf.RegisterPluginAsExtensions(names.InterPodAffinity, frameworkruntime.FactoryAdapter(feature.Features{}, interpodaffinity.New), "PreFilter", "Filter", "PreScore", "Score"),
	}, "",
		frameworkruntime.WithSnapshotSharedLister(internalcache.NewSnapshot(running, nodes)),
		frameworkruntime.WithInformerFactory(informerFactory),
		frameworkruntime.WithPodNominator(internalqueue.NewSchedulingQueue(nil, informerFactory)),
	)
	if err != nil {
		t.Fatal(err)
	}
	informerFactory.Start(ctx.Done())
	informerFactory.WaitForCacheSync(ctx.Done())
	return ctx, &Placer{Handle: fw, Framework: fw}
}

// scoringCluster is six nodes of different sizes, two of them partly used
// and those named tainted PreferNoSchedule, so that every member's best
// node depends on the scores and on the members before it.
func scoringCluster(tainted ...int) ([]*v1.Node, []*v1.Pod) {
	var nodes []*v1.Node
	for i, size := range []string{"4", "8", "16", "6", "12", "10"} {
		n := st.MakeNode().Name(fmt.Sprintf("n-%d", i)).Label(v1.LabelHostname, fmt.Sprintf("n-%d", i)).
			Label("zone", fmt.Sprintf("z-%d", i%2)).
			Capacity(map[v1.ResourceName]string{v1.ResourceCPU: size, v1.ResourceMemory: size + "Gi", v1.ResourcePods: "110"})
		if slices.Contains(tainted, i) {
			n = n.Taints([]v1.Taint{{Key: "slow", Effect: v1.TaintEffectPreferNoSchedule}})
		}
		nodes = append(nodes, n.Obj())
	}
	running := []*v1.Pod{
		st.MakePod().Namespace("ns").Name("r-0").UID("r-0").Node("n-2").Req(map[v1.ResourceName]string{v1.ResourceCPU: "9", v1.ResourceMemory: "2Gi"}).Obj(),
		st.MakePod().Namespace("ns").Name("r-1").UID("r-1").Node("n-5").Req(map[v1.ResourceName]string{v1.ResourceCPU: "1", v1.ResourceMemory: "7Gi"}).Obj(),
	}
	return nodes, running
}

// TestPlaceReusesScores: identical members, whose scores are reused from
// one member to the next, get the plan that members searched for one by
// one get (members that differ in a label share nothing), whether the
// gang fits or not.
func TestPlaceReusesScores(t *testing.T) {
	member := func(i int, cpu, mem string, distinct bool) *v1.Pod {
		p := st.MakePod().Namespace("ns").Name(fmt.Sprintf("m-%d", i)).UID(fmt.Sprintf("m-%d", i)).Label("app", "train").
			Req(map[v1.ResourceName]string{v1.ResourceCPU: cpu, v1.ResourceMemory: mem})
		if distinct {
			p = p.Label("index", fmt.Sprint(i))
		}
		return p.Obj()
	}
	for _, tc := range []struct {
		name     string
		members  int
		cpu, mem string
		tainted  []int
	}{
		{name: "fits, nodes filled unevenly", members: 30, cpu: "1", mem: "512Mi", tainted: []int{4}},
		{name: "fits exactly, every node used up", members: 23, cpu: "2", mem: "1Gi", tainted: []int{4}},
		{name: "does not fit", members: 40, cpu: "1500m", mem: "1Gi", tainted: []int{4}},
		// The untainted nodes win while they fit: members follow one
		// another onto the same node, which is scored again each time.
		{name: "members stacked by taints", members: 30, cpu: "1", mem: "512Mi", tainted: []int{0, 1, 3, 5}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			place := func(distinct bool) (map[types.UID]string, string) {
				nodes, running := scoringCluster(tc.tainted...)
				ctx, pl := newScoringPlacer(t, nodes, running)
				var members []*v1.Pod
				for i := range tc.members {
					members = append(members, member(i, tc.cpu, tc.mem, distinct))
				}
				plan, msg, err := pl.Place(ctx, members, nil, 0, int32(len(members)))
				if err != nil {
					t.Fatal(err)
				}
				return plan, msg
			}
			searched, searchedMsg := place(true)
			reused, reusedMsg := place(false)
			if diff := cmp.Diff(searched, reused); diff != "" {
				t.Errorf("plan with reuse differs from one searched member by member (-searched +reused):\n%s", diff)
			}
			if reusedMsg != searchedMsg {
				t.Errorf("message %q, searched member by member %q", reusedMsg, searchedMsg)
			}
		})
	}
}

// TestReusable: scores are reused only for a pod whose Filter and Score
// plugins all judge a node alone.
func TestReusable(t *testing.T) {
	nodes, running := scoringCluster(4)
	base := func() *st.PodWrapper {
		return st.MakePod().Namespace("ns").Name("m").UID("m").Label("app", "train").Req(map[v1.ResourceName]string{v1.ResourceCPU: "1"})
	}
	for _, tc := range []struct {
		name string
		pod  *v1.Pod
		want bool
	}{
		{name: "requests only", pod: base().Obj(), want: true},
		{name: "topology spread", pod: base().SpreadConstraint(1, "zone", v1.DoNotSchedule, st.MakeLabelSelector().Exists("app").Obj(), nil, nil, nil, nil).Obj()},
		{name: "pod anti-affinity", pod: base().PodAntiAffinityExists("app", "zone", st.PodAntiAffinityWithRequiredReq).Obj()},
		{name: "pod affinity, preferred", pod: base().PodAffinityExists("app", "zone", st.PodAffinityWithPreferredReq).Obj()},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx, pl := newScoringPlacer(t, nodes, running)
			state := framework.NewCycleState()
			if _, s, _ := pl.Framework.RunPreFilterPlugins(ctx, state, tc.pod); !s.IsSuccess() && !s.IsSkip() {
				t.Fatal(s.AsError())
			}
			infos, err := pl.Handle.SnapshotSharedLister().NodeInfos().List()
			if err != nil {
				t.Fatal(err)
			}
			if s := pl.Framework.RunPreScorePlugins(ctx, state, tc.pod, infos); !s.IsSuccess() {
				t.Fatal(s.AsError())
			}
			if got := pl.reusable(state, tc.pod); got != tc.want {
				t.Errorf("reusable = %v, want %v", got, tc.want)
			}
		})
	}
}

// TestDefaultProfileReuses: with kube-scheduler's default profile, a pod
// that asks only for resources has its scores reused; one with a topology
// spread constraint does not.
func TestDefaultProfileReuses(t *testing.T) {
	metrics.Register()
	_, ctx := ktesting.NewTestContext(t)
	cfg := configtesting.V1ToInternalWithDefaults(t, configv1.KubeSchedulerConfiguration{})
	nodes, running := scoringCluster(4)
	client := clientsetfake.NewClientset()
	informerFactory := informers.NewSharedInformerFactory(client, 0)
	slices, err := resourceslicetracker.StartTracker(ctx, resourceslicetracker.Options{SliceInformer: informerFactory.Resource().V1().ResourceSlices(), KubeClient: client})
	if err != nil {
		t.Fatal(err)
	}
	claims := assumecache.NewAssumeCache(klog.FromContext(ctx), informerFactory.Resource().V1().ResourceClaims().Informer(), "ResourceClaim", "", nil)
	fw, err := frameworkruntime.NewFramework(ctx, plugins.NewInTreeRegistry(), &cfg.Profiles[0],
		frameworkruntime.WithClientSet(client),
		frameworkruntime.WithSharedDRAManager(dynamicresources.NewDRAManager(ctx, claims, slices, informerFactory)),
		frameworkruntime.WithSnapshotSharedLister(internalcache.NewSnapshot(running, nodes)),
		frameworkruntime.WithInformerFactory(informerFactory),
		frameworkruntime.WithPodNominator(internalqueue.NewSchedulingQueue(nil, informerFactory)),
	)
	if err != nil {
		t.Fatal(err)
	}
	informerFactory.Start(ctx.Done())
	informerFactory.WaitForCacheSync(ctx.Done())
	pl := &Placer{Handle: fw, Framework: fw}
	base := func() *st.PodWrapper {
		return st.MakePod().Namespace("ns").Name("m").UID("m").Label("app", "train").Req(map[v1.ResourceName]string{v1.ResourceCPU: "1"})
	}
	for _, tc := range []struct {
		name string
		pod  *v1.Pod
		want bool
	}{
		{name: "requests only", pod: base().Obj(), want: true},
		{name: "topology spread", pod: base().SpreadConstraint(1, "zone", v1.DoNotSchedule, st.MakeLabelSelector().Exists("app").Obj(), nil, nil, nil, nil).Obj()},
	} {
		t.Run(tc.name, func(t *testing.T) {
			state := framework.NewCycleState()
			if _, s, _ := fw.RunPreFilterPlugins(ctx, state, tc.pod); !s.IsSuccess() && !s.IsSkip() {
				t.Fatal(s.AsError())
			}
			infos, err := fw.SnapshotSharedLister().NodeInfos().List()
			if err != nil {
				t.Fatal(err)
			}
			if s := fw.RunPreScorePlugins(ctx, state, tc.pod, infos); !s.IsSuccess() {
				t.Fatal(s.AsError())
			}
			if got := pl.reusable(state, tc.pod); got != tc.want {
				t.Errorf("reusable = %v, want %v", got, tc.want)
			}
		})
	}
}

package placement

import (
	"fmt"
	"testing"

	v1 "k8s.io/api/core/v1"
	"k8s.io/client-go/informers"
	clientsetfake "k8s.io/client-go/kubernetes/fake"
	"k8s.io/klog/v2/ktesting"
	internalcache "k8s.io/kubernetes/pkg/scheduler/backend/cache"
	internalqueue "k8s.io/kubernetes/pkg/scheduler/backend/queue"
	"k8s.io/kubernetes/pkg/scheduler/framework/plugins/defaultbinder"
	"k8s.io/kubernetes/pkg/scheduler/framework/plugins/feature"
	"k8s.io/kubernetes/pkg/scheduler/framework/plugins/interpodaffinity"
	"k8s.io/kubernetes/pkg/scheduler/framework/plugins/noderesources"
	"k8s.io/kubernetes/pkg/scheduler/framework/plugins/queuesort"
	frameworkruntime "k8s.io/kubernetes/pkg/scheduler/framework/runtime"
	"k8s.io/kubernetes/pkg/scheduler/metrics"
	st "k8s.io/kubernetes/pkg/scheduler/testing"
	tf "k8s.io/kubernetes/pkg/scheduler/testing/framework"
)

// BenchmarkPlace measures a trial placement of a gang with no claims and
// no volumes (what most gangs are) on 200 nodes: 64 identical members,
// which share one cycle state, and 64 members that differ by an index
// label, which do not.
func BenchmarkPlace(b *testing.B) {
	metrics.Register()
	_, ctx := ktesting.NewTestContext(b)
	var nodes []*v1.Node
	for i := range 200 {
		name := fmt.Sprintf("n-%03d", i)
		nodes = append(nodes, st.MakeNode().Name(name).Label(v1.LabelHostname, name).
			Capacity(map[v1.ResourceName]string{v1.ResourceCPU: "8", v1.ResourceMemory: "32Gi", v1.ResourcePods: "110"}).Obj())
	}
	informerFactory := informers.NewSharedInformerFactory(clientsetfake.NewClientset(), 0)
	fw, err := tf.NewFramework(ctx, []tf.RegisterPluginFunc{
		tf.RegisterQueueSortPlugin(queuesort.Name, queuesort.New),
		tf.RegisterBindPlugin(defaultbinder.Name, defaultbinder.New),
		tf.RegisterPluginAsExtensions(noderesources.Name, frameworkruntime.FactoryAdapter(feature.Features{}, noderesources.NewFit), "PreFilter", "Filter", "PreScore", "Score"),
		tf.RegisterPluginAsExtensions(interpodaffinity.Name, frameworkruntime.FactoryAdapter(feature.Features{}, interpodaffinity.New), "PreFilter", "Filter"),
	}, "",
		frameworkruntime.WithSnapshotSharedLister(internalcache.NewSnapshot(nil, nodes)),
		frameworkruntime.WithInformerFactory(informerFactory),
		frameworkruntime.WithPodNominator(internalqueue.NewSchedulingQueue(nil, informerFactory)),
	)
	if err != nil {
		b.Fatal(err)
	}
	informerFactory.Start(ctx.Done())
	informerFactory.WaitForCacheSync(ctx.Done())
	pl := &Placer{Handle: fw, Framework: fw}
	member := func(i int, indexed bool) *v1.Pod {
		name := fmt.Sprintf("m-%d", i)
		p := st.MakePod().Namespace("ns").Name(name).UID(name).Label("gang", "g").
			Req(map[v1.ResourceName]string{v1.ResourceCPU: "3", v1.ResourceMemory: "1Gi"})
		if indexed {
			p = p.Label("index", fmt.Sprint(i))
		}
		return p.Obj()
	}
	for _, indexed := range []bool{false, true} {
		var members []*v1.Pod
		for i := range 64 {
			members = append(members, member(i, indexed))
		}
		b.Run(fmt.Sprintf("indexed=%t", indexed), func(b *testing.B) {
			for b.Loop() {
				plan, msg, err := pl.Place(ctx, Trial{Members: members, MinMember: 64})
				if err != nil || msg != "" || len(plan) != 64 {
					b.Fatalf("plan of %d members, message %q, error %v", len(plan), msg, err)
				}
			}
		})
	}
}

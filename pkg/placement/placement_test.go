package placement

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	clientsetfake "k8s.io/client-go/kubernetes/fake"
	"k8s.io/klog/v2/ktesting"
	internalcache "k8s.io/kubernetes/pkg/scheduler/backend/cache"
	internalqueue "k8s.io/kubernetes/pkg/scheduler/backend/queue"
	"k8s.io/kubernetes/pkg/scheduler/framework/plugins/defaultbinder"
	"k8s.io/kubernetes/pkg/scheduler/framework/plugins/feature"
	"k8s.io/kubernetes/pkg/scheduler/framework/plugins/interpodaffinity"
	"k8s.io/kubernetes/pkg/scheduler/framework/plugins/queuesort"
	frameworkruntime "k8s.io/kubernetes/pkg/scheduler/framework/runtime"
	"k8s.io/kubernetes/pkg/scheduler/metrics"
	st "k8s.io/kubernetes/pkg/scheduler/testing"
	tf "k8s.io/kubernetes/pkg/scheduler/testing/framework"
)

// TestPlaceSeesPlannedMembers: each member is placed seeing the members
// planned before it, whether it shares the cycle state of the member
// before it (identical members) or starts its own (members that differ),
// or was planned by an earlier step of the plan (planned); a step whose
// budget is used up after its first member places that one alone. With
// no score plugin, ties go to the first node by name: a member that did
// not see the others would be planned onto n-0 with them.
func TestPlaceSeesPlannedMembers(t *testing.T) {
	metrics.Register() // the framework counts its plugins' calls
	// member repels the pods that carry its kind label, per node.
	member := func(kind string, i int) *v1.Pod {
		name := fmt.Sprintf("%s-%d", kind, i)
		return st.MakePod().Namespace("ns").Name(name).UID(name).Label(kind, "").
			PodAntiAffinityExists(kind, v1.LabelHostname, st.PodAntiAffinityWithRequiredReq).Obj()
	}
	tests := []struct {
		name     string
		nodes    int
		members  []*v1.Pod
		planned  []PodOnNode
		budget   time.Duration
		wantPlan map[types.UID]string
		wantMsg  string
	}{
		{
			name:     "identical members, one per node",
			nodes:    3,
			members:  []*v1.Pod{member("a", 0), member("a", 1), member("a", 2)},
			wantPlan: map[types.UID]string{"a-0": "n-0", "a-1": "n-1", "a-2": "n-2"},
		},
		{
			name:    "identical members, more than nodes",
			nodes:   2,
			members: []*v1.Pod{member("a", 0), member("a", 1), member("a", 2)},
			wantMsg: "placeable 2/3: member a-2 fits no node: 2 node(s) didn't match pod anti-affinity rules",
		},
		{
			name:     "two kinds in turn, each repelling its own",
			nodes:    2,
			members:  []*v1.Pod{member("a", 0), member("b", 0), member("a", 1), member("b", 1)},
			wantPlan: map[types.UID]string{"a-0": "n-0", "b-0": "n-0", "a-1": "n-1", "b-1": "n-1"},
		},
		{
			name:     "members planned by an earlier step",
			nodes:    3,
			planned:  []PodOnNode{{Pod: member("a", 0), Node: "n-0"}, {Pod: member("a", 1), Node: "n-1"}},
			members:  []*v1.Pod{member("a", 2)},
			wantPlan: map[types.UID]string{"a-2": "n-2"},
		},
		{
			name:    "members planned by an earlier step fill the nodes",
			nodes:   2,
			planned: []PodOnNode{{Pod: member("a", 0), Node: "n-0"}, {Pod: member("a", 1), Node: "n-1"}},
			members: []*v1.Pod{member("a", 2)},
			wantMsg: "placeable 2/3: member a-2 fits no node: 2 node(s) didn't match pod anti-affinity rules",
		},
		{
			name:     "a budget used up after the first member",
			nodes:    3,
			budget:   time.Nanosecond,
			members:  []*v1.Pod{member("a", 0), member("a", 1), member("a", 2)},
			wantPlan: map[types.UID]string{"a-0": "n-0"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, ctx := ktesting.NewTestContext(t)
			var nodes []*v1.Node
			for i := range tt.nodes {
				name := fmt.Sprintf("n-%d", i)
				nodes = append(nodes, st.MakeNode().Name(name).Label(v1.LabelHostname, name).
					Capacity(map[v1.ResourceName]string{v1.ResourceCPU: "4", v1.ResourcePods: "10"}).Obj())
			}
			informerFactory := informers.NewSharedInformerFactory(clientsetfake.NewClientset(), 0)
			fw, err := tf.NewFramework(ctx, []tf.RegisterPluginFunc{
				tf.RegisterQueueSortPlugin(queuesort.Name, queuesort.New),
				tf.RegisterBindPlugin(defaultbinder.Name, defaultbinder.New),
				tf.RegisterPluginAsExtensions(interpodaffinity.Name, frameworkruntime.FactoryAdapter(feature.Features{}, interpodaffinity.New), "PreFilter", "Filter"),
			}, "",
				frameworkruntime.WithSnapshotSharedLister(internalcache.NewSnapshot(nil, nodes)),
				frameworkruntime.WithInformerFactory(informerFactory),
				frameworkruntime.WithPodNominator(internalqueue.NewSchedulingQueue(nil, informerFactory)),
			)
			if err != nil {
				t.Fatal(err)
			}
			informerFactory.Start(ctx.Done())
			informerFactory.WaitForCacheSync(ctx.Done())

			pl := &Placer{Handle: fw, Framework: fw}
			plan, msg, err := pl.Place(ctx, Trial{
				Members: tt.members, Planned: tt.planned, Budget: tt.budget,
				Placed: int32(len(tt.planned)), MinMember: int32(len(tt.planned) + len(tt.members)),
			})
			if err != nil {
				t.Fatal(err)
			}
			if !strings.HasPrefix(msg, tt.wantMsg) || (msg == "") != (tt.wantMsg == "") {
				t.Errorf("message %q, want %q", msg, tt.wantMsg)
			}
			if diff := cmp.Diff(tt.wantPlan, plan.Nodes()); diff != "" {
				t.Errorf("plan (-want +got):\n%s", diff)
			}
		})
	}
}

func TestSamePreFilter(t *testing.T) {
	base := func() *v1.Pod {
		return st.MakePod().Namespace("ns").Name("a").UID("a").Label("app", "x").Req(map[v1.ResourceName]string{v1.ResourceCPU: "1"}).Obj()
	}
	other := func(change func(*v1.Pod)) *v1.Pod {
		p := base()
		p.Name, p.UID = "b", "b"
		change(p)
		return p
	}
	ephemeral := func(p *v1.Pod) {
		p.Spec.Volumes = []v1.Volume{{Name: "scratch", VolumeSource: v1.VolumeSource{Ephemeral: &v1.EphemeralVolumeSource{}}}}
	}
	claimVolume := func(p *v1.Pod) {
		p.Spec.Volumes = []v1.Volume{{Name: "data", VolumeSource: v1.VolumeSource{
			PersistentVolumeClaim: &v1.PersistentVolumeClaimVolumeSource{ClaimName: "shared"}}}}
	}
	for _, tc := range []struct {
		name string
		a, b *v1.Pod
		want bool
	}{
		{name: "same but for name and UID", a: base(), b: other(func(*v1.Pod) {}), want: true},
		{name: "another label", a: base(), b: other(func(p *v1.Pod) { p.Labels["index"] = "1" })},
		{name: "another namespace", a: base(), b: other(func(p *v1.Pod) { p.Namespace = "other" })},
		{name: "another hostname", a: base(), b: other(func(p *v1.Pod) { p.Spec.Hostname = "b" })},
		{name: "resource claims", a: other(func(p *v1.Pod) { p.Spec.ResourceClaims = []v1.PodResourceClaim{{Name: "gpu"}} }),
			b: other(func(p *v1.Pod) { p.Spec.ResourceClaims = []v1.PodResourceClaim{{Name: "gpu"}} })},
		{name: "generic ephemeral volumes", a: other(ephemeral), b: other(ephemeral)},
		{name: "persistent volume claims", a: other(claimVolume), b: other(claimVolume)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := samePreFilter(tc.a, tc.b); got != tc.want {
				t.Errorf("samePreFilter = %v, want %v", got, tc.want)
			}
		})
	}
}

package gangscheduling

import (
	"context"
	"fmt"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/informers"
	kubefake "k8s.io/client-go/kubernetes/fake"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2/ktesting"
	"k8s.io/kubernetes/pkg/scheduler/backend/heap"
	"k8s.io/kubernetes/pkg/scheduler/framework"
	st "k8s.io/kubernetes/pkg/scheduler/testing"

	"github.com/muster-sched/muster/apis/scheduling/v1alpha1"
	"github.com/muster-sched/muster/pkg/gang"
	musterfake "github.com/muster-sched/muster/pkg/generated/clientset/versioned/fake"
	musterinformers "github.com/muster-sched/muster/pkg/generated/informers/externalversions"
	"github.com/muster-sched/muster/pkg/queue"
)

// TestLessKeptOrdersAgree checks that what Less keeps between comparisons
// never changes its answer: a plugin that keeps entries and one that reads
// the gang state afresh order every pair of pending pods alike, after each
// change that moves the order — a reservation, a plan made, expired and
// dropped, a node added, a member bound, a pod deleted, and the entries'
// rotation. After each, Less is also checked to be a strict order over
// every triple of pending pods.
func TestLessKeptOrdersAgree(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	created := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	var objs []runtime.Object
	for i := range 4 {
		objs = append(objs, st.MakeNode().Name(fmt.Sprintf("n%d", i)).
			Capacity(map[v1.ResourceName]string{v1.ResourceCPU: "8", v1.ResourceMemory: "32Gi"}).
			Condition(v1.NodeReady, v1.ConditionTrue, "", "").Obj())
	}
	member := func(name, group, minAvailable, q, cpu, node string, prio int32, createdAfter time.Duration) *v1.Pod {
		w := st.MakePod().Namespace("ns").Name(name).UID("uid-" + name).Priority(prio).Node(node).
			Req(map[v1.ResourceName]string{v1.ResourceCPU: cpu})
		if group != "" {
			w = w.Label(v1alpha1.LabelPodGroup, group).Label(v1alpha1.LabelMinAvailable, minAvailable)
		}
		if q != "" {
			w = w.Label(v1alpha1.LabelQueue, q)
		}
		p := w.Obj()
		p.ResourceVersion = "1"
		p.CreationTimestamp = metav1.NewTime(created.Add(createdAfter))
		if node != "" {
			p.Status.Phase = v1.PodRunning
		}
		return p
	}
	pods := []*v1.Pod{
		member("a1-0", "a1", "2", "team-a", "1", "n0", 0, 0),
		member("a1-1", "a1", "2", "team-a", "1", "", 0, 0),
		member("a1-2", "a1", "2", "team-a", "1", "", 0, 0),
		member("a2-0", "a2", "1", "team-a", "2", "", 0, time.Second),
		member("a2-1", "a2", "1", "team-a", "2", "", 0, time.Second),
		member("b1-0", "b1", "3", "team-b", "1", "n1", 0, 2*time.Second),
		member("b1-1", "b1", "3", "team-b", "1", "n1", 0, 2*time.Second),
		member("b1-2", "b1", "3", "team-b", "1", "", 0, 2*time.Second),
		member("b2-0", "b2", "2", "team-b", "1", "", 0, time.Second),
		member("b2-1", "b2", "2", "team-b", "1", "", 0, time.Second),
		member("b2-2", "b2", "2", "team-b", "1", "", 0, time.Second),
		member("b3-0", "b3", "1", "team-b", "4", "", 1, 3*time.Second),
		member("s1", "", "", "team-a", "1", "", 0, 0),
		member("s2", "", "", "team-b", "3", "", 0, 4*time.Second),
		member("web", "", "", "", "1", "", 0, time.Second),
	}
	for _, p := range pods {
		objs = append(objs, p)
	}
	kube, manager, state, podLister := orderFixture(ctx, t, objs, 32_000)
	now := created.Add(time.Hour)
	clock := func() time.Time { return now }
	queues := func() *queue.State { return state }
	kept := &Plugin{manager: manager, queues: queues, now: clock, orders: newOrders()}
	fresh := &Plugin{manager: manager, queues: queues, now: clock}

	check := func(step string) {
		t.Helper()
		list, err := podLister.List(labels.Everything())
		if err != nil {
			t.Fatal(err)
		}
		var infos []*framework.QueuedPodInfo
		for i, p := range list {
			if p.Spec.NodeName != "" {
				continue
			}
			pi, err := framework.NewPodInfo(p)
			if err != nil {
				t.Fatal(err)
			}
			infos = append(infos, &framework.QueuedPodInfo{PodInfo: pi, QueueingParams: framework.QueueingParams{Timestamp: now.Add(time.Duration(i%3) * time.Second)}})
		}
		before := 0
		// Twice: the second pass reads the entries the first one kept.
		for range 2 {
			for _, a := range infos {
				for _, b := range infos {
					got, want := kept.Less(a, b), fresh.Less(a, b)
					if got != want {
						t.Errorf("%s: Less(%s, %s) = %v with kept entries, %v read afresh", step, a.Pod.Name, b.Pod.Name, got, want)
					}
					if want {
						before++
					}
				}
			}
		}
		if pairs := 2 * len(infos) * (len(infos) - 1) / 2; before != pairs {
			t.Errorf("%s: %d of %d pairs ordered one way: Less is not a strict order over the pending pods", step, before, pairs)
		}
		// The heap needs a transitive order: a before b before c puts a
		// before c, in every triple.
		less := make([][]bool, len(infos))
		for i, a := range infos {
			less[i] = make([]bool, len(infos))
			for j, b := range infos {
				less[i][j] = fresh.Less(a, b)
			}
		}
		for i := range infos {
			for j := range infos {
				for k := range infos {
					if less[i][j] && less[j][k] && !less[i][k] {
						t.Errorf("%s: %s before %s before %s, but not %s before %s", step,
							infos[i].Pod.Name, infos[j].Pod.Name, infos[k].Pod.Name, infos[i].Pod.Name, infos[k].Pod.Name)
					}
				}
			}
		}
	}
	key := func(name string) gang.Key { return gang.Key{Family: gang.FamilyMuster, Namespace: "ns", Name: name} }
	bind := func(name, node string) {
		t.Helper()
		p, err := kube.CoreV1().Pods("ns").Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		p.Spec.NodeName, p.Status.Phase, p.ResourceVersion = node, v1.PodRunning, "2"
		if _, err := kube.CoreV1().Pods("ns").Update(ctx, p, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
	}

	state.Refresh()
	check("start")

	manager.Reserve(key("a2"), "uid-a2-0", "n1", time.Now())
	state.Refresh()
	check("a2-0 reserved")

	queued := func(name string) *framework.QueuedPodInfo {
		t.Helper()
		p, err := podLister.Pods("ns").Get(name)
		if err != nil {
			t.Fatal(err)
		}
		pi, err := framework.NewPodInfo(p)
		if err != nil {
			t.Fatal(err)
		}
		return &framework.QueuedPodInfo{PodInfo: pi, QueueingParams: framework.QueueingParams{Timestamp: now}}
	}
	before := func(step, first string, then ...string) {
		t.Helper()
		for _, other := range then {
			if !kept.Less(queued(first), queued(other)) || kept.Less(queued(other), queued(first)) {
				t.Errorf("%s: %s does not go before %s", step, first, other)
			}
		}
	}
	// A pod in no gang goes before the members of every gang of its
	// priority, older gangs too.
	before("start", "web", "a1-1", "a2-0", "b2-0", "s1")

	manager.SetPlan(key("b2"), map[types.UID]string{"uid-b2-0": "n2", "uid-b2-1": "n2", "uid-b2-2": "n3"}, nil, nil, now)
	check("b2 placing")
	// A gang being placed goes before other gangs of its priority, older
	// ones and gangs of one too; a pod in no gang still goes before it.
	before("b2 placing", "b2-0", "a1-1", "a2-0", "s1", "s2")
	before("b2 placing", "web", "b2-0")

	now = now.Add(gang.PlanTTL + time.Second)
	check("b2's plan expired")
	kept.orders.compared = ordersRotation - 1
	check("entries rotated")

	manager.SetPlan(key("a1"), map[types.UID]string{"uid-a1-1": "n2", "uid-a1-2": "n2"}, nil, nil, now)
	check("a1 placing")
	manager.DropPlan(key("a1"))
	check("a1's plan dropped")

	if _, err := kube.CoreV1().Nodes().Create(ctx, st.MakeNode().Name("n4").
		Capacity(map[v1.ResourceName]string{v1.ResourceCPU: "16", v1.ResourceMemory: "32Gi"}).
		Condition(v1.NodeReady, v1.ConditionTrue, "", "").Obj(), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitUntil(ctx, t, "the accounting to see n4", func() bool {
		return state.Refresh().Allocatable[v1.ResourceCPU] == 48_000
	})
	check("n4 added")

	bind("b2-0", "n2")
	waitUntil(ctx, t, "the gang state to see b2-0 bound", func() bool { return manager.Status(key("b2")).Placed == 1 })
	state.Refresh()
	check("b2-0 bound")

	manager.Unreserve(key("a2"), "uid-a2-0")
	state.Refresh()
	check("a2-0 unreserved")

	if err := kube.CoreV1().Pods("ns").Delete(ctx, "s2", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	waitUntil(ctx, t, "the informer to drop s2", func() bool {
		_, err := podLister.Pods("ns").Get("s2")
		return err != nil
	})
	state.Refresh()
	check("s2 deleted")
}

// orderFixture is the gang state and Proportion accounting over a fake
// clientset holding objs and two queues, team-a (weight 1) and team-b
// (weight 2), once the accounting sees cpu millicores of nodes.
func orderFixture(ctx context.Context, t testing.TB, objs []runtime.Object, cpu int64) (*kubefake.Clientset, *gang.Manager, *queue.State, corelisters.PodLister) {
	t.Helper()
	ctx, cancel := context.WithCancel(ctx)
	t.Cleanup(cancel)
	kube := kubefake.NewClientset(objs...)
	muster := musterfake.NewSimpleClientset(
		&v1alpha1.Queue{ObjectMeta: metav1.ObjectMeta{Name: "team-a"}, Spec: v1alpha1.QueueSpec{Weight: 1}},
		&v1alpha1.Queue{ObjectMeta: metav1.ObjectMeta{Name: "team-b"}, Spec: v1alpha1.QueueSpec{Weight: 2}},
	)
	factory := informers.NewSharedInformerFactory(kube, 0)
	podLister := factory.Core().V1().Pods().Lister()
	manager, err := gang.NewManager(ctx, gang.Clients{Kube: kube, Muster: muster, Pods: factory.Core().V1().Pods().Informer()})
	if err != nil {
		t.Fatal(err)
	}
	queueFactory := musterinformers.NewSharedInformerFactory(muster, 0)
	queueLister := queueFactory.Scheduling().V1alpha1().Queues().Lister()
	queueFactory.Start(ctx.Done())
	factory.Start(ctx.Done())
	if !cache.WaitForCacheSync(ctx.Done(), queueFactory.Scheduling().V1alpha1().Queues().Informer().HasSynced, manager.HasSynced) {
		t.Fatal("informers did not sync")
	}
	state, err := queue.NewState(queue.Proportion, queue.DefaultOvercommitFactor, manager, queueLister, factory)
	if err != nil {
		t.Fatal(err)
	}
	factory.Start(ctx.Done()) // the nodes' informer, which the accounting asked for
	waitUntil(ctx, t, "the accounting to see the nodes", func() bool {
		return state.Refresh().Allocatable[v1.ResourceCPU] == cpu
	})
	return kube, manager, state, podLister
}

func waitUntil(ctx context.Context, t testing.TB, what string, cond func() bool) {
	t.Helper()
	err := wait.PollUntilContextTimeout(ctx, 2*time.Millisecond, 30*time.Second, true, func(context.Context) (bool, error) {
		return cond(), nil
	})
	if err != nil {
		t.Fatalf("waiting for %s: %v", what, err)
	}
}

// BenchmarkLessPop is one pop from the scheduling queue on a busy cluster,
// followed by what a scheduling cycle changes before the next pop: 100
// nodes of 32 cpu, 3000 gangs of one pod of one cpu in two queues, the
// even ones bound; the 1500 pending pods in a heap ordered by Less. The
// popped pod is reserved and the accounting refreshed (the same in both
// cases, ≈ 10 µs). kept: Less keeps its entries; afresh: it reads the gang
// state for every comparison.
func BenchmarkLessPop(b *testing.B) {
	_, ctx := ktesting.NewTestContext(b)
	var objs []runtime.Object
	for i := range 100 {
		objs = append(objs, st.MakeNode().Name(fmt.Sprintf("n%d", i)).
			Capacity(map[v1.ResourceName]string{v1.ResourceCPU: "32", v1.ResourceMemory: "128Gi"}).
			Condition(v1.NodeReady, v1.ConditionTrue, "", "").Obj())
	}
	created := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	var pending []*v1.Pod
	for i := range 3000 {
		name := fmt.Sprintf("g%d", i)
		w := st.MakePod().Namespace("ns").Name(name).UID("uid-"+name).
			Label(v1alpha1.LabelPodGroup, name).Label(v1alpha1.LabelMinAvailable, "1").
			Label(v1alpha1.LabelQueue, []string{"team-a", "team-b"}[i%2]).
			Req(map[v1.ResourceName]string{v1.ResourceCPU: "1"})
		if i%2 == 0 {
			w = w.Node(fmt.Sprintf("n%d", i%100))
		}
		p := w.Obj()
		p.ResourceVersion = "1"
		p.CreationTimestamp = metav1.NewTime(created.Add(time.Duration(i) * time.Millisecond))
		if p.Spec.NodeName == "" {
			pending = append(pending, p)
		}
		objs = append(objs, p)
	}
	_, manager, state, _ := orderFixture(ctx, b, objs, 3_200_000)
	queues := func() *queue.State { return state }
	for _, tc := range []struct {
		name   string
		orders *orders
	}{{"kept", newOrders()}, {"afresh", nil}} {
		b.Run(tc.name, func(b *testing.B) {
			pl := &Plugin{manager: manager, queues: queues, now: time.Now, orders: tc.orders}
			// kube-scheduler's heap, as its active queue builds it.
			h := heap.New(func(p *framework.QueuedPodInfo) string { return string(p.Pod.UID) },
				func(a, b *framework.QueuedPodInfo) bool { return pl.Less(a, b) })
			fill := func() {
				for _, p := range pending {
					key, _ := gang.KeyOf(p)
					manager.Unreserve(key, p.UID)
				}
				state.Refresh()
				for _, p := range pending {
					pi, _ := framework.NewPodInfo(p)
					h.AddOrUpdate(&framework.QueuedPodInfo{PodInfo: pi, QueueingParams: framework.QueueingParams{Timestamp: created}})
				}
			}
			fill()
			for b.Loop() {
				if h.Len() == 0 {
					b.StopTimer()
					fill()
					b.StartTimer()
				}
				info, err := h.Pop()
				if err != nil {
					b.Fatal(err)
				}
				key, _ := gang.KeyOf(info.Pod)
				manager.Reserve(key, info.Pod.UID, "n0", time.Now())
				state.Refresh()
			}
		})
	}
}

package queue

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/informers"
	kubefake "k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2/ktesting"
	st "k8s.io/kubernetes/pkg/scheduler/testing"

	"github.com/muster-sched/muster/apis/scheduling/v1alpha1"
	"github.com/muster-sched/muster/pkg/gang"
	musterfake "github.com/muster-sched/muster/pkg/generated/clientset/versioned/fake"
	musterinformers "github.com/muster-sched/muster/pkg/generated/informers/externalversions"
	musterlisters "github.com/muster-sched/muster/pkg/generated/listers/scheduling/v1alpha1"
)

// lifecycleFixture is a State over fake clientsets: the real gang state
// and the Queue lister, fed by informers.
type lifecycleFixture struct {
	ctx    context.Context
	state  *State
	muster *musterfake.Clientset
	queues musterlisters.QueueLister
}

// newLifecycleFixture builds a Proportion State over one node of 8 cpu,
// the queues and the pods.
func newLifecycleFixture(t *testing.T, queues []*v1alpha1.Queue, pods []*v1.Pod) *lifecycleFixture {
	t.Helper()
	return newFixture(t, []*v1.Node{readyNode("n", "8")}, queues, pods)
}

// readyNode is a ready node of cpu and 64Gi.
func readyNode(name, cpu string) *v1.Node {
	return st.MakeNode().Name(name).
		Capacity(map[v1.ResourceName]string{v1.ResourceCPU: cpu, v1.ResourceMemory: "64Gi"}).
		Condition(v1.NodeReady, v1.ConditionTrue, "", "").Obj()
}

// newFixture builds a Proportion State over the nodes, the queues and the
// pods, once every informer delivered them.
func newFixture(t testing.TB, nodes []*v1.Node, queues []*v1alpha1.Queue, pods []*v1.Pod) *lifecycleFixture {
	t.Helper()
	_, ctx := ktesting.NewTestContext(t)
	ctx, cancel := context.WithCancel(ctx)
	t.Cleanup(cancel)
	var kubeObjs []runtime.Object
	for _, n := range nodes {
		kubeObjs = append(kubeObjs, n)
	}
	for _, p := range pods {
		kubeObjs = append(kubeObjs, p)
	}
	var musterObjs []runtime.Object
	for _, q := range queues {
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
	poll(ctx, t, "the gang state to hold every pod", func() bool {
		for _, p := range pods {
			key, managed := gang.KeyOf(p)
			if managed && !gangs.HasMember(key, p.UID) {
				return false
			}
		}
		return true
	})
	queueInformers := musterinformers.NewSharedInformerFactory(muster, 0)
	lister := queueInformers.Scheduling().V1alpha1().Queues().Lister()
	informer := queueInformers.Scheduling().V1alpha1().Queues().Informer()
	queueInformers.Start(ctx.Done())
	if !cache.WaitForCacheSync(ctx.Done(), informer.HasSynced) {
		t.Fatal("queue informer did not sync")
	}
	state, err := NewState(Proportion, DefaultOvercommitFactor, gangs, lister, schedulerInformers)
	if err != nil {
		t.Fatal(err)
	}
	schedulerInformers.Start(ctx.Done())
	schedulerInformers.WaitForCacheSync(ctx.Done())
	if !cache.WaitForCacheSync(ctx.Done(), gangs.HasSynced) {
		t.Fatal("gang state did not sync")
	}
	state.WaitForNodes(ctx)
	return &lifecycleFixture{ctx: ctx, state: state, muster: muster, queues: lister}
}

// deleteQueue deletes a Queue and waits until the lister no longer has it.
func (f *lifecycleFixture) deleteQueue(t *testing.T, name string) {
	t.Helper()
	if err := f.muster.SchedulingV1alpha1().Queues().Delete(f.ctx, name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	poll(f.ctx, t, "queue "+name+" to leave the lister", func() bool {
		_, err := f.queues.Get(name)
		return apierrors.IsNotFound(err)
	})
}

// createQueue creates a Queue and waits until the lister has it.
func (f *lifecycleFixture) createQueue(t *testing.T, q *v1alpha1.Queue) {
	t.Helper()
	if _, err := f.muster.SchedulingV1alpha1().Queues().Create(f.ctx, q, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	poll(f.ctx, t, "queue "+q.Name+" to reach the lister", func() bool {
		_, err := f.queues.Get(q.Name)
		return err == nil
	})
}

func poll(ctx context.Context, t testing.TB, what string, cond func() bool) {
	t.Helper()
	err := wait.PollUntilContextTimeout(ctx, 5*time.Millisecond, 30*time.Second, true, func(context.Context) (bool, error) {
		return cond(), nil
	})
	if err != nil {
		t.Fatalf("waiting for %s: %v", what, err)
	}
}

// labelGang makes the members of a label-defined gang of 1-cpu pods in
// queue, one per entry of nodes ("" leaves it pending).
func labelGang(name, queue string, minMember int, nodes ...string) []*v1.Pod {
	var out []*v1.Pod
	for i, n := range nodes {
		p := st.MakePod().Namespace("ns").Name(fmt.Sprintf("%s-%d", name, i)).UID("ns/"+name+fmt.Sprint(i)).
			Label(v1alpha1.LabelPodGroup, name).
			Label(v1alpha1.LabelMinAvailable, fmt.Sprint(minMember)).
			Label(v1alpha1.LabelQueue, queue).
			Req(map[v1.ResourceName]string{v1.ResourceCPU: "1"}).Node(n).Obj()
		if n != "" {
			p.Status.Phase = v1.PodRunning
		}
		out = append(out, p)
	}
	return out
}

// TestQueueDeletedUnderRunningWork deletes the Queue of a running gang
// and of an admitted one that has not started, then creates it again. The
// running gang is accounted in, and limited by, the default queue while
// its Queue is gone, and moves back after; the other is refused.
func TestQueueDeletedUnderRunningWork(t *testing.T) {
	q1 := &v1alpha1.Queue{ObjectMeta: metav1.ObjectMeta{Name: "q1", UID: "q1"}, Spec: v1alpha1.QueueSpec{Weight: 1}}
	q2 := &v1alpha1.Queue{ObjectMeta: metav1.ObjectMeta{Name: "q2", UID: "q2"}, Spec: v1alpha1.QueueSpec{Weight: 1}}
	var pods []*v1.Pod
	pods = append(pods, labelGang("running", "q1", 2, "n", "n")...)
	pods = append(pods, labelGang("waiting", "q1", 2, "", "")...)
	pods = append(pods, labelGang("other", "q2", 1, "n")...)
	f := newLifecycleFixture(t, []*v1alpha1.Queue{q1, q2}, pods)
	key := func(name string) gang.Key { return gang.Key{Family: gang.FamilyMuster, Namespace: "ns", Name: name} }
	poll(f.ctx, t, "the accounting to count every bound pod", func() bool {
		return f.state.Refresh().Used[v1.ResourceCPU] == 3000
	})

	tests := []struct {
		name string
		do   func(t *testing.T)
		// wantQueue is each gang's Gang.Queue; wantAllocated the queues'
		// allocated (those left out have none; a queue with no figures is
		// "missing").
		wantQueue     map[string]string
		wantAllocated map[string]string
		// wantAdmit is Admit's refusal of the waiting gang, "" for none.
		wantAdmit string
		// wantExtraFits says whether one more cpu of the running gang fits
		// the ceiling of the queue that limits it.
		wantExtraFits bool
	}{
		{
			name:          "both queues exist",
			do:            func(*testing.T) {},
			wantQueue:     map[string]string{"running": "q1", "waiting": "q1", "other": "q2"},
			wantAllocated: map[string]string{"q1": "cpu=2", "q2": "cpu=1", "default": ""},
			wantExtraFits: true, // q1 deserves what its gangs ask: 4
		},
		{
			name:          "q1 deleted: the running gang moves to default, the waiting one is refused",
			do:            func(t *testing.T) { f.deleteQueue(t, "q1") },
			wantQueue:     map[string]string{"running": "default", "waiting": "q1", "other": "q2"},
			wantAllocated: map[string]string{"q1": "missing", "q2": "cpu=1", "default": "cpu=2"},
			wantAdmit:     "queue q1 does not exist",
			// default deserves what its gangs ask, 2, all of it held.
			wantExtraFits: false,
		},
		{
			name:          "q1 created again: the running gang moves back",
			do:            func(t *testing.T) { f.createQueue(t, q1) },
			wantQueue:     map[string]string{"running": "q1", "waiting": "q1", "other": "q2"},
			wantAllocated: map[string]string{"q1": "cpu=2", "q2": "cpu=1", "default": ""},
			wantExtraFits: true,
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			tc.do(t)
			snap := f.state.Refresh()
			gotQueue := map[string]string{}
			for name := range tc.wantQueue {
				if g := snap.Gang(key(name)); g != nil {
					gotQueue[name] = g.Queue
				}
			}
			if diff := cmp.Diff(tc.wantQueue, gotQueue); diff != "" {
				t.Errorf("gangs' queues (-want,+got):\n%s", diff)
			}
			gotAllocated := map[string]string{}
			for name := range tc.wantAllocated {
				gotAllocated[name] = "missing"
				if q := snap.Queues[name]; q != nil {
					gotAllocated[name] = onlyNonZero(q.Allocated).String()
				}
			}
			if diff := cmp.Diff(tc.wantAllocated, gotAllocated); diff != "" {
				t.Errorf("queues' allocated (-want,+got):\n%s", diff)
			}
			waiting := f.state.gangs.Status(key("waiting"))
			ok, why := f.state.Admit(&waiting, snap)
			if ok != (tc.wantAdmit == "") || why != tc.wantAdmit {
				t.Errorf("Admit(waiting) = %v, %q; want refusal %q", ok, why, tc.wantAdmit)
			}
			if g := snap.Gang(key("running")); g != nil {
				if ok, why := snap.FitsCeiling(g.Queue, cpu(1)); ok != tc.wantExtraFits {
					t.Errorf("one more cpu of the running gang fits queue %s: %v (%s), want %v", g.Queue, ok, why, tc.wantExtraFits)
				}
			}
		})
	}
}

package gangscheduling

import (
	"context"
	"fmt"
	"sort"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	corev1helpers "k8s.io/component-helpers/scheduling/corev1"
	"k8s.io/klog/v2/ktesting"
	fwk "k8s.io/kube-scheduler/framework"

	"k8s.io/kubernetes/pkg/scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework/plugins/queuesort"
	st "k8s.io/kubernetes/pkg/scheduler/testing"

	"github.com/muster-sched/muster/apis/scheduling/v1alpha1"
	"github.com/muster-sched/muster/pkg/gang"
)

// TestLessUnmanagedIsPrioritySort checks that pods in no gang are ordered
// exactly as kube-scheduler's PrioritySort orders them.
func TestLessUnmanagedIsPrioritySort(t *testing.T) {
	now := time.Now()
	var infos []*framework.QueuedPodInfo
	for i := range 12 {
		p := st.MakePod().Name(fmt.Sprintf("p%d", i)).Priority(int32(i % 3)).Obj()
		pi, err := framework.NewPodInfo(p)
		if err != nil {
			t.Fatal(err)
		}
		infos = append(infos, &framework.QueuedPodInfo{PodInfo: pi, QueueingParams: framework.QueueingParams{Timestamp: now.Add(time.Duration(i%4) * time.Second)}})
	}
	stock := &queuesort.PrioritySort{}
	pl := &Plugin{}
	for _, a := range infos {
		for _, b := range infos {
			if got, want := pl.Less(a, b), stock.Less(a, b); got != want {
				t.Errorf("Less(%s, %s) = %v, PrioritySort says %v", a.Pod.Name, b.Pod.Name, got, want)
			}
		}
	}
}

// TestLessSameGangFollowsMemberOrder checks that the members of one gang
// are ordered as the gang state ranks them (creation, then name), not by
// the time each was queued: a member's projected share counts the members
// ranked ahead of it, so any other order would change the projections of
// members already in the scheduling queue (TestDRF's one-in-six race).
func TestLessSameGangFollowsMemberOrder(t *testing.T) {
	created := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	queued := time.Now()
	member := func(name string, createdAfter, queuedAfter time.Duration, prio int32) *framework.QueuedPodInfo {
		p := st.MakePod().Namespace("ns").Name(name).Label(v1alpha1.LabelPodGroup, "job").Priority(prio).Obj()
		p.CreationTimestamp = metav1.NewTime(created.Add(createdAfter))
		pi, err := framework.NewPodInfo(p)
		if err != nil {
			t.Fatal(err)
		}
		return &framework.QueuedPodInfo{PodInfo: pi, QueueingParams: framework.QueueingParams{Timestamp: queued.Add(queuedAfter)}}
	}
	tests := []struct {
		name string
		a, b *framework.QueuedPodInfo
		want bool
	}{
		{"same second, by name though queued later", member("job-10", 0, time.Second, 0), member("job-2", 0, 0, 0), true},
		{"same second, by name", member("job-2", 0, 0, 0), member("job-10", 0, time.Second, 0), false},
		{"older first though queued later", member("job-b", 0, time.Second, 0), member("job-a", time.Second, 0, 0), true},
		{"priority first", member("job-b", time.Second, 0, 1), member("job-a", 0, 0, 0), true},
	}
	pl := &Plugin{}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := pl.Less(tc.a, tc.b); got != tc.want {
				t.Errorf("Less(%s, %s) = %v, want %v", tc.a.Pod.Name, tc.b.Pod.Name, got, tc.want)
			}
			pending := []*v1.Pod{tc.b.Pod, tc.a.Pod}
			sort.Slice(pending, func(i, j int) bool { return gang.MemberBefore(pending[i], pending[j]) })
			if corev1helpers.PodPriority(tc.a.Pod) == corev1helpers.PodPriority(tc.b.Pod) && (pending[0] == tc.a.Pod) != tc.want {
				t.Errorf("Less disagrees with the gang's member order %s, %s", pending[0].Name, pending[1].Name)
			}
		})
	}
}

// TestPreEnqueueUnmanagedIsNotHeld checks that a pod in no gang and no queue
// passes PreEnqueue without consulting the batch state: it is never held
// back while the gang state takes in its first list (a nil batch would
// panic if it were consulted).
func TestPreEnqueueUnmanagedIsNotHeld(t *testing.T) {
	pl := &Plugin{}
	pod := st.MakePod().Namespace("ns").Name("web").Label("app", "web").Obj()
	if s := pl.PreEnqueue(context.Background(), pod); !s.IsSuccess() {
		t.Errorf("PreEnqueue(unmanaged pod) = %v, want success", s)
	}
}

// TestSignPod: pods in no gang are signed (kube-scheduler may batch them)
// unless a plan promises room, members never are.
func TestSignPod(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	_, manager, _, _ := orderFixture(ctx, t, nil, 0)
	member := st.MakePod().Namespace("ns").Name("m").UID("m").Labels(map[string]string{v1alpha1.LabelPodGroup: "g", v1alpha1.LabelMinAvailable: "2"}).Obj()
	tests := []struct {
		name       string
		pod        *v1.Pod
		promise    bool
		wantSigned bool
	}{
		{name: "in no gang", pod: st.MakePod().Name("web").Obj(), wantSigned: true},
		{name: "a member", pod: member},
		{name: "a queue's", pod: st.MakePod().Name("q").Labels(map[string]string{v1alpha1.LabelQueue: "team"}).Obj()},
		{name: "in no gang, while a plan promises room", pod: st.MakePod().Name("web").Obj(), promise: true},
	}
	pl := &Plugin{manager: manager}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if tt.promise {
				key, _, _ := manager.Observe(member)
				manager.SetPlan(key, map[types.UID]string{member.UID: "n1"}, nil, nil, time.Now())
				t.Cleanup(func() { manager.DropPlan(key) })
			}
			fragments, status := pl.SignPod(context.Background(), tt.pod)
			if got := status.IsSuccess(); got != tt.wantSigned {
				t.Fatalf("SignPod status %v, want signed %v", status, tt.wantSigned)
			}
			if len(fragments) != 0 {
				t.Errorf("SignPod fragments %v, want none: Gang's PreFilter reads nothing of a pod it skips", fragments)
			}
		})
	}
}

// TestFilterKeepsOffPromisedRoom: while gang g's plan promises two members
// 2 cpu each on n1 (8 cpu, 1 in use), a pod in no gang and a member of
// another gang fit n1 only where the promised room leaves theirs; g's own
// members do not count g's promises; once the plan is dropped, nothing is
// kept.
func TestFilterKeepsOffPromisedRoom(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	_, manager, _, _ := orderFixture(ctx, t, nil, 0)
	now := time.Now()
	member := func(name, group, cpu string) *v1.Pod {
		return st.MakePod().Namespace("ns").Name(name).UID(name).Req(map[v1.ResourceName]string{v1.ResourceCPU: cpu}).
			Labels(map[string]string{v1alpha1.LabelPodGroup: group, v1alpha1.LabelMinAvailable: "2"}).Obj()
	}
	g0, g1 := member("g-0", "g", "2"), member("g-1", "g", "2")
	key, _, _ := manager.Observe(g0)
	manager.Observe(g1)
	node := st.MakeNode().Name("n1").Capacity(map[v1.ResourceName]string{v1.ResourceCPU: "8", v1.ResourcePods: "10"}).Obj()
	n := framework.NewNodeInfo(st.MakePod().Name("running").Node("n1").Req(map[v1.ResourceName]string{v1.ResourceCPU: "1"}).Obj())
	n.SetNode(node)
	pl := &Plugin{manager: manager, now: func() time.Time { return now }}
	plain := func(cpu string) *v1.Pod {
		return st.MakePod().Namespace("ns").Name("web-" + cpu).Req(map[v1.ResourceName]string{v1.ResourceCPU: cpu}).Obj()
	}
	tests := []struct {
		name    string
		pod     *v1.Pod
		planned bool
		want    fwk.Code
	}{
		{name: "in no gang, nothing promised", pod: plain("7"), want: fwk.Success},
		{name: "in no gang, beside the promise", pod: plain("3"), planned: true, want: fwk.Success},
		{name: "in no gang, on promised room", pod: plain("4"), planned: true, want: fwk.Unschedulable},
		{name: "another gang's member, on promised room", pod: member("h-0", "h", "4"), planned: true, want: fwk.Unschedulable},
		{name: "the gang's own member", pod: member("g-2", "g", "7"), planned: true, want: fwk.Success},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if tt.planned {
				manager.SetPlan(key, map[types.UID]string{g0.UID: "n1", g1.UID: "n1"}, nil, nil, now)
				t.Cleanup(func() { manager.DropPlan(key) })
			}
			podKey, _ := pl.keyOf(tt.pod)
			state := framework.NewCycleState()
			pl.readPromises(state, tt.pod, podKey, now) // PreFilter's part
			if got := pl.Filter(ctx, state, tt.pod, n).Code(); got != tt.want {
				t.Errorf("Filter = %v, want %v", got, tt.want)
			}
		})
	}
}

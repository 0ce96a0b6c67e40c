package gang

import (
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	kubefake "k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2/ktesting"
	st "k8s.io/kubernetes/pkg/scheduler/testing"

	"github.com/muster-sched/muster/apis/scheduling/v1alpha1"
	musterfake "github.com/muster-sched/muster/pkg/generated/clientset/versioned/fake"
)

// seen records the pod events a handler was told of, as "add ns/name" etc.
type seen struct {
	mu     sync.Mutex
	events []string
}

func (s *seen) record(verb string, obj any) {
	if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = d.Obj
	}
	p := obj.(*v1.Pod)
	s.mu.Lock()
	defer s.mu.Unlock()
	s.events = append(s.events, verb+" "+p.Namespace+"/"+p.Name)
}

func (s *seen) handler() cache.ResourceEventHandler {
	return cache.ResourceEventHandlerFuncs{
		AddFunc:    func(o any) { s.record("add", o) },
		UpdateFunc: func(_, o any) { s.record("update", o) },
		DeleteFunc: func(o any) { s.record("delete", o) },
	}
}

func (s *seen) waitFor(t *testing.T, n int) []string {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		s.mu.Lock()
		got := slices.Clone(s.events)
		s.mu.Unlock()
		if len(got) >= n || time.Now().After(deadline) {
			return got
		}
		time.Sleep(time.Millisecond)
	}
}

// TestAddPodHandler checks that a handler added to the gang state is told
// of the pods the scheduler's informer holds already, managed or not, and
// then of every event, after the gang state took it in.
func TestAddPodHandler(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	member := st.MakePod().Namespace("ns").Name("member").UID("member").Label(v1alpha1.LabelQueue, "q").Obj()
	plain := st.MakePod().Namespace("ns").Name("plain").UID("plain").Obj()
	kube := kubefake.NewClientset(member, plain)
	factory := informers.NewSharedInformerFactory(kube, 0)
	m, err := NewManager(ctx, Clients{Kube: kube, Muster: musterfake.NewSimpleClientset(), Pods: factory.Core().V1().Pods().Informer()})
	if err != nil {
		t.Fatal(err)
	}
	factory.Start(ctx.Done())
	if !cache.WaitForCacheSync(ctx.Done(), m.HasSynced) {
		t.Fatal("the gang state did not take in the first list")
	}

	var s seen
	m.AddPodHandler(s.handler())
	if diff := cmp.Diff([]string{"add ns/member", "add ns/plain"}, sorted(s.waitFor(t, 2))); diff != "" {
		t.Fatalf("events of the pods held already (-want +got):\n%s", diff)
	}

	later := st.MakePod().Namespace("ns").Name("later").UID("later").Label(v1alpha1.LabelQueue, "q").Obj()
	if _, err := kube.CoreV1().Pods("ns").Create(ctx, later, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	got := s.waitFor(t, 3)
	if diff := cmp.Diff("add ns/later", got[len(got)-1]); diff != "" {
		t.Fatalf("last event (-want +got):\n%s", diff)
	}
	if !m.HasMember(Key{FamilySolo, "ns", "later"}, "later") {
		t.Error("the handler was told of a pod before the gang state took it in")
	}
	bound := later.DeepCopy()
	bound.Spec.NodeName = "n1"
	if _, err := kube.CoreV1().Pods("ns").Update(ctx, bound, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := kube.CoreV1().Pods("ns").Delete(ctx, "plain", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"update ns/later", "delete ns/plain"}, s.waitFor(t, 5)[3:]); diff != "" {
		t.Errorf("events after the pods held already (-want +got):\n%s", diff)
	}
}

func sorted(s []string) []string {
	slices.Sort(s)
	return s
}

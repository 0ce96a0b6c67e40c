package batch

import (
	"fmt"
	"maps"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	"k8s.io/client-go/informers"
	kubefake "k8s.io/client-go/kubernetes/fake"
	"k8s.io/klog/v2"
	"k8s.io/klog/v2/ktesting"
	"k8s.io/kubernetes/pkg/scheduler/framework/plugins/defaultbinder"
	"k8s.io/kubernetes/pkg/scheduler/framework/plugins/queuesort"
	frameworkruntime "k8s.io/kubernetes/pkg/scheduler/framework/runtime"
	st "k8s.io/kubernetes/pkg/scheduler/testing"
	tf "k8s.io/kubernetes/pkg/scheduler/testing/framework"

	"github.com/muster-sched/muster/apis/scheduling/v1alpha1"
	"github.com/muster-sched/muster/pkg/gang"
	musterfake "github.com/muster-sched/muster/pkg/generated/clientset/versioned/fake"
)

// activations records what the framework's pod activator (the scheduling
// queue) is asked to activate.
type activations struct {
	mu   sync.Mutex
	pods map[string]*v1.Pod
	got  chan struct{}
}

func (a *activations) Activate(_ klog.Logger, pods map[string]*v1.Pod) {
	a.mu.Lock()
	defer a.mu.Unlock()
	maps.Copy(a.pods, pods)
	select {
	case a.got <- struct{}{}:
	default:
	}
}

func (a *activations) names() []string {
	a.mu.Lock()
	defer a.mu.Unlock()
	return slices.Sorted(maps.Keys(a.pods))
}

// TestHoldUntilFirstList checks that PreEnqueue's Hold keeps managed pods
// back while the gang state has not taken in the scheduler's first list of
// pods, activates them all once it has, and holds nothing after.
func TestHoldUntilFirstList(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	solo := st.MakePod().Namespace("ns").Name("solo").UID("solo").Label(v1alpha1.LabelQueue, "team-a").Obj()
	member := st.MakePod().Namespace("ns").Name("job-0").UID("job-0").Label(v1alpha1.LabelPodGroup, "job").Label(v1alpha1.LabelMinAvailable, "1").Obj()
	later := st.MakePod().Namespace("ns").Name("later").UID("later").Label(v1alpha1.LabelQueue, "team-a").Obj()
	kube := kubefake.NewClientset(solo, member)
	factory := informers.NewSharedInformerFactory(kube, 0)
	gangs, err := gang.NewManager(ctx, gang.Clients{Kube: kube, Muster: musterfake.NewSimpleClientset(), Pods: factory.Core().V1().Pods().Informer()})
	if err != nil {
		t.Fatal(err)
	}
	activated := &activations{pods: map[string]*v1.Pod{}, got: make(chan struct{}, 1)}
	fw, err := tf.NewFramework(ctx, []tf.RegisterPluginFunc{
		tf.RegisterQueueSortPlugin(queuesort.Name, queuesort.New),
		tf.RegisterBindPlugin(defaultbinder.Name, defaultbinder.New),
	}, "", frameworkruntime.WithClientSet(kube), frameworkruntime.WithInformerFactory(factory), frameworkruntime.WithPodActivator(activated))
	if err != nil {
		t.Fatal(err)
	}
	b := &Batch{Gangs: gangs, handle: fw, queuesOn: make(chan struct{}), stop: ctx.Done(), held: map[string]*v1.Pod{}}

	// The scheduler's pod informer is not started: its first list has not
	// reached the gang state. More pods than one activation takes at once
	// are held (the informer need not know them for that).
	held := []*v1.Pod{solo, member}
	want := []string{"ns/job-0", "ns/solo"}
	for i := range 2*activateChunk + 1 {
		name := fmt.Sprintf("extra-%03d", i)
		held = append(held, st.MakePod().Namespace("ns").Name(name).UID(name).Label(v1alpha1.LabelQueue, "team-a").Obj())
		want = append(want, "ns/"+name)
	}
	slices.Sort(want)
	for _, p := range held {
		if !b.Hold(ctx, p) {
			t.Fatalf("Hold(%s) = false before the gang state took in the first list, want true", p.Name)
		}
	}
	time.Sleep(50 * time.Millisecond) // start polls every 2 ms
	if got := activated.names(); len(got) != 0 {
		t.Fatalf("activated %v before the gang state took in the first list", got)
	}

	factory.Start(ctx.Done())
	select {
	case <-activated.got:
	case <-time.After(15 * time.Second):
		t.Fatal("the held pods were not activated once the gang state took in the first list")
	}
	// Activated in chunks: wait for the last.
	deadline := time.Now().Add(15 * time.Second)
	for len(activated.names()) < len(want) && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	if diff := cmp.Diff(want, activated.names()); diff != "" {
		t.Errorf("activated pods (-want +got):\n%s", diff)
	}
	if b.Hold(ctx, later) {
		t.Error("Hold(later) = true after the start, want false")
	}
}

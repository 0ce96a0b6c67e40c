package gangscheduling

import (
	"context"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/client-go/informers"
	clientsetfake "k8s.io/client-go/kubernetes/fake"
	"k8s.io/klog/v2/ktesting"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework/plugins/defaultbinder"
	"k8s.io/kubernetes/pkg/scheduler/framework/plugins/queuesort"
	frameworkruntime "k8s.io/kubernetes/pkg/scheduler/framework/runtime"
	"k8s.io/kubernetes/pkg/scheduler/metrics"
	st "k8s.io/kubernetes/pkg/scheduler/testing"
	tf "k8s.io/kubernetes/pkg/scheduler/testing/framework"

	"github.com/muster-sched/muster/apis/scheduling/v1alpha1"
	"github.com/muster-sched/muster/pkg/batch"
)

// TestBindingSlots: a member that waits at Permit for its gang takes the
// process's API-write slot at PreBindPreFlight (kube-scheduler then writes
// its nomination), keeps it through PreBind and gives it back at PostBind
// or Unreserve. With NominatedNodeNameForExpectation off, PreBindPreFlight
// does not run and PreBind takes the slot itself. A pod that does not
// wait, a gang of one, a pod in no gang and a member nominated to the node
// already write nothing before they bind and take no slot. A member whose
// node the informer saw deleted fails there, taking no slot.
func TestBindingSlots(t *testing.T) {
	metrics.Register() // RunPermitPlugins observes the scheduler's metrics
	_, ctx := ktesting.NewTestContext(t)
	_, manager, _, _ := orderFixture(ctx, t, nil, 0)
	// The node informer knows n1; "gone" was deleted.
	informerFactory := informers.NewSharedInformerFactory(clientsetfake.NewClientset(), 0)
	if err := informerFactory.Core().V1().Nodes().Informer().GetStore().Add(st.MakeNode().Name("n1").Obj()); err != nil {
		t.Fatal(err)
	}
	fw, err := tf.NewFramework(ctx, []tf.RegisterPluginFunc{
		tf.RegisterQueueSortPlugin(queuesort.Name, queuesort.New),
		tf.RegisterBindPlugin(defaultbinder.Name, defaultbinder.New),
		tf.RegisterPermitPlugin("FakePermit", tf.NewFakePermitPlugin(fwk.NewStatus(fwk.Wait), time.Minute)),
	}, "default-scheduler", frameworkruntime.WithWaitingPods(frameworkruntime.NewWaitingPodsMap()),
		frameworkruntime.WithInformerFactory(informerFactory))
	if err != nil {
		t.Fatal(err)
	}
	pod := func(name string, labels map[string]string) *v1.Pod {
		return st.MakePod().Namespace("ns").Name(name).UID(name).Labels(labels).Obj()
	}
	inGang := func(group, min string) map[string]string {
		return map[string]string{v1alpha1.LabelPodGroup: group, v1alpha1.LabelMinAvailable: min}
	}
	const node = "n1"
	type step int
	const (
		preFlight step = iota
		preBind
		postBind
		unreserve
	)
	tests := []struct {
		name      string
		pod       *v1.Pod
		node      string // "": n1
		nominated string // the pod's NominatedNodeName
		waiting   bool   // it waits at Permit
		steps     []step
		// want is, after each step, whether the pod holds the slot.
		want                       []bool
		wantPreFlight, wantPreBind fwk.Code
	}{
		{name: "a member waiting for its gang, bound", pod: pod("a-0", inGang("a", "2")), waiting: true,
			steps: []step{preFlight, preBind, postBind}, want: []bool{true, true, false}},
		{name: "a member waiting for its gang, unreserved", pod: pod("b-0", inGang("b", "2")), waiting: true,
			steps: []step{preFlight, unreserve}, want: []bool{true, false}},
		{name: "the gate off: PreBind alone", pod: pod("c-0", inGang("c", "2")), waiting: true,
			steps: []step{preBind, postBind}, want: []bool{true, false}},
		{name: "a member nominated to the node already", pod: pod("d-0", inGang("d", "2")), nominated: node, waiting: true,
			steps: []step{preFlight}, want: []bool{false}},
		{name: "a member that does not wait", pod: pod("e-0", inGang("e", "2")),
			steps: []step{preFlight}, want: []bool{false}, wantPreFlight: fwk.Skip},
		{name: "a gang of one", pod: pod("f-0", inGang("f", "1")), waiting: true,
			steps: []step{preFlight, preBind}, want: []bool{false, false}, wantPreFlight: fwk.Skip},
		{name: "a pod in no gang", pod: pod("web", nil), waiting: true,
			steps: []step{preFlight, preBind}, want: []bool{false, false}, wantPreFlight: fwk.Skip},
		// The snapshot a plan was made on may hold a node the informer saw
		// deleted: the member does not bind there.
		{name: "a member whose node was deleted", pod: pod("g-0", inGang("g", "2")), node: "gone",
			steps: []step{preFlight}, want: []bool{false}, wantPreFlight: fwk.Unschedulable},
		{name: "a member whose node was deleted, the gate off", pod: pod("h-0", inGang("h", "2")), node: "gone", waiting: true,
			steps: []step{preBind}, want: []bool{false}, wantPreBind: fwk.Unschedulable},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			node := node
			if tt.node != "" {
				node = tt.node
			}
			binds := batch.NewBinds(1)
			pl := &Plugin{manager: manager, handle: fw, binds: binds}
			tt.pod.Status.NominatedNodeName = tt.nominated
			manager.Observe(tt.pod)
			state := framework.NewCycleState()
			if tt.waiting {
				waits, s := fw.RunPermitPlugins(ctx, state, tt.pod, node)
				if s.Code() != fwk.Wait {
					t.Fatalf("Permit = %v, want Wait", s)
				}
				fw.AddWaitingPod(tt.pod, waits) // as schedulingCycle does
				t.Cleanup(func() { fw.RejectWaitingPod(tt.pod.UID) })
			}
			for i, s := range tt.steps {
				switch s {
				case preFlight:
					if _, st := pl.PreBindPreFlight(ctx, state, tt.pod, node); st.Code() != tt.wantPreFlight {
						t.Fatalf("PreBindPreFlight = %v, want %v", st, tt.wantPreFlight)
					}
				case preBind:
					if st := pl.PreBind(ctx, state, tt.pod, node); st.Code() != tt.wantPreBind {
						t.Fatalf("PreBind = %v, want %v", st, tt.wantPreBind)
					}
				case postBind:
					pl.PostBind(ctx, state, tt.pod, node)
				case unreserve:
					pl.Unreserve(ctx, state, tt.pod, node)
				}
				if got := !slotFree(ctx, binds); got != tt.want[i] {
					t.Errorf("after step %d: holds the slot = %v, want %v", i, got, tt.want[i])
				}
			}
		})
	}
}

// slotFree reports whether a probe can take binds' one slot; it gives it
// back at once.
func slotFree(ctx context.Context, binds *batch.Binds) bool {
	ctx, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
	defer cancel()
	if err := binds.Binding(ctx, "probe"); err != nil {
		return false
	}
	binds.Release("probe")
	return true
}

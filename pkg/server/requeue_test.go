package server

import (
	"context"
	"fmt"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/klog/v2"
	"k8s.io/klog/v2/ktesting"
	fwk "k8s.io/kube-scheduler/framework"
	internalqueue "k8s.io/kubernetes/pkg/scheduler/backend/queue"
	"k8s.io/kubernetes/pkg/scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/metrics"
	"k8s.io/utils/ptr"
)

// requeueRace fails a binding cycle as kube-scheduler does while the
// scheduling loop waits in Pop, tries times, and returns the index of the
// first pod that was not popped again within a second, or -1.
func requeueRace(t *testing.T, guarded bool, group *v1.PodSchedulingGroup, tries int) int {
	metrics.Register()
	logger, ctx := ktesting.NewTestContext(t)
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	q := internalqueue.NewTestQueue(ctx, func(a, b fwk.QueuedEntityInfo) bool { return false })
	var queue internalqueue.SchedulingQueue = q
	defer queue.Close()
	pods := map[types.UID]*v1.Pod{}
	if guarded {
		queue = &requeueGuard{
			SchedulingQueue: q,
			assumed:         func(*v1.Pod) bool { return false },
			latest:          func(p *v1.Pod) *v1.Pod { return pods[p.UID] },
		}
	}
	popped := make(chan *v1.Pod)
	go func() {
		for {
			e, err := queue.Pop(klog.Background())
			if err != nil || e == nil {
				return
			}
			popped <- e.(*framework.QueuedPodInfo).Pod
		}
	}()
	for i := range tries {
		pod := &v1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("p-%d", i), Namespace: "ns", UID: types.UID(fmt.Sprintf("uid-%d", i))},
			Spec:       v1.PodSpec{SchedulingGroup: group},
		}
		pods[pod.UID] = pod
		queue.Add(ctx, pod)
		pInfo := &framework.QueuedPodInfo{PodInfo: &framework.PodInfo{Pod: (<-popped)}}
		// The gang plugin activates its members when it releases them:
		// the event makes the queue requeue the pod at once.
		queue.Activate(logger, map[string]*v1.Pod{pod.Name: pod})
		time.Sleep(100 * time.Microsecond) // the loop waits in Pop again
		pInfo.UnschedulablePlugins = sets.New("Gang")
		if err := queue.AddUnschedulablePodIfNotPresent(logger, pInfo, queue.SchedulingCycle()); err != nil {
			t.Fatal(err)
		}
		select {
		case got := <-popped:
			queue.Done(got.UID)
		case <-time.After(time.Second):
			return i
		}
	}
	return -1
}

func TestRequeueGuard(t *testing.T) {
	const tries = 1000
	for _, tc := range []struct {
		name  string
		group *v1.PodSchedulingGroup
	}{
		{name: "plain pod"},
		// With GenericWorkload off (its default) the queue takes members
		// of upstream PodGroups as plain pods, and drops them alike.
		{name: "upstream PodGroup member, gate off", group: &v1.PodSchedulingGroup{PodGroupName: ptr.To("pg")}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if i := requeueRace(t, true, tc.group, tries); i >= 0 {
				t.Errorf("the queue lost pod %d of %d, requeued by a failed binding cycle", i, tries)
			}
		})
	}
}

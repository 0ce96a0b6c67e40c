package integration

import (
	"context"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	vcv1beta1 "volcano.sh/apis/pkg/apis/scheduling/v1beta1"
	vcclient "volcano.sh/apis/pkg/client/clientset/versioned"

	"github.com/muster-sched/muster/apis/scheduling/v1alpha1"
)

// The kinds of Queue a gang may name: Muster's, and Volcano's, which are
// queues of the same meaning. Queue tests run once per kind.
const (
	musterQueue  = "muster"
	volcanoQueue = "volcano"
)

var queueKinds = []string{musterQueue, volcanoQueue}

// volcanoClient is a client of the integration control plane's Volcano CRDs.
func volcanoClient(t testing.TB) vcclient.Interface {
	t.Helper()
	c, err := vcclient.NewForConfig(cluster.JSONConfig())
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// queueOf creates a Queue of that kind with what spec says, deleted at the
// end of the case. A Volcano Queue has no state in its spec: a Closed
// spec closes it through its status, as Volcano's queue controller does.
func (e *env) queueOf(kind, name string, spec v1alpha1.QueueSpec) {
	e.t.Helper()
	if kind == musterQueue {
		e.queue(name, spec)
		return
	}
	vc := volcanoClient(e.t)
	q, err := vc.SchedulingV1beta1().Queues().Create(e.ctx, &vcv1beta1.Queue{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: vcv1beta1.QueueSpec{
			Weight: spec.Weight, Priority: spec.Priority, Parent: spec.Parent, Reclaimable: spec.Reclaimable,
			Capability: spec.Capability, Deserved: spec.Deserved, Guarantee: vcv1beta1.Guarantee{Resource: spec.Guarantee},
		},
	}, metav1.CreateOptions{})
	if err != nil {
		e.t.Fatal(err)
	}
	e.t.Cleanup(func() {
		_ = vc.SchedulingV1beta1().Queues().Delete(context.Background(), q.Name, metav1.DeleteOptions{})
	})
	if spec.State == v1alpha1.QueueClosed {
		e.setQueueState(kind, name, v1alpha1.QueueClosed)
	}
}

// setQueueState opens or closes a queue of that kind.
func (e *env) setQueueState(kind, name string, state v1alpha1.QueueState) {
	e.t.Helper()
	if kind == musterQueue {
		q, err := cluster.Muster.SchedulingV1alpha1().Queues().Get(e.ctx, name, metav1.GetOptions{})
		if err != nil {
			e.t.Fatal(err)
		}
		q.Spec.State = state
		if _, err := cluster.Muster.SchedulingV1alpha1().Queues().Update(e.ctx, q, metav1.UpdateOptions{}); err != nil {
			e.t.Fatal(err)
		}
		return
	}
	vc := volcanoClient(e.t)
	err := wait.PollUntilContextTimeout(e.ctx, 50*time.Millisecond, 10*time.Second, true, func(ctx context.Context) (bool, error) {
		q, err := vc.SchedulingV1beta1().Queues().Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		q.Status.State = vcv1beta1.QueueState(state)
		_, err = vc.SchedulingV1beta1().Queues().UpdateStatus(ctx, q, metav1.UpdateOptions{})
		return err == nil, nil // a conflict with the status controller: again
	})
	if err != nil {
		e.t.Fatalf("setting Volcano queue %s %s: %v", name, state, err)
	}
}

// waitVolcanoQueue waits until the Volcano Queue's status satisfies ok.
func (e *env) waitVolcanoQueue(name, what string, ok func(*vcv1beta1.QueueStatus) bool) {
	e.t.Helper()
	vc := volcanoClient(e.t)
	var q *vcv1beta1.Queue
	err := wait.PollUntilContextTimeout(e.ctx, 100*time.Millisecond, 10*time.Second, true, func(ctx context.Context) (bool, error) {
		got, err := vc.SchedulingV1beta1().Queues().Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, nil
		}
		q = got
		return ok(&q.Status), nil
	})
	if err != nil {
		e.t.Fatalf("Volcano queue %s: want %s; status is %+v", name, what, q.Status)
	}
}

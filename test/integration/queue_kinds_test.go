package integration

import (
	"context"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/util/retry"
)

// Helpers of the queue tests that run once per kind of Queue (queueKinds):
// what differs between a Muster Queue and a Volcano Queue beyond creating
// one (queueOf) and opening or closing it (setQueueState).

// capacityConfigFor is the Capacity configuration a queue test of that
// kind runs: capacity.yaml, or, where Muster writes Volcano Queues' status,
// volcano.yaml with Capacity in place of Proportion in both profiles.
func capacityConfigFor(t *testing.T, kind string) string {
	t.Helper()
	if kind == musterQueue {
		return readConfig(t, "capacity.yaml")
	}
	config := volcanoConfig(t)
	if !strings.Contains(config, "name: Proportion") {
		t.Fatal("config/volcano.yaml enables no Proportion to replace by Capacity")
	}
	return strings.ReplaceAll(config, "name: Proportion", "name: Capacity")
}

// allocated is the allocated resources that the status of the queue of
// that kind reports: Muster writes them into either kind's status.
func (e *env) allocated(ctx context.Context, kind, name string) (v1.ResourceList, error) {
	if kind == musterQueue {
		q, err := cluster.Muster.SchedulingV1alpha1().Queues().Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return nil, err
		}
		return q.Status.Allocated, nil
	}
	q, err := volcanoClient(e.t).SchedulingV1beta1().Queues().Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return nil, err
	}
	return q.Status.Allocated, nil
}

// waitAllocated waits, up to lifecycleTimeout, until the status of the
// queue of that kind reports cpu allocated.
func (e *env) waitAllocated(kind, name, cpu string) {
	e.t.Helper()
	var got v1.ResourceList
	err := wait.PollUntilContextTimeout(e.ctx, 100*time.Millisecond, lifecycleTimeout, true, func(ctx context.Context) (bool, error) {
		l, err := e.allocated(ctx, kind, name)
		if err != nil {
			return false, nil
		}
		got = l
		return quantityIs(got, v1.ResourceCPU, cpu), nil
	})
	if err != nil {
		e.t.Fatalf("%s queue %s: want %s cpu allocated; its status says %v", kind, name, cpu, got)
	}
}

// setQueueWeight sets the weight of the queue of that kind.
func (e *env) setQueueWeight(kind, name string, weight int32) {
	e.t.Helper()
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		if kind == musterQueue {
			queues := cluster.Muster.SchedulingV1alpha1().Queues()
			q, err := queues.Get(e.ctx, name, metav1.GetOptions{})
			if err != nil {
				return err
			}
			q.Spec.Weight = weight
			_, err = queues.Update(e.ctx, q, metav1.UpdateOptions{})
			return err
		}
		queues := volcanoClient(e.t).SchedulingV1beta1().Queues()
		q, err := queues.Get(e.ctx, name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		q.Spec.Weight = weight
		_, err = queues.Update(e.ctx, q, metav1.UpdateOptions{})
		return err
	})
	if err != nil {
		e.t.Fatalf("setting the weight of %s queue %s: %v", kind, name, err)
	}
}

// deleteQueue deletes the queue of that kind.
func (e *env) deleteQueue(kind, name string) {
	e.t.Helper()
	var err error
	if kind == musterQueue {
		err = cluster.Muster.SchedulingV1alpha1().Queues().Delete(e.ctx, name, metav1.DeleteOptions{})
	} else {
		err = volcanoClient(e.t).SchedulingV1beta1().Queues().Delete(e.ctx, name, metav1.DeleteOptions{})
	}
	if err != nil {
		e.t.Fatalf("deleting %s queue %s: %v", kind, name, err)
	}
}

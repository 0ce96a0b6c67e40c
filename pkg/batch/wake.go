package batch

import (
	"context"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"

	"github.com/muster-sched/muster/pkg/gang"
	"github.com/muster-sched/muster/pkg/queue"
)

// wakeInterval is the least time between two wakes of the gangs that wait
// for their queue: frees come in bursts (a gang's members finishing), and
// one wake serves them all.
const wakeInterval = 50 * time.Millisecond

// wakeQueueWaiters retries the gangs that wait for their queue whenever
// the accounting may have room for them (queue.State.Freed), until ctx
// ends. The scheduling queue retries a pod on the cluster events it sees,
// but the accounting takes the same events in from Muster's own informers,
// which may lag: a gang retried first would be refused on the old figures,
// and then wait for the scheduling queue's periodic flush.
//
// A Queue added, deleted or changed retries every waiting gang: one that
// failed to place may now reclaim (its queue's weight was raised), and
// the scheduling queue retries a pod on a Queue event only if a queue
// policy refused it.
//
// Under Proportion it also retries them when room no queue claims appears
// (queue.Snapshot.Unclaimed grew: a queue filled its share, say), which
// the queue that waits may borrow; the scheduling queue has no event for
// that. Nor has it for the deserved shares moving (another queue asks for
// less, say): the gangs reclaim found no victims for on the shares before
// are retried then (queue.State.Redivided).
func (b *Batch) wakeQueueWaiters(ctx context.Context, s *queue.State) {
	logger := klog.FromContext(ctx)
	var unclaimed queue.Vector
	changed := s.Changed()
	if s.Policy() != queue.Proportion {
		changed = nil // only Proportion lends
	}
	for {
		wake, all := true, false
		select {
		case <-ctx.Done():
			return
		case <-s.Freed():
		case <-s.QueueChanges():
			all = true
		case <-changed:
			now := s.Refresh().Unclaimed()
			wake, unclaimed = now.Grew(unclaimed), now
		case <-s.Redivided():
			wake = false
			b.activateGangs(logger, s.TakeRedivided())
		}
		if wake {
			b.activateQueueWaiters(logger, all)
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(wakeInterval):
		}
	}
}

// activateQueueWaiters moves the gangs that wait for their queue, or all
// waiting gangs, to the scheduling queue's active queue.
func (b *Batch) activateQueueWaiters(logger klog.Logger, all bool) {
	b.activate(logger, "Queue accounting may have room: retrying the gangs that wait for their queue", b.Gangs.QueueWaiters(all))
}

// activateGangs moves the first pending member of each gang to the
// scheduling queue's active queue: trying it tries the gang's reclaim.
func (b *Batch) activateGangs(logger klog.Logger, keys []gang.Key) {
	var first []*v1.Pod
	for _, key := range keys {
		if pending := b.Gangs.PendingMembers(key); len(pending) > 0 {
			first = append(first, pending[0])
		}
	}
	b.activate(logger, "Deserved shares moved: retrying the gangs reclaim found no victims for", first)
}

// activate moves the pods, one per gang, to the active queue.
func (b *Batch) activate(logger klog.Logger, why string, first []*v1.Pod) {
	if len(first) == 0 {
		return
	}
	pods := make(map[string]*v1.Pod, len(first))
	for _, p := range first {
		pods[p.Namespace+"/"+p.Name] = p
	}
	logger.V(4).Info(why, "gangs", len(pods))
	b.handle.Activate(logger, pods)
}

// queueSpecChanged tells s of Queues added, deleted or whose spec changed
// (see queue.SpecChanged: status writes, once a second, change nothing).
func queueSpecChanged(s *queue.State) cache.ResourceEventHandler {
	return cache.ResourceEventHandlerFuncs{
		AddFunc: func(any) { s.QueuesChanged() },
		UpdateFunc: func(oldObj, newObj any) {
			if queue.SpecChanged(oldObj, newObj) {
				s.QueuesChanged()
			}
		},
		DeleteFunc: func(any) { s.QueuesChanged() },
	}
}

package batch

import (
	"context"
	"sync"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/cache"
)

// memberBinds is how many gang members write to the API at once.
const memberBinds = 32

// Binds bounds how many members of gangs write to the API at once, over
// every profile of the process. kube-scheduler writes each member's
// NominatedNodeName before it waits at Permit, then binds it; a gang's
// members reach Permit as fast as the scheduler places them and are
// allowed together, so with thousands of members all those writes would be
// in flight at once, and the binding of every other pod would wait behind
// them. A member holds a slot from PreBindPreFlight (before the nomination
// is written) until the nomination is seen (NominationSeen), and again
// from PreBind until it is bound (PostBind) or fails (Unreserve).
type Binds struct {
	slots chan struct{}
	mu    sync.Mutex
	held  map[types.UID]struct{}
}

// NewBinds lets n members bind at once.
func NewBinds(n int) *Binds {
	return &Binds{slots: make(chan struct{}, n), held: map[types.UID]struct{}{}}
}

// Acquire waits until pod uid may write, or ctx ends. A pod holds at most
// one slot.
func (b *Binds) Acquire(ctx context.Context, uid types.UID) error {
	b.mu.Lock()
	_, holds := b.held[uid]
	b.mu.Unlock()
	if holds {
		return nil
	}
	select {
	case b.slots <- struct{}{}:
	case <-ctx.Done():
		return context.Cause(ctx)
	}
	b.mu.Lock()
	b.held[uid] = struct{}{}
	b.mu.Unlock()
	return nil
}

// Release gives back pod uid's slot, if it holds one: its write is done,
// or it failed after Acquire.
func (b *Binds) Release(uid types.UID) {
	b.mu.Lock()
	_, holds := b.held[uid]
	delete(b.held, uid)
	b.mu.Unlock()
	if holds {
		<-b.slots
	}
}

// NominationSeen is a pod event handler that gives back a pod's slot once
// its NominatedNodeName is seen set: the write it held the slot for is
// done. (If the write fails, the slot is kept for the pod's binding and
// given back with it.)
func (b *Binds) NominationSeen() cache.ResourceEventHandler {
	return cache.ResourceEventHandlerFuncs{UpdateFunc: func(oldObj, newObj any) {
		old, ok1 := oldObj.(*v1.Pod)
		pod, ok2 := newObj.(*v1.Pod)
		if ok1 && ok2 && pod.Status.NominatedNodeName != "" && pod.Status.NominatedNodeName != old.Status.NominatedNodeName {
			b.Release(pod.UID)
		}
	}}
}

package batch

import (
	"context"
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/cache"
)

// memberBinds is how many gang members write to the API at once.
const memberBinds = 32

// nominationWait is how long a member holds its slot for a nomination
// that is not seen: the write failed, or a later write replaced it.
const nominationWait = 5 * time.Second

// Binds bounds how many members of gangs write to the API at once, over
// every profile of the process. kube-scheduler writes each member's
// NominatedNodeName before it waits at Permit, then binds it; a gang's
// members reach Permit as fast as the scheduler places them and are
// allowed together, so with thousands of members all those writes would be
// in flight at once, and the binding of every other pod would wait behind
// them. A member holds a slot from PreBindPreFlight (Nominating) until
// its nomination is seen (NominationSeen) or nominationWait passes, and
// from PreBind (Binding) until it is bound (PostBind) or fails
// (Unreserve): Release.
type Binds struct {
	slots chan struct{}
	mu    sync.Mutex
	held  map[types.UID]*hold
}

// hold is a pod's slot, and what it holds it for.
type hold struct{ binding bool }

// NewBinds lets n members write at once.
func NewBinds(n int) *Binds {
	return &Binds{slots: make(chan struct{}, n), held: map[types.UID]*hold{}}
}

// Nominating waits until pod uid may write its nomination, or ctx ends.
// The slot is given back when the nomination is seen, at the latest after
// nominationWait.
func (b *Binds) Nominating(ctx context.Context, uid types.UID) error {
	h, err := b.acquire(ctx, uid, false)
	if err != nil || h == nil {
		return err
	}
	time.AfterFunc(nominationWait, func() { b.release(uid, h, false) })
	return nil
}

// Binding waits until pod uid may bind, or ctx ends: a slot held for the
// nomination is kept for the binding.
func (b *Binds) Binding(ctx context.Context, uid types.UID) error {
	_, err := b.acquire(ctx, uid, true)
	return err
}

// acquire makes uid hold a slot for binding or not, taking one if it holds
// none; it returns the hold it took (nil: it held one already).
func (b *Binds) acquire(ctx context.Context, uid types.UID, binding bool) (*hold, error) {
	b.mu.Lock()
	if h, ok := b.held[uid]; ok {
		h.binding = h.binding || binding
		b.mu.Unlock()
		return nil, nil
	}
	b.mu.Unlock()
	select {
	case b.slots <- struct{}{}:
	case <-ctx.Done():
		return nil, context.Cause(ctx)
	}
	h := &hold{binding: binding}
	b.mu.Lock()
	if _, ok := b.held[uid]; ok { // took one meanwhile: give this back
		b.mu.Unlock()
		<-b.slots
		return nil, nil
	}
	b.held[uid] = h
	b.mu.Unlock()
	return h, nil
}

// Release gives back pod uid's slot, if it holds one: it is bound, or it
// failed.
func (b *Binds) Release(uid types.UID) { b.release(uid, nil, true) }

// release gives back uid's slot if it is held as h (nil: however held),
// and for binding only if evenBinding.
func (b *Binds) release(uid types.UID, h *hold, evenBinding bool) {
	b.mu.Lock()
	cur, ok := b.held[uid]
	if !ok || h != nil && cur != h || cur.binding && !evenBinding {
		b.mu.Unlock()
		return
	}
	delete(b.held, uid)
	b.mu.Unlock()
	<-b.slots
}

// NominationSeen is a pod event handler that gives back a pod's slot once
// its NominatedNodeName is seen set: the write it held the slot for is
// done. A slot held for binding is kept.
func (b *Binds) NominationSeen() cache.ResourceEventHandler {
	return cache.ResourceEventHandlerFuncs{UpdateFunc: func(oldObj, newObj any) {
		old, ok1 := oldObj.(*v1.Pod)
		pod, ok2 := newObj.(*v1.Pod)
		if ok1 && ok2 && pod.Status.NominatedNodeName != "" && pod.Status.NominatedNodeName != old.Status.NominatedNodeName {
			b.release(pod.UID, nil, false)
		}
	}}
}

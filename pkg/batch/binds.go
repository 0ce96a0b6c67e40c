package batch

import (
	"context"
	"sync"

	"k8s.io/apimachinery/pkg/types"
)

// memberBinds is how many gang members bind at once.
const memberBinds = 32

// Binds bounds how many gang members bind at once, over every profile of
// the process. A gang's members are allowed at Permit together: with
// thousands of members, all their binding requests would be in flight at
// once, and the binding of every other pod would wait behind them.
type Binds struct {
	slots chan struct{}
	mu    sync.Mutex
	held  map[types.UID]struct{}
}

// NewBinds lets n members bind at once.
func NewBinds(n int) *Binds {
	return &Binds{slots: make(chan struct{}, n), held: map[types.UID]struct{}{}}
}

// Acquire waits until pod uid may bind, or ctx ends. A pod holds at most
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

// Release gives back pod uid's slot, if it holds one: it bound, or it
// failed after Acquire.
func (b *Binds) Release(uid types.UID) {
	b.mu.Lock()
	_, holds := b.held[uid]
	delete(b.held, uid)
	b.mu.Unlock()
	if holds {
		<-b.slots
	}
}

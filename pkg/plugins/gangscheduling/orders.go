package gangscheduling

import (
	"sync"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/muster-sched/muster/pkg/gang"
	"github.com/muster-sched/muster/pkg/queue"
)

// order is what Less reads of one gang member, each part kept while it holds:
// its gang's position until the gang changes (pos.Stamp), its queue's
// figures for one snapshot, its projected share until the gang or the
// cluster's allocatable changes.
type order struct {
	// version is the resourceVersion of the pod it was read for.
	version string
	// key is the member's gang.
	key gang.Key
	pos gang.Position
	// snap is the snapshot queue was read from.
	snap       *queue.Snapshot
	queue      *queue.Figures
	projection queue.Projection
	projected  bool
}

// orders keeps each queued member's order entry, by pod UID; a nil
// *orders keeps none, and Less reads the gang state afresh every time.
// Entries not used since the previous rotation are dropped at the next:
// the pods that left the scheduling queue (bound, deleted) stop being
// compared.
type orders struct {
	mu       sync.Mutex
	cur, old map[types.UID]*order
	// compared counts the comparisons since the last rotation.
	compared int
}

// ordersRotation is how many comparisons orders makes between rotations:
// a few thousand pops, seconds on a busy scheduler.
const ordersRotation = 1 << 16

func newOrders() *orders {
	return &orders{cur: map[types.UID]*order{}, old: map[types.UID]*order{}}
}

// lock holds o for a comparison, rotating it when due.
func (o *orders) lock() {
	if o == nil {
		return
	}
	o.mu.Lock()
	if o.compared++; o.compared == ordersRotation {
		o.old, o.cur, o.compared = o.cur, make(map[types.UID]*order, len(o.cur)), 0
	}
}

func (o *orders) unlock() {
	if o != nil {
		o.mu.Unlock()
	}
}

// entry is the entry of pod, a member of gang key, made afresh if it was
// read for another version of the pod; scratch, made afresh, when o keeps
// none or the pod has no UID or resourceVersion to tell its versions
// apart. o locked.
func (o *orders) entry(pod *v1.Pod, key gang.Key, scratch *order) *order {
	if o == nil || pod.UID == "" || pod.ResourceVersion == "" {
		*scratch = order{key: key}
		return scratch
	}
	e := o.cur[pod.UID]
	if e == nil {
		if e = o.old[pod.UID]; e != nil {
			o.cur[pod.UID] = e
		}
	}
	if e == nil || e.version != pod.ResourceVersion {
		e = &order{version: pod.ResourceVersion, key: key}
		o.cur[pod.UID] = e
	}
	return e
}

package gang

import (
	"maps"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	corev1helpers "k8s.io/component-helpers/scheduling/corev1"
)

// tally is the running sums of a gang's Status: every change of a member
// (its pod, its requests, its reservation) takes the member's old part out
// and puts its new part in (group.retally), so that reading a gang's status
// costs the same for a gang of 5,000 members as for a gang of one. Its
// resource lists are replaced, never changed in place: a Status shares
// them. recount (status_test.go) computes the same from the members.
type tally struct {
	members, live, scheduled, running, succeeded, failed, placed int32
	// liveByRole and placedByRole count by every role, "" included.
	liveByRole, placedByRole map[string]int32
	// priorities counts the live members by priority.
	priorities map[int32]int32
	// allocated, bound and pending are Status's; nil when empty.
	allocated, bound, pending v1.ResourceList
}

// add adds n (1 or −1) times the part of member p (reserved: this
// scheduler reserved it a node; req: its requests).
func (t *tally) add(p *v1.Pod, reserved bool, req v1.ResourceList, n int32) {
	switch {
	case p.Status.Phase == v1.PodSucceeded || p.Status.Phase == v1.PodFailed || p.DeletionTimestamp != nil:
	case p.Spec.NodeName != "":
		t.bound = addList(t.bound, req, n)
		t.allocated = addList(t.allocated, req, n)
	case reserved:
		t.allocated = addList(t.allocated, req, n)
	default:
		t.pending = addList(t.pending, req, n)
	}
	t.members += n
	switch p.Status.Phase {
	case v1.PodFailed:
		t.failed += n
	case v1.PodSucceeded:
		t.succeeded += n
	case v1.PodRunning:
		t.running += n
	}
	bound := p.Spec.NodeName != ""
	if bound {
		t.scheduled += n
	}
	if !isLive(p) {
		return
	}
	role := RoleOf(p)
	t.live += n
	t.liveByRole = addCount(t.liveByRole, role, n)
	t.priorities = addCount(t.priorities, corev1helpers.PodPriority(p), n)
	if bound || reserved {
		t.placed += n
		t.placedByRole = addCount(t.placedByRole, role, n)
	}
}

// priority is the highest priority of a live member, 0 without one.
func (t *tally) priority() int32 {
	var out int32
	first := true
	for prio := range t.priorities {
		if first || prio > out {
			out, first = prio, false
		}
	}
	return out
}

// addCount adds n to m[k], dropping the key at 0; it makes m when nil.
func addCount[K comparable](m map[K]int32, k K, n int32) map[K]int32 {
	if m == nil {
		m = map[K]int32{}
	}
	if m[k] += n; m[k] == 0 {
		delete(m, k)
	}
	return m
}

// addList returns sum + n×add as a new list, without the resources that
// came to zero (nil when none is left); sum and add are left as they are.
func addList(sum, add v1.ResourceList, n int32) v1.ResourceList {
	if len(add) == 0 {
		return sum
	}
	out := make(v1.ResourceList, len(sum)+len(add))
	maps.Copy(out, sum)
	for name, q := range add {
		// A copy: a Quantity in decimal form shares its value, and sum
		// may be in a Status handed out.
		cur := out[name].DeepCopy()
		if n > 0 {
			cur.Add(q)
		} else {
			cur.Sub(q)
		}
		if cur.IsZero() {
			delete(out, name)
		} else {
			out[name] = cur
		}
	}
	if len(out) == 0 {
		return nil
	}
	return out
}

// retally applies change to member uid's entries (members, reserved,
// requests), taking its part out of the tally before and putting it back
// after. m.mu held for writing.
func (g *group) retally(uid types.UID, change func()) {
	g.count(uid, -1)
	change()
	g.count(uid, 1)
}

// count adds n times member uid's part to the tally; a UID that is no
// member has none.
func (g *group) count(uid types.UID, n int32) {
	p := g.members[uid]
	if p == nil {
		return
	}
	_, reserved := g.reserved[uid]
	g.tally.add(p, reserved, g.requests[uid], n)
}

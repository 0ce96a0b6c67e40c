package queue

import (
	"k8s.io/apimachinery/pkg/types"

	"github.com/muster-sched/muster/apis/scheduling/v1alpha1"
)

// division is what a refresh computed deserved and realCapability from,
// with the figures: the next refresh reuses them while the cluster total,
// the Queues' specs and the queues' requests are the same (placing a
// pod moves usage from pending to allocated; request stays). Water-filling
// is most of a refresh.
type division struct {
	total Vector
	// queues identify each Queue's spec: its UID and generation (status
	// writes, once a second, leave the generation alone).
	queues   map[string]queueVersion
	requests map[string]Vector
	// held is what each queue that admits nothing holds (allocated +
	// inqueue): its deserved (see waterFill).
	held map[string]Vector
	figs map[string]*Figures
	top  []string
	// published are the figures of the last snapshot made from d: a
	// queue whose usage did not move since keeps them.
	published map[string]*Figures
}

// queueVersion identifies what a division was computed from. A Muster
// Queue's generation covers its state; a Volcano Queue keeps its state in
// status, which its generation does not count.
type queueVersion struct {
	uid        types.UID
	generation int64
	closed     bool
}

func versionOf(q *v1alpha1.Queue) queueVersion {
	return queueVersion{uid: q.UID, generation: q.Generation, closed: q.Spec.State == v1alpha1.QueueClosed}
}

// newDivision divides total among the listed queues by policy, given
// their usage, and records what it was computed from.
func newDivision(policy Policy, total Vector, queues []*v1alpha1.Queue, usage map[string]Usage) *division {
	figs, top := arrange(specsOf(queues), usage)
	divide(policy, figs, top, total, total)
	d := &division{total: total, queues: make(map[string]queueVersion, len(queues)),
		requests: make(map[string]Vector, len(usage)), held: map[string]Vector{}, figs: figs, top: top, published: figs}
	for name := range figs {
		if admitsNone(figs, name) {
			d.held[name] = heldBy(usage[name])
		}
	}
	for _, q := range queues {
		d.queues[q.Name] = versionOf(q)
	}
	for name, u := range usage {
		d.requests[name] = u.Request.Clone()
	}
	return d
}

// matches reports whether d was computed from these inputs.
func (d *division) matches(total Vector, queues []*v1alpha1.Queue, usage map[string]Usage) bool {
	if d == nil || !d.total.Equal(total) || len(d.queues) != len(queues) || len(d.requests) != len(usage) {
		return false
	}
	for _, q := range queues {
		if v, ok := d.queues[q.Name]; !ok || v != versionOf(q) {
			return false
		}
	}
	for name, u := range usage {
		r, ok := d.requests[name]
		if !ok || !r.Equal(u.Request) {
			return false
		}
	}
	for name, h := range d.held {
		if !h.Equal(heldBy(usage[name])) {
			return false
		}
	}
	return true
}

// sameDeserved reports whether d gives every queue the deserved share o
// gives it (o nil: no division before).
func (d *division) sameDeserved(o *division) bool {
	if o == nil || len(d.figs) != len(o.figs) {
		return false
	}
	for name, f := range d.figs {
		if g := o.figs[name]; g == nil || !f.Deserved.Equal(g.Deserved) {
			return false
		}
	}
	return true
}

// heldBy is what a queue holds: allocated + inqueue.
func heldBy(u Usage) Vector {
	h := u.Allocated.Clone()
	h.Add(u.Inqueue)
	return h
}

// figures are d's figures with usage brought up to date, given the
// queues whose usage moved since the last call. The others, and their
// ancestors unless one of their descendants moved, keep the figures
// published last: figures are never modified once published.
func (d *division) figures(usage map[string]Usage, moved map[string]bool) map[string]*Figures {
	stale := make(map[string]bool, len(moved))
	for name := range moved {
		// A parent's usage sums its children's. A queue placed at the top
		// (Invalid) is summed into no parent.
		for f := d.figs[name]; f != nil && !stale[f.Name]; f = d.figs[f.Parent] {
			stale[f.Name] = true
			if f.Invalid != "" {
				break
			}
		}
	}
	figs := make(map[string]*Figures, len(d.figs))
	for name, f := range d.figs {
		if !stale[name] {
			figs[name] = d.published[name]
			continue
		}
		figs[name] = &Figures{
			Spec:  f.Spec,
			Usage: usage[name].clone(),
			// Computed once, read only from then on.
			Deserved: f.Deserved, RealCapability: f.RealCapability, Children: f.Children, Invalid: f.Invalid,
		}
	}
	for _, name := range d.top {
		sumUsage(figs, name, stale)
	}
	d.published = figs
	return figs
}

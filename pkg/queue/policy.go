package queue

import (
	"fmt"
	"math"
	"sort"
	"strings"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/muster-sched/muster/apis/scheduling/v1alpha1"
)

// Policy is how deserved shares are computed.
type Policy string

const (
	// Proportion divides the cluster by weight (water-filling); deserved is
	// the ceiling for placement.
	Proportion Policy = "Proportion"
	// Capacity takes deserved from the Queue spec; realCapability is the
	// ceiling for placement and deserved the line reclaim works to.
	Capacity Policy = "Capacity"
)

// Spec is a queue's configuration.
type Spec struct {
	Name        string
	Parent      string // "" for the top of the hierarchy
	Weight      int64
	Priority    int32
	Capability  Vector // a dimension it does not name is unlimited (or the parent's)
	Guarantee   Vector
	Deserved    Vector // capacity policy only
	Reclaimable bool
	Closed      bool
	// Namespaces selects the namespaces that may submit to the queue; nil
	// lets every one. NamespacesErr says why the queue's selector could not
	// be read: then it selects none.
	Namespaces    labels.Selector
	NamespacesErr string
}

// SpecOf reads a Queue object.
func SpecOf(q *v1alpha1.Queue) Spec {
	parent := q.Spec.Parent
	if parent == v1alpha1.RootQueue {
		parent = ""
	}
	weight := int64(q.Spec.Weight)
	if weight < 1 {
		weight = 1
	}
	spec := Spec{
		Name: q.Name, Parent: parent, Weight: weight, Priority: q.Spec.Priority,
		Capability:  FromList(v1.ResourceList(q.Spec.Capability)),
		Guarantee:   FromList(v1.ResourceList(q.Spec.Guarantee)),
		Deserved:    FromList(v1.ResourceList(q.Spec.Deserved)),
		Reclaimable: q.Spec.Reclaimable == nil || *q.Spec.Reclaimable,
		Closed:      q.Spec.State == v1alpha1.QueueClosed,
	}
	if q.Spec.NamespaceSelector != nil {
		sel, err := metav1.LabelSelectorAsSelector(q.Spec.NamespaceSelector)
		if err != nil {
			sel, spec.NamespacesErr = labels.Nothing(), err.Error()
		}
		spec.Namespaces = sel
	}
	return spec
}

// Usage is what the groups of a queue hold and ask for.
type Usage struct {
	Allocated Vector // placed or running, not terminated
	Request   Vector // Allocated + pending
	Inqueue   Vector // Σ over admitted, not yet running groups of max(0, minResources − allocated)
	Elastic   Vector // Σ over running groups of max(0, allocated − minResources)
	// Reserved is the part of Inqueue that enqueued gangs hold for their
	// members to come (Reserved): bounded by realCapability at enqueue,
	// not by the overcommit bound, which it does not count in either.
	Reserved Vector
}

// clone is a copy of u that a queue's figures may own: sums up the
// hierarchy are added into it.
func (u Usage) clone() Usage {
	return Usage{Allocated: orEmpty(u.Allocated), Request: orEmpty(u.Request), Inqueue: orEmpty(u.Inqueue), Elastic: orEmpty(u.Elastic), Reserved: orEmpty(u.Reserved)}
}

// Figures is one queue's computed state. A parent's usage is the sum of
// its children's.
type Figures struct {
	Spec
	Usage
	Deserved       Vector
	RealCapability Vector
	Children       []string
	// Invalid says why the queue's place in the hierarchy is wrong (unknown
	// parent, a loop); such a queue is placed at the top.
	Invalid string
	// share caches Share once the figures are final (shareKnown).
	share      float64
	shareKnown bool
}

// IsLeaf reports whether groups may live in the queue.
func (f *Figures) IsLeaf() bool { return len(f.Children) == 0 }

// Share is max over dimensions of allocated/deserved: how far the queue is
// into its share. A queue holding what it does not deserve has a large share.
func (f *Figures) Share() float64 {
	if f.shareKnown {
		return f.share
	}
	return f.computeShare()
}

func (f *Figures) computeShare() float64 {
	share := 0.0
	for k, a := range f.Allocated {
		if a <= 0 {
			continue
		}
		d := f.Deserved[k]
		if d <= 0 {
			return math.Inf(1)
		}
		share = math.Max(share, float64(a)/float64(d))
	}
	return share
}

// Compute derives every queue's deserved and realCapability from the
// cluster total (what queues may divide), the queues' specs and usage.
func Compute(policy Policy, total Vector, specs []Spec, usage map[string]Usage) map[string]*Figures {
	figs, top := arrange(specs, usage)
	divide(policy, figs, top, total, total)
	return figs
}

// arrange builds each queue's figures from its spec and usage, links the
// hierarchy and sums the usage up it; it returns the top queues: those
// without a parent, and those whose place in the hierarchy is wrong.
func arrange(specs []Spec, usage map[string]Usage) (map[string]*Figures, []string) {
	figs := make(map[string]*Figures, len(specs))
	for _, s := range specs {
		figs[s.Name] = &Figures{Spec: s, Usage: usage[s.Name].clone()}
	}
	var top []string
	for _, name := range sortedKeys(figs) {
		f := figs[name]
		if f.Parent == "" {
			top = append(top, name)
			continue
		}
		if loop := loopFrom(name, figs); loop != "" {
			f.Invalid = "parent chain loops: " + loop
			top = append(top, name)
			continue
		}
		p, ok := figs[f.Parent]
		if !ok {
			f.Invalid = fmt.Sprintf("parent queue %q does not exist", f.Parent)
			top = append(top, name)
			continue
		}
		p.Children = append(p.Children, name)
	}
	for _, name := range top {
		sumUsage(figs, name, nil)
	}
	return figs, top
}

// loopFrom returns the loop of parents starting at name, if there is one.
func loopFrom(name string, figs map[string]*Figures) string {
	seen := map[string]bool{}
	chain := []string{}
	for cur := name; cur != ""; {
		if seen[cur] {
			if cur != name {
				return "" // a loop further up; reported on its own members
			}
			return strings.Join(append(chain, cur), " -> ")
		}
		seen[cur] = true
		chain = append(chain, cur)
		f, ok := figs[cur]
		if !ok {
			return ""
		}
		cur = f.Parent
	}
	return ""
}

// sumUsage adds the children's usage into each parent, bottom up. When
// stale is not nil, only into the queues it holds: the figures of the
// others hold their sums already.
func sumUsage(figs map[string]*Figures, name string, stale map[string]bool) {
	if stale != nil && !stale[name] {
		return
	}
	f := figs[name]
	for _, c := range f.Children {
		sumUsage(figs, c, stale)
		cf := figs[c]
		f.Allocated.Add(cf.Allocated)
		f.Request.Add(cf.Request)
		f.Inqueue.Add(cf.Inqueue)
		f.Reserved.Add(cf.Reserved)
		f.Elastic.Add(cf.Elastic)
	}
}

// divide computes realCapability and deserved for siblings sharing a
// parent whose realCapability is parentReal and whose deserved is avail.
func divide(policy Policy, figs map[string]*Figures, siblings []string, parentReal, avail Vector) {
	guarantees := Vector{}
	for _, s := range siblings {
		guarantees.Add(figs[s].Guarantee)
	}
	for _, s := range siblings {
		f := figs[s]
		f.RealCapability = realCapability(f, parentReal, guarantees)
	}
	switch policy {
	case Capacity:
		for _, s := range siblings {
			f := figs[s]
			f.Deserved = Vector{}
			for k, real := range f.RealCapability {
				d, ok := f.Spec.Deserved[k]
				if !ok {
					d = real // no reclaim line in an unnamed dimension
				}
				f.Deserved[k] = min(max(d, f.Guarantee[k]), real)
			}
		}
	default:
		shut := make([]bool, len(siblings))
		for i, s := range siblings {
			shut[i] = admitsNone(figs, s)
		}
		waterFill(figs, siblings, shut, avail)
	}
	for _, s := range siblings {
		f := figs[s]
		if len(f.Children) > 0 {
			divide(policy, figs, f.Children, f.RealCapability, f.Deserved)
		}
	}
}

// realCapability = min(capability, max(0, parentReal − Σ siblings'
// guarantee) + own guarantee), per dimension of the parent's.
func realCapability(f *Figures, parentReal, guarantees Vector) Vector {
	real := Vector{}
	dims := parentReal.Clone()
	for k := range f.Capability {
		if _, ok := dims[k]; !ok {
			dims[k] = 0
		}
	}
	for k := range dims {
		v := max(0, parentReal[k]-guarantees[k]) + f.Guarantee[k]
		if c, ok := f.Capability[k]; ok {
			v = min(v, c)
		}
		real[k] = v
	}
	return real
}

// admitsNone reports whether a queue can admit no gang: it is Closed, its
// place in the hierarchy is wrong (Invalid), or a queue above it is one of
// these (Admit refuses a gang below a closed queue, and a queue below one
// that admits nothing shares out only what that one holds).
func admitsNone(figs map[string]*Figures, name string) bool {
	for f := figs[name]; f != nil; f = figs[f.Parent] {
		if f.Closed || f.Invalid != "" {
			return true
		}
		if f.Parent == "" {
			return false
		}
	}
	return true // a parent that does not exist makes the queue Invalid
}

// waterFill divides avail among the queues by weight, per resource: the
// weighted max-min fair division with floors and caps. Each queue gets
// clamp(λ·weight, guarantee, min(realCapability, request)) for the water
// level λ at which the shares add up to avail (or every queue is capped).
// A guarantee above the cap still wins. Carving floors first and sharing
// the rest by weight is what the round-by-round filling approximates; this
// finds it exactly and never hands out more than avail beyond guarantees.
//
// A queue that admits nothing (shut: see admitsNone) takes no share of
// what the others divide: it deserves what it holds, allocated + inqueue
// (the rest of the minimum of gangs it admitted before it closed, which
// still start), capped by realCapability, whatever the water level; the
// others divide the rest by weight. Its pending work, which it cannot
// admit, draws nothing. Its guarantee stays its floor: a guarantee is
// reserved capacity, already kept out of its siblings' realCapability, so
// none of them could use it were it deserved by no one.
func waterFill(figs map[string]*Figures, queues []string, shut []bool, avail Vector) {
	for _, q := range queues {
		figs[q].Deserved = Vector{}
	}
	dims := avail.Clone()
	for _, q := range queues {
		for k := range figs[q].Guarantee {
			if _, ok := dims[k]; !ok {
				dims[k] = 0
			}
		}
	}
	for k, total := range dims {
		type bounds struct{ w, lo, hi float64 }
		b := make([]bounds, len(queues))
		maxLevel := 0.0
		for i, q := range queues {
			f := figs[q]
			lo := float64(f.Guarantee[k])
			want := f.Request[k]
			if shut[i] {
				want = f.Allocated[k] + f.Inqueue[k]
			}
			hi := math.Max(lo, math.Min(float64(f.RealCapability[k]), float64(want)))
			if shut[i] {
				lo = hi
			}
			b[i] = bounds{w: float64(f.Weight), lo: lo, hi: hi}
			maxLevel = math.Max(maxLevel, hi/b[i].w)
		}
		share := func(level float64) float64 {
			sum := 0.0
			for _, x := range b {
				sum += math.Min(x.hi, math.Max(x.lo, level*x.w))
			}
			return sum
		}
		level := maxLevel
		if share(maxLevel) > float64(total) {
			lo, hi := 0.0, maxLevel
			for range 64 {
				mid := (lo + hi) / 2
				if share(mid) > float64(total) {
					hi = mid
				} else {
					lo = mid
				}
			}
			level = lo
		}
		for i, q := range queues {
			d := math.Min(b[i].hi, math.Max(b[i].lo, level*b[i].w))
			figs[q].Deserved[k] = int64(math.Floor(d + 1e-6))
		}
	}
}

func orEmpty(v Vector) Vector {
	if v == nil {
		return Vector{}
	}
	return v.Clone()
}

func sortedKeys(m map[string]*Figures) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

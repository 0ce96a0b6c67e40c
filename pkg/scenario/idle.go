package scenario

import (
	"fmt"
	"math"

	v1 "k8s.io/api/core/v1"
)

// idleWhileWaiting is, per dimension, the room that sits idle while a pod
// that fits it waits: on each node where a pending pod the scheduler has
// refused before fits whole (every dimension, taints and selectors
// aside), the node's free room, up to what such pods request between
// them. A pod not tried yet is not counted: that is throughput, not idle
// room. A gang's member counts only while its gang's pending members fit
// the cluster's free room together, or, for a gang that requires a
// topology domain, the free room of one domain (that of its running
// members, once some run). o.mu held.
func (o *observer) idleWhileWaiting() []float64 {
	free := map[string][]float64{}
	for node, g := range o.groups {
		free[node] = append([]float64(nil), o.groupAllocatable[g]...)
	}
	gangPending := map[string][]float64{}
	for key, p := range o.pods {
		if p.running() {
			if f := free[p.node]; f != nil {
				for i, r := range p.requests {
					f[i] -= r
				}
			}
		}
		if p.pending() && p.gang != "" {
			g := namespaceOf(key) + "/" + p.gang
			if gangPending[g] == nil {
				gangPending[g] = make([]float64, len(o.dims))
			}
			addTo(gangPending[g], p.requests)
		}
	}
	totalFree := make([]float64, len(o.dims))
	for _, f := range free {
		for i, v := range f {
			totalFree[i] += math.Max(0, v)
		}
	}
	// Pods of one shape fit the same nodes: most pods share a few shapes.
	type shape struct{ requests, sum []float64 }
	shapes := map[string]*shape{}
	for key, p := range o.pods {
		if !p.pending() || p.refused.IsZero() {
			continue
		}
		if g := namespaceOf(key) + "/" + p.gang; p.gang != "" && !o.gangFits(o.gangs[g], gangPending[g], free, totalFree) {
			continue
		}
		k := fmt.Sprint(p.requests)
		if shapes[k] == nil {
			shapes[k] = &shape{requests: p.requests, sum: make([]float64, len(o.dims))}
		}
		addTo(shapes[k].sum, p.requests)
	}
	idle := make([]float64, len(o.dims))
	want := make([]float64, len(o.dims))
	hosts := map[string]bool{}
	for _, sh := range shapes {
		fitsSomewhere := false
		for node, f := range free {
			if fits(sh.requests, f) {
				hosts[node], fitsSomewhere = true, true
			}
		}
		if fitsSomewhere {
			addTo(want, sh.sum)
		}
	}
	for node := range hosts {
		for i, v := range free[node] {
			idle[i] += math.Max(0, v)
		}
	}
	for i := range idle {
		idle[i] = math.Min(idle[i], want[i])
	}
	return idle
}

// gangFits reports whether a gang's pending requests fit the free room: the
// cluster's, or one domain's of the gang's required key.
func (o *observer) gangFits(g *gangRecord, pending []float64, free map[string][]float64, totalFree []float64) bool {
	if g == nil || g.required == "" {
		return fits(pending, totalFree)
	}
	anchor := ""
	for _, m := range g.members {
		if m.running() {
			anchor = o.nodeLabels[m.node][g.required]
			break
		}
	}
	room := map[string][]float64{}
	for node, f := range free {
		d, ok := o.nodeLabels[node][g.required]
		if !ok || anchor != "" && d != anchor {
			continue
		}
		if room[d] == nil {
			room[d] = make([]float64, len(f))
		}
		for i, v := range f {
			room[d][i] += math.Max(0, v)
		}
	}
	for _, r := range room {
		if fits(pending, r) {
			return true
		}
	}
	return false
}

// refusedBy reports whether the scheduler has marked the pod unschedulable.
func refusedBy(pod *v1.Pod) bool {
	for _, c := range pod.Status.Conditions {
		if c.Type == v1.PodScheduled && c.Status == v1.ConditionFalse && c.Reason == v1.PodReasonUnschedulable {
			return true
		}
	}
	return false
}

// fits reports whether v ≤ room in every dimension v asks for.
func fits(v, room []float64) bool {
	for i, x := range v {
		if x > 0 && x > room[i]+1e-9 {
			return false
		}
	}
	return true
}

// summarizeIdle integrates the samples' idle room while pods wait, per
// resource, in resource-seconds (cpu in cores).
func (r *Result) summarizeIdle(o *observer) {
	r.IdleWhileWaiting = map[string]float64{}
	for i := 1; i < len(o.samples); i++ {
		dt := (o.samples[i].at - o.samples[i-1].at).Seconds()
		for d, v := range o.samples[i-1].idle {
			r.IdleWhileWaiting[string(o.dims[d])] += dt * v
		}
	}
}

package queue

import (
	"strings"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
)

// expected is what the cluster's records should be for the objects whose
// record differs from the informers' caches.
type expected struct {
	nodes map[string]Vector // nil: not counted
	pods  map[types.UID]*boundPod
}

// differencesLocked compares the records with the nodes and pods in the
// informers' caches. It returns the objects whose record differs, by key
// ("node NAME", "pod UID") with the version the caches hold (an object
// whose event is on its way moves), and what their records should be. A
// pod whose record was made from the version the cache holds is not
// looked into further: the sums' check covers what was made of it. c.mu
// held: a handler that has yet to take in what the caches hold runs after
// the audit, and takes it in again.
func (c *cluster) differencesLocked() (map[string]string, expected, error) {
	nodes, err := c.nodeLister.List(labels.Everything())
	if err != nil {
		return nil, expected{}, err
	}
	pods, err := c.podLister.List(labels.Everything())
	if err != nil {
		return nil, expected{}, err
	}
	diffs, want := map[string]string{}, expected{nodes: map[string]Vector{}, pods: map[types.UID]*boundPod{}}
	listed := make(map[string]bool, len(nodes))
	for _, n := range nodes {
		listed[n.Name] = true
		var v Vector
		if schedulable(n) {
			v = FromList(n.Status.Allocatable)
		}
		if old, ok := c.nodes[n.Name]; ok != (v != nil) || ok && !old.Equal(v) {
			diffs["node "+n.Name], want.nodes[n.Name] = n.ResourceVersion, v
		}
	}
	for name := range c.nodes {
		if !listed[name] {
			diffs["node "+name], want.nodes[name] = "", nil
		}
	}
	matched := 0 // records of pods the cache holds
	for _, p := range pods {
		old, had := c.pods[p.UID]
		if had {
			matched++
		}
		bound := isBound(p)
		if !bound && !had {
			continue
		}
		if bound && had && old.version == p.ResourceVersion && old.node == p.Spec.NodeName {
			// Made from this version: its requests are the same. Whether
			// it is managed may have changed (an upstream PodGroup came).
			if _, managed := c.keyOf(p); old.unmanaged != managed {
				continue
			}
		}
		b, _ := c.boundPodOf(p)
		if bound && had && old.same(b) {
			continue
		}
		diffs["pod "+string(p.UID)] = p.Namespace + "/" + p.Name + "@" + p.ResourceVersion
		want.pods[p.UID] = nil
		if bound {
			want.pods[p.UID] = &b
		}
	}
	if matched != len(c.pods) {
		// Records of pods the cache no longer holds.
		inCache := make(map[types.UID]bool, len(pods))
		for _, p := range pods {
			inCache[p.UID] = true
		}
		for uid := range c.pods {
			if !inCache[uid] {
				diffs["pod "+string(uid)], want.pods[uid] = "", nil
			}
		}
	}
	return diffs, want, nil
}

// audit compares the records with a recount from the informers' caches.
// It repairs the records of the objects that differed at the previous
// look too, at the same version (an object whose event is on its way
// differs once, or moves), and then the sums where they do not add up to
// the records. It returns the objects that differ now, with their
// versions (the next look's previous), and the correction made to each
// sum: the drift, per sum and resource.
func (c *cluster) audit(previous map[string]string) (map[string]string, map[string]Vector, []string, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	diffs, want, err := c.differencesLocked()
	if err != nil {
		return nil, nil, nil, err
	}
	before := map[string]Vector{"allocatable": c.allocatable.v.Clone(), "used": c.used.v.Clone(), "unmanaged": c.unmanaged.v.Clone(), "off nodes": c.offNodes.v.Clone()}
	var repaired []string
	for key, version := range diffs {
		if v, ok := previous[key]; !ok || v != version {
			continue
		}
		repaired = append(repaired, key+" ("+version+")")
		c.repairLocked(key, want)
	}
	// What the records add up to.
	sums := map[string]Vector{"allocatable": {}, "used": {}, "unmanaged": {}, "off nodes": {}}
	for _, v := range c.nodes {
		sums["allocatable"].Add(v)
	}
	for _, b := range c.pods {
		_, counted := c.nodes[b.node]
		switch {
		case counted:
			sums["used"].Add(b.requests)
			if b.unmanaged {
				sums["unmanaged"].Add(b.requests)
			}
		case !b.unmanaged && !b.deleting:
			sums["off nodes"].Add(b.requests)
		}
	}
	drift := map[string]Vector{}
	for name, s := range map[string]*sum{"allocatable": &c.allocatable, "used": &c.used, "unmanaged": &c.unmanaged, "off nodes": &c.offNodes} {
		if difference(sums[name], s.v) != nil {
			s.v, s.shared = sums[name], false
			c.generation++
		}
		if d := difference(s.v, before[name]); d != nil {
			drift[name] = d
		}
	}
	if len(drift) > 0 {
		// The per-node sums, which a node entering or leaving the count
		// applies, may have drifted with the totals.
		clear(c.on)
		for _, b := range c.pods {
			c.addToNodeLocked(b, 1)
		}
	}
	c.publishLocked()
	return diffs, drift, repaired, nil
}

// repairLocked makes an object's record what the caches say. c.mu held.
func (c *cluster) repairLocked(key string, want expected) {
	kind, name, _ := strings.Cut(key, " ")
	switch kind {
	case "node":
		if old, ok := c.nodes[name]; ok {
			c.allocatable.own().Sub(old)
			c.countPodsLocked(name, -1)
			delete(c.nodes, name)
		}
		if v := want.nodes[name]; v != nil {
			c.nodes[name] = v
			c.allocatable.own().Add(v)
			c.countPodsLocked(name, 1)
		}
		c.generation++
	case "pod":
		uid := types.UID(name)
		c.removePodLocked(uid)
		if b := want.pods[uid]; b != nil {
			c.pods[uid] = *b
			c.placeLocked(*b, 1)
		}
	}
}

// difference is want − got in the dimensions where they differ; nil when
// they agree.
func difference(want, got Vector) Vector {
	var out Vector
	note := func(k v1.ResourceName) {
		if d := want[k] - got[k]; d != 0 {
			if out == nil {
				out = Vector{}
			}
			out[k] = d
		}
	}
	for k := range want {
		note(k)
	}
	for k := range got {
		if _, ok := want[k]; !ok {
			note(k)
		}
	}
	return out
}

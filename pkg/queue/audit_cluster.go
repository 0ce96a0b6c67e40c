package queue

import (
	"strings"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	resourcehelper "k8s.io/component-helpers/resource"
)

// clusterRecords is what the cluster's handlers should have recorded,
// recounted from the informers' caches: every counted node's allocatable,
// every bound, unfinished pod. versions holds each object's
// resourceVersion, so that two looks can tell an object whose event is
// still on its way (it moves) from one the handlers got wrong.
type clusterRecords struct {
	nodes    map[string]Vector
	pods     map[types.UID]boundPod
	versions map[string]string
}

// recountLocked lists the nodes and pods from the informers' caches. c.mu
// held: a handler that has yet to take in what the caches hold runs after
// the audit, and takes it in again.
func (c *cluster) recountLocked() (clusterRecords, error) {
	nodes, err := c.nodeLister.List(labels.Everything())
	if err != nil {
		return clusterRecords{}, err
	}
	pods, err := c.podLister.List(labels.Everything())
	if err != nil {
		return clusterRecords{}, err
	}
	r := clusterRecords{nodes: map[string]Vector{}, pods: map[types.UID]boundPod{}, versions: map[string]string{}}
	for _, n := range nodes {
		if schedulable(n) {
			r.nodes[n.Name] = FromList(n.Status.Allocatable)
		}
		r.versions["node "+n.Name] = n.ResourceVersion
	}
	for _, p := range pods {
		if p.Spec.NodeName == "" || p.Status.Phase == v1.PodSucceeded || p.Status.Phase == v1.PodFailed {
			continue
		}
		_, managed := c.keyOf(p)
		r.pods[p.UID] = boundPod{node: p.Spec.NodeName, requests: FromList(resourcehelper.PodRequests(p, resourcehelper.PodResourcesOptions{})), unmanaged: !managed}
		r.versions["pod "+string(p.UID)] = p.Namespace + "/" + p.Name + "@" + p.ResourceVersion
	}
	return r, nil
}

// differencesLocked lists the objects whose record differs from the
// recount, by name, with the version the recount saw. c.mu held.
func (c *cluster) differencesLocked(r clusterRecords) map[string]string {
	out := map[string]string{}
	for name, v := range r.nodes {
		if old, ok := c.nodes[name]; !ok || !old.Equal(v) {
			out["node "+name] = r.versions["node "+name]
		}
	}
	for name := range c.nodes {
		if _, ok := r.nodes[name]; !ok {
			out["node "+name] = r.versions["node "+name]
		}
	}
	for uid, b := range r.pods {
		if old, ok := c.pods[uid]; !ok || !old.same(b) {
			out["pod "+string(uid)] = r.versions["pod "+string(uid)]
		}
	}
	for uid := range c.pods {
		if _, ok := r.pods[uid]; !ok {
			out["pod "+string(uid)] = r.versions["pod "+string(uid)]
		}
	}
	return out
}

func (b boundPod) same(o boundPod) bool {
	return b.node == o.node && b.unmanaged == o.unmanaged && b.requests.Equal(o.requests)
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
	r, err := c.recountLocked()
	if err != nil {
		return nil, nil, nil, err
	}
	diffs := c.differencesLocked(r)
	before := map[string]Vector{"allocatable": c.allocatable.v.Clone(), "used": c.used.v.Clone(), "unmanaged": c.unmanaged.v.Clone()}
	var repaired []string
	for key, version := range diffs {
		if v, ok := previous[key]; !ok || v != version {
			continue
		}
		repaired = append(repaired, key+" ("+version+")")
		c.repairLocked(key, r)
	}
	// What the records add up to.
	want := map[string]Vector{"allocatable": {}, "used": {}, "unmanaged": {}}
	for _, v := range c.nodes {
		want["allocatable"].Add(v)
	}
	for _, b := range c.pods {
		if _, counted := c.nodes[b.node]; counted {
			want["used"].Add(b.requests)
			if b.unmanaged {
				want["unmanaged"].Add(b.requests)
			}
		}
	}
	drift := map[string]Vector{}
	for name, s := range map[string]*sum{"allocatable": &c.allocatable, "used": &c.used, "unmanaged": &c.unmanaged} {
		if difference(want[name], s.v) != nil {
			s.v, s.shared = want[name], false
			c.generation++
		}
		if d := difference(s.v, before[name]); d != nil {
			drift[name] = d
		}
	}
	c.publishLocked()
	return diffs, drift, repaired, nil
}

// repairLocked makes an object's record the recount's. c.mu held.
func (c *cluster) repairLocked(key string, r clusterRecords) {
	kind, name, _ := strings.Cut(key, " ")
	switch kind {
	case "node":
		if old, ok := c.nodes[name]; ok {
			c.allocatable.own().Sub(old)
			c.countPodsLocked(name, -1)
			delete(c.nodes, name)
		}
		if v, ok := r.nodes[name]; ok {
			c.nodes[name] = v
			c.allocatable.own().Add(v)
			c.countPodsLocked(name, 1)
		}
		c.generation++
	case "pod":
		uid := types.UID(name)
		c.removePodLocked(uid)
		if b, ok := r.pods[uid]; ok {
			c.pods[uid] = b
			c.placeLocked(b, 1)
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

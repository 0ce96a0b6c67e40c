package gang

import (
	"fmt"
	"slices"

	v1 "k8s.io/api/core/v1"
	schedulingv1beta1 "k8s.io/api/scheduling/v1beta1"
	utilvalidation "k8s.io/apimachinery/pkg/util/validation"
	vcv1beta1 "volcano.sh/apis/pkg/apis/scheduling/v1beta1"

	"github.com/muster-sched/muster/apis/scheduling/v1alpha1"
)

// Topology is a gang's topology constraint, by node label keys: Required
// keeps every member in one domain of its key; Preferred asks for the
// tightest level, from its key up, where the gang fits. A Volcano
// PodGroup's networkTopology names a tier instead, resolved against the
// scheduler's levels (Levels).
type Topology struct {
	Required, Preferred string
	// VolcanoTier is networkTopology.highestTierAllowed (0: none set) and
	// VolcanoSoft its mode: hard keeps the gang within one domain of tier
	// N (level N, level 0 being the host); soft prefers the tightest tier.
	VolcanoTier int
	VolcanoSoft bool
}

// IsZero reports whether t constrains nothing.
func (t Topology) IsZero() bool { return t == Topology{} }

// TopologyOf is the constraint a Muster PodGroup or Queue spec gives.
func TopologyOf(s *v1alpha1.TopologySpec) Topology {
	if s == nil {
		return Topology{}
	}
	return Topology{Required: s.Required, Preferred: s.Preferred}
}

// Levels returns the node label keys whose domains a placement tries, in
// order, and the required key ("" for none: the gang may go anywhere once
// no domain fits). A domain tried is also within one domain of the
// required key. levels are the scheduler's, tightest first. A preferred
// key falls back along them one at a time, up to the required key; a key
// not among them has no level above it but the required one.
func (t Topology) Levels(levels []string) (keys []string, required string) {
	req, pref := t.Required, t.Preferred
	if t.VolcanoTier > 0 {
		switch {
		case t.VolcanoSoft && len(levels) > 1:
			pref = levels[1]
		case !t.VolcanoSoft && t.VolcanoTier < len(levels):
			req = levels[t.VolcanoTier]
		}
	}
	p, r := slices.Index(levels, pref), slices.Index(levels, req)
	switch {
	case pref == "" && req == "":
		return nil, ""
	case pref == "" || pref == req || p >= 0 && r >= 0 && p > r:
		return []string{req}, req // a preferred level above the required one is implied
	case p < 0 || req != "" && r < 0:
		keys = []string{pref}
	case r < 0:
		keys = levels[p:]
	default:
		keys = levels[p:r]
	}
	if req != "" {
		keys = append(slices.Clip(keys), req)
	}
	return keys, req
}

// annotatedTopology is the constraint the members' annotations give; they
// must agree.
func annotatedTopology(members []*v1.Pod) (Topology, error) {
	req, err := agreedAnnotation(members, v1alpha1.AnnotationTopologyRequired)
	if err != nil {
		return Topology{}, err
	}
	pref, err := agreedAnnotation(members, v1alpha1.AnnotationTopologyPreferred)
	if err != nil {
		return Topology{}, err
	}
	return Topology{Required: req, Preferred: pref}, nil
}

// agreedAnnotation is the value of the annotation the members carry ("" for
// none); they must agree.
func agreedAnnotation(members []*v1.Pod, key string) (string, error) {
	if len(members) == 0 {
		return "", nil
	}
	first := members[0].Annotations[key]
	for _, p := range members[1:] {
		if v := p.Annotations[key]; v != first {
			return "", fmt.Errorf("members disagree on annotation %s: %s has %q, %s has %q", key, members[0].Name, first, p.Name, v)
		}
	}
	return first, nil
}

// upstreamTopology is a scheduling.k8s.io PodGroup's constraint: its one
// topology key is required.
func upstreamTopology(pg *schedulingv1beta1.PodGroup) Topology {
	if c := pg.Spec.SchedulingConstraints; c != nil && len(c.Topology) > 0 {
		return Topology{Required: c.Topology[0].Key}
	}
	return Topology{}
}

// volcanoTopology is a Volcano PodGroup's networkTopology: mode hard
// (Volcano's default) or soft, and the highest tier allowed (default 1).
func volcanoTopology(pg *vcv1beta1.PodGroup) Topology {
	nt := pg.Spec.NetworkTopology
	if nt == nil {
		return Topology{}
	}
	t := Topology{VolcanoTier: 1, VolcanoSoft: nt.Mode == vcv1beta1.SoftNetworkTopologyMode}
	if nt.HighestTierAllowed != nil && *nt.HighestTierAllowed > 0 {
		t.VolcanoTier = *nt.HighestTierAllowed
	}
	return t
}

// checkTopologyKeys refuses label keys a node could not carry: the gang
// would wait for a domain that cannot exist.
func checkTopologyKeys(t Topology) error {
	for _, k := range []string{t.Required, t.Preferred} {
		if k == "" {
			continue
		}
		if msgs := utilvalidation.IsQualifiedName(k); len(msgs) > 0 {
			return fmt.Errorf("topology key %q is not a node label key: %s", k, msgs[0])
		}
	}
	return nil
}

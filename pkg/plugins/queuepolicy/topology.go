package queuepolicy

import (
	"context"
	"slices"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/klog/v2"

	"github.com/muster-sched/muster/pkg/gang"
	"github.com/muster-sched/muster/pkg/placement"
	"github.com/muster-sched/muster/pkg/queue"
)

// victimsFor chooses the victims that let the gang's members fit: anywhere
// when the gang has no required topology key, else within one domain of
// that key (chooseInDomain). A gang with only a preferred key takes
// victims anywhere: it may be placed anywhere once no domain fits.
func (pl *Plugin) victimsFor(ctx context.Context, snap *queue.Snapshot, inFlight flight, members []*v1.Pod, units []unit, st *gang.Status, need, ahead queue.Vector) ([]unit, map[types.UID]string, error) {
	if _, required := pl.topology(st); required != "" {
		return pl.chooseInDomain(ctx, snap, inFlight, members, units, st, need, ahead, required)
	}
	return pl.chooseVictims(ctx, snap, inFlight, members, units, st, need, ahead, nil)
}

// chooseInDomain chooses the victims of a gang whose members must all be
// within one domain of the node label key required: in the domain where
// the fewest pods are evicted, never in domains the gang cannot use. Each
// domain is tried with its own candidates only (units all of whose pods
// are on its nodes: a gang spread over domains is not taken whole) and
// with the trial placement restricted to its nodes; the domain must also
// hold the gang's members placed before. Between domains, a choice that
// breaks no disruption budget goes first, then the fewest pods, then the
// cheapest by the candidates' order (choice.less), then the tightest
// domain (placement.Rank's order), so bigger domains stay whole.
//
// Cost: a domain is tried only when its free room plus the requests of
// all its candidates covers what the members request (placement.Domains
// and Rank: one pass over the nodes and the candidates' pods). A candidate
// belongs to one domain at most, so the greedy trials of all domains
// together number no more than the candidates, as without topology, plus
// the pruning trials of each domain's choice; each trial filters only the
// domain's nodes. A domain whose free room alone covers the members gets
// one trial without victims first: when the members fit there, no eviction
// helps (they failed for another reason), and nothing is evicted.
func (pl *Plugin) chooseInDomain(ctx context.Context, snap *queue.Snapshot, inFlight flight, members []*v1.Pod, units []unit, st *gang.Status, need, ahead queue.Vector, required string) ([]unit, map[types.UID]string, error) {
	nodes, err := pl.placer.Handle.SnapshotSharedLister().NodeInfos().List()
	if err != nil {
		return nil, nil, err
	}
	domainOf := make(map[string]string, len(nodes))
	for _, n := range nodes {
		if v, ok := n.Node().Labels[required]; ok {
			domainOf[n.Node().Name] = v
		}
	}
	byDomain, removable := unitsByDomain(units, domainOf)
	anchors := sets.New[string]()
	for _, p := range pl.gangs.PlacedMembers(st.Key) {
		anchors.Insert(p.Spec.NodeName)
	}
	amounts := placement.Need(members)
	roomy, _ := placement.Rank(placement.Domains(nodes, required, required, amounts, nil), amounts, required)
	for _, d := range roomy {
		if !d.Nodes.IsSuperset(anchors) {
			continue
		}
		plan, err := pl.fits(ctx, fitTrial{snap: snap, members: members, st: st, need: need, ahead: ahead, nodes: d.Nodes}, nil)
		if err != nil || plan != nil {
			return nil, nil, err // it fits without victims: none helps
		}
	}
	order := make(map[unitID]int, len(units))
	for i, u := range units {
		order[idOf(u)] = i
	}
	possible, _ := placement.Rank(placement.Domains(nodes, required, required, amounts, removable), amounts, required)
	var best *choice
	for _, d := range possible {
		if !d.Nodes.IsSuperset(anchors) || len(byDomain[d.Name]) == 0 {
			continue
		}
		victims, plan, err := pl.pickVictims(ctx, snap, inFlight, members, byDomain[d.Name], st, need, ahead, d.Nodes)
		if err != nil {
			return nil, nil, err
		}
		if plan == nil {
			continue
		}
		if len(victims) == 0 {
			return nil, nil, nil // it fits without victims: none helps
		}
		c := newChoice(d.Name, victims, plan, order)
		if best == nil || c.less(best) {
			best = c
		}
	}
	if best == nil {
		return nil, nil, nil
	}
	klog.FromContext(ctx).V(3).Info("Reclaim chose a topology domain", "gang", st.Key, "key", required, "domain", best.domain,
		"victims", best.pods, "domains", len(possible))
	return best.victims, best.plan, nil
}

// unitsByDomain groups the units, in order, by the domain holding all of
// their pods (domainOf maps a node to its domain), leaving out units on a
// node of no domain or over several; removable lists the pods of the units
// kept, once each.
func unitsByDomain(units []unit, domainOf map[string]string) (map[string][]unit, []placement.PodOnNode) {
	byDomain := map[string][]unit{}
	var removable []placement.PodOnNode
	seen := sets.New[types.UID]()
	for _, u := range units {
		d, ok := domainOfUnit(u, domainOf)
		if !ok {
			continue
		}
		byDomain[d] = append(byDomain[d], u)
		for _, p := range u.pods {
			if !seen.Has(p.UID) {
				seen.Insert(p.UID)
				removable = append(removable, placement.PodOnNode{Pod: p, Node: p.Spec.NodeName})
			}
		}
	}
	return byDomain, removable
}

// domainOfUnit is the domain holding every pod of the unit.
func domainOfUnit(u unit, domainOf map[string]string) (string, bool) {
	var d string
	for i, p := range u.pods {
		v, ok := domainOf[p.Spec.NodeName]
		if !ok || i > 0 && v != d {
			return "", false
		}
		d = v
	}
	return d, len(u.pods) > 0
}

// unitID names a unit among a cycle's candidates: a gang's whole unit, or
// one of its members.
type unitID struct {
	gang  gang.Key
	whole bool
	pod   types.UID
}

func idOf(u unit) unitID {
	return unitID{gang: u.gang, whole: u.whole, pod: u.pods[0].UID}
}

// choice is the victims one domain needs.
type choice struct {
	domain  string
	victims []unit
	plan    map[types.UID]string
	guarded bool
	pods    int
	// ranks are the victims' places in the candidates' order, last first.
	ranks []int
}

func newChoice(domain string, victims []unit, plan map[types.UID]string, order map[unitID]int) *choice {
	c := &choice{domain: domain, victims: victims, plan: plan}
	for _, u := range victims {
		c.guarded = c.guarded || u.guarded
		c.pods += len(u.pods)
		c.ranks = append(c.ranks, order[idOf(u)])
	}
	slices.Sort(c.ranks)
	slices.Reverse(c.ranks)
	return c
}

// less reports whether c is a better choice than o: one that breaks no
// disruption budget (they are taken only when nothing else lets the gang
// fit), then fewer pods, then the victims latest in the candidates' order
// earlier (the least preferred victim of c is preferred to o's, and so on).
func (c *choice) less(o *choice) bool {
	if c.guarded != o.guarded {
		return !c.guarded
	}
	if c.pods != o.pods {
		return c.pods < o.pods
	}
	return slices.Compare(c.ranks, o.ranks) < 0
}

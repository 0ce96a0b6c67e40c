package queuepolicy

import (
	"context"
	"maps"
	"slices"
	"sort"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"

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
// cheapest by the candidates' order (choice.less: never a tie, as no
// candidate is in two domains).
//
// Cost: a domain is tried only when its free room plus the requests of
// all its candidates covers what the members request (placement.Domains
// and Rank: one pass over the nodes and the candidates' pods). Domains are
// tried in the order of the fewest pods they could need (the fewest of
// their largest candidates' pods that cover what their free room lacks),
// then of their first candidate, and one that cannot beat the best choice
// so far on these bounds is skipped: where racks are alike, the first
// one's choice rules most others out. A candidate belongs to one domain at most, so the greedy trials
// of all domains together number no more than the candidates, as without
// topology, plus the pruning trials of each domain's choice; each trial
// filters only the domain's nodes. A domain whose free room alone covers
// the members gets one trial without victims first: when the members fit
// there, no eviction helps (they failed for another reason), and nothing
// is evicted.
func (pl *Plugin) chooseInDomain(ctx context.Context, snap *queue.Snapshot, inFlight flight, members []*v1.Pod, units []unit, st *gang.Status, need, ahead queue.Vector, required string) ([]unit, map[types.UID]string, error) {
	nodes, err := pl.placer.Handle.SnapshotSharedLister().NodeInfos().List()
	if err != nil {
		return nil, nil, err
	}
	anchors := sets.New[string]()
	for _, p := range pl.gangs.PlacedMembers(st.Key) {
		anchors.Insert(p.Spec.NodeName)
	}
	amounts := placement.Advertised(placement.Need(members), nodes)
	trial := fitTrial{snap: snap, members: members, st: st, need: need, ahead: ahead}
	if fits, err := pl.fitsInADomain(ctx, trial, nodes, required, amounts, anchors); fits || err != nil {
		return nil, nil, err // it fits without victims: none helps
	}
	var best *choice
	tries := domainsToTry(nodes, units, required, amounts, anchors)
	for _, tr := range tries {
		if best != nil && !best.guarded && (tr.fewest > best.pods || tr.fewest == best.pods && tr.first > best.ranks[0]) {
			continue // cannot need fewer pods, nor cheaper ones
		}
		victims, plan, err := pl.pickVictims(ctx, snap, inFlight, members, tr.units, st, need, ahead, tr.nodes)
		if err != nil {
			return nil, nil, err
		}
		if plan == nil {
			continue
		}
		if len(victims) == 0 {
			return nil, nil, nil // it fits without victims: none helps
		}
		c := newChoice(tr.name, victims, plan, tr.ranks)
		if best == nil || c.less(best) {
			best = c
		}
	}
	if best == nil {
		return nil, nil, nil
	}
	klog.FromContext(ctx).V(3).Info("Reclaim chose a topology domain", "gang", st.Key, "key", required, "domain", best.domain,
		"victims", best.pods, "domains", len(tries))
	return best.victims, best.plan, nil
}

// fitsInADomain reports whether the members fit, with no victim, in a
// domain of key that holds every anchor, trying only the domains whose
// free room alone covers them.
func (pl *Plugin) fitsInADomain(ctx context.Context, t fitTrial, nodes []fwk.NodeInfo, key string, need placement.Amounts, anchors sets.Set[string]) (bool, error) {
	roomy, _ := placement.Rank(placement.Domains(nodes, key, key, need, nil), need, key)
	for _, d := range roomy {
		if !d.Nodes.IsSuperset(anchors) {
			continue
		}
		t.nodes = d.Nodes
		if plan, err := pl.fits(ctx, t, nil); err != nil || plan != nil {
			return plan != nil, err
		}
	}
	return false, nil
}

// domainTry is a domain of the required key that victims may open for
// the gang.
type domainTry struct {
	name  string
	nodes sets.Set[string]
	// units are its candidates, in order, and ranks their places among
	// all candidates.
	units []unit
	ranks map[unitID]int
	// fewest is the fewest pods its victims could be; first is the place
	// of its first candidate.
	fewest, first int
}

// domainsToTry lists the domains of key that hold every anchor and whose
// free room plus all their candidates' requests covers need, fewest pods
// first, then first candidate first.
func domainsToTry(nodes []fwk.NodeInfo, units []unit, key string, need placement.Amounts, anchors sets.Set[string]) []domainTry {
	domainOf := make(map[string]string, len(nodes))
	for _, n := range nodes {
		if v, ok := n.Node().Labels[key]; ok {
			domainOf[n.Node().Name] = v
		}
	}
	byDomain := map[string]*domainTry{}
	var removable []placement.PodOnNode
	seen := sets.New[types.UID]()
	for i, u := range units {
		name, ok := domainOfUnit(u, domainOf)
		if !ok {
			continue
		}
		tr := byDomain[name]
		if tr == nil {
			tr = &domainTry{name: name, ranks: map[unitID]int{}, first: i}
			byDomain[name] = tr
		}
		tr.units = append(tr.units, u)
		tr.ranks[idOf(u)] = i
		for _, p := range u.pods {
			if !seen.Has(p.UID) {
				seen.Insert(p.UID)
				removable = append(removable, placement.PodOnNode{Pod: p, Node: p.Spec.NodeName})
			}
		}
	}
	possible, _ := placement.Rank(placement.Domains(nodes, key, key, need, removable), need, key)
	var out []domainTry
	for _, d := range possible {
		tr := byDomain[d.Name]
		if tr == nil || !d.Nodes.IsSuperset(anchors) {
			continue
		}
		tr.nodes = d.Nodes
		tr.fewest = fewestPods(lacking(nodes, d.Nodes, need), tr.units)
		out = append(out, *tr)
	}
	sort.SliceStable(out, func(i, j int) bool {
		return out[i].fewest < out[j].fewest || out[i].fewest == out[j].fewest && out[i].first < out[j].first
	})
	return out
}

// lacking is what the domain's free room lacks to cover need.
func lacking(nodes []fwk.NodeInfo, domain sets.Set[string], need placement.Amounts) placement.Amounts {
	short := maps.Clone(need)
	for _, n := range nodes {
		if !domain.Has(n.Node().Name) {
			continue
		}
		alloc, used := n.GetAllocatable(), n.GetRequested()
		for res := range need {
			short[res] -= placement.AmountOf(alloc, res) - placement.AmountOf(used, res)
		}
	}
	return short
}

// fewestPods is the fewest of the units' pods whose requests cover short
// in every resource: the largest pods first.
func fewestPods(short placement.Amounts, units []unit) int {
	var pods []*v1.Pod
	seen := sets.New[types.UID]()
	for _, u := range units {
		for _, p := range u.pods {
			if !seen.Has(p.UID) {
				seen.Insert(p.UID)
				pods = append(pods, p)
			}
		}
	}
	requests := make([]placement.Amounts, len(pods))
	for i, p := range pods {
		requests[i] = placement.Need([]*v1.Pod{p})
	}
	fewest := 0
	for res, lack := range short {
		if lack <= 0 {
			continue
		}
		sizes := make([]int64, len(requests))
		for i, r := range requests {
			sizes[i] = r[res]
		}
		slices.Sort(sizes)
		slices.Reverse(sizes)
		n := 0
		for n < len(sizes) && lack > 0 {
			lack -= sizes[n]
			n++
		}
		fewest = max(fewest, n)
	}
	return fewest
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

func newChoice(domain string, victims []unit, plan map[types.UID]string, ranks map[unitID]int) *choice {
	c := &choice{domain: domain, victims: victims, plan: plan}
	for _, u := range victims {
		c.guarded = c.guarded || u.guarded
		c.pods += len(u.pods)
		c.ranks = append(c.ranks, ranks[idOf(u)])
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

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
// are on its nodes) and with the trial placement restricted to its nodes;
// the domain must also hold the gang's members placed before. Between
// domains, a choice that breaks no disruption budget goes first, then the
// fewest pods, then the cheapest by the candidates' order (choice.less).
//
// Only when no domain opens so is a unit spread over domains (a whole gang
// that straddles them) offered in each domain it touches: its pods
// elsewhere go too, as a gang goes whole, and count among the victims.
// Without this a gang that requires a domain would wait for as long as
// spread gangs hold the room its queue deserves.
//
// Cost: a domain is tried only when its free room plus the requests of
// all its candidates covers what the members request (placement.Domains
// and Rank: one pass over the nodes and the candidates' pods). Domains are
// tried in the order of the fewest pods they could need (the fewest of
// their largest candidates' pods that cover what their free room lacks),
// then of their first candidate, and one that cannot beat the best choice
// so far on these bounds is skipped: where racks are alike, the first
// one's choice rules most others out. In the first pass a candidate
// belongs to one domain at most, so the greedy trials of all domains
// together number no more than the candidates, as without topology, plus
// the pruning trials of each domain's choice; the second pass, run only
// when the first finds nothing and some unit is spread, tries each spread
// unit once more in each domain it touches. Each trial filters only the
// domain's nodes. A domain whose free room alone covers
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
	for _, spread := range []bool{false, true} {
		tries, spreadUnits := domainsToTry(nodes, members, units, required, amounts, anchors, spread)
		if spread && !spreadUnits {
			break // the second pass would try the first's candidates again
		}
		best, fits, err := pl.bestDomain(ctx, snap, inFlight, members, st, need, ahead, tries)
		if err != nil || fits {
			return nil, nil, err // it fits without victims: none helps
		}
		if best != nil {
			klog.FromContext(ctx).V(3).Info("Reclaim chose a topology domain", "gang", st.Key, "key", required, "domain", best.domain,
				"victims", best.pods, "domains", len(tries), "spreadGangs", spread)
			return best.victims, best.plan, nil
		}
	}
	return nil, nil, nil
}

// bestDomain tries the domains in order and returns the best choice, nil
// when none opens a domain; fits reports that the members fit in one
// without victims.
func (pl *Plugin) bestDomain(ctx context.Context, snap *queue.Snapshot, inFlight flight, members []*v1.Pod, st *gang.Status, need, ahead queue.Vector, tries []domainTry) (best *choice, fits bool, err error) {
	for _, tr := range tries {
		if best != nil && !best.guarded && (tr.fewest > best.pods || tr.fewest == best.pods && tr.first > best.ranks[0]) {
			continue // cannot need fewer pods, nor cheaper ones
		}
		victims, plan, err := pl.pickVictims(ctx, snap, inFlight, members, tr.units, st, need, ahead, tr.nodes)
		if err != nil {
			return nil, false, err
		}
		if plan == nil {
			continue
		}
		if len(victims) == 0 {
			return nil, true, nil
		}
		c := newChoice(tr.name, victims, plan, tr.ranks)
		if best == nil || c.less(best) {
			best = c
		}
	}
	return best, false, nil
}

// fitsInADomain reports whether the members fit, with no victim, in a
// domain of key that holds every anchor, trying only the domains whose
// free room alone covers them.
func (pl *Plugin) fitsInADomain(ctx context.Context, t fitTrial, nodes []fwk.NodeInfo, key string, need placement.Amounts, anchors sets.Set[string]) (bool, error) {
	roomy, _ := placement.Rank(placement.Domains(nodes, key, key, t.members, need, nil), need, key)
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
// first, then first candidate first. A domain's candidates are the units
// all of whose pods are on its nodes and, with spread, the units with some
// pod there; spreadUnits reports whether any unit is spread over domains.
func domainsToTry(nodes []fwk.NodeInfo, members []*v1.Pod, units []unit, key string, need placement.Amounts, anchors sets.Set[string], spread bool) (tries []domainTry, spreadUnits bool) {
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
		names := domainsOfUnit(u, domainOf)
		if len(names) > 1 {
			spreadUnits = true
			if !spread {
				continue
			}
		}
		for _, name := range names {
			tr := byDomain[name]
			if tr == nil {
				tr = &domainTry{name: name, ranks: map[unitID]int{}, first: i}
				byDomain[name] = tr
			}
			tr.units = append(tr.units, u)
			tr.ranks[idOf(u)] = i
		}
		if len(names) == 0 {
			continue
		}
		for _, p := range u.pods {
			if !seen.Has(p.UID) {
				seen.Insert(p.UID)
				removable = append(removable, placement.PodOnNode{Pod: p, Node: p.Spec.NodeName})
			}
		}
	}
	possible, _ := placement.Rank(placement.Domains(nodes, key, key, members, need, removable), need, key)
	for _, d := range possible {
		tr := byDomain[d.Name]
		if tr == nil || !d.Nodes.IsSuperset(anchors) {
			continue
		}
		tr.nodes = d.Nodes
		tr.fewest = fewestPods(lacking(nodes, d.Nodes, need), tr.units)
		tries = append(tries, *tr)
	}
	sort.SliceStable(tries, func(i, j int) bool {
		return tries[i].fewest < tries[j].fewest || tries[i].fewest == tries[j].fewest && tries[i].first < tries[j].first
	})
	return tries, spreadUnits
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

// domainsOfUnit are the domains holding the unit's pods, in the order of
// its pods; none when a pod is on a node of no domain.
func domainsOfUnit(u unit, domainOf map[string]string) []string {
	var out []string
	for _, p := range u.pods {
		v, ok := domainOf[p.Spec.NodeName]
		if !ok {
			return nil
		}
		if !slices.Contains(out, v) {
			out = append(out, v)
		}
	}
	return out
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
// Two domains tie only on the same spread victims: the first tried stays.
func (c *choice) less(o *choice) bool {
	if c.guarded != o.guarded {
		return !c.guarded
	}
	if c.pods != o.pods {
		return c.pods < o.pods
	}
	return slices.Compare(c.ranks, o.ranks) < 0
}

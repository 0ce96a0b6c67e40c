package placement

import (
	"context"
	"fmt"
	"sort"
	"strings"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/util/sets"
	fwk "k8s.io/kube-scheduler/framework"

	"github.com/muster-sched/muster/pkg/requests"
)

// Domain is the nodes that share one value of a topology key, and of the
// required key when there is one.
type Domain struct {
	Name  string
	Nodes sets.Set[string]
	// free is the room the nodes have left, for the resources the gang
	// needs.
	free Amounts
}

// Amounts are quantities of resources: milli-units for cpu, units
// otherwise.
type Amounts map[v1.ResourceName]int64

// Need sums the requests of pods.
func Need(pods []*v1.Pod) Amounts {
	need := Amounts{}
	for _, p := range pods {
		for name, q := range requests.Of(p) {
			if name == v1.ResourceCPU {
				need[name] += q.MilliValue()
			} else {
				need[name] += q.Value()
			}
		}
	}
	return need
}

// Domains groups the nodes by their values of key and required (""
// for none); a node without the labels is in no domain. The free room of
// each is counted for the resources need names, with removed taken off
// their nodes. The room of a node no member can take (cordoned, tainted
// against them, outside their required node affinity) is not counted;
// the node stays in its domain, where members placed before may be.
func Domains(nodes []fwk.NodeInfo, key, required string, members []*v1.Pod, need Amounts, removed []PodOnNode) []Domain {
	takers := takersOf(members)
	freed := map[string]Amounts{}
	for _, r := range removed {
		a := freed[r.Node]
		if a == nil {
			a = Amounts{}
			freed[r.Node] = a
		}
		for name, v := range Need([]*v1.Pod{r.Pod}) {
			a[name] += v
		}
	}
	byName := map[string]*Domain{}
	var names []string
	for _, n := range nodes {
		node := n.Node()
		value, ok := node.Labels[key]
		if !ok {
			continue
		}
		name := value
		if required != "" && required != key {
			r, ok := node.Labels[required]
			if !ok {
				continue
			}
			name = r + "/" + value
		}
		d := byName[name]
		if d == nil {
			d = &Domain{Name: name, Nodes: sets.New[string](), free: Amounts{}}
			byName[name] = d
			names = append(names, name)
		}
		d.Nodes.Insert(node.Name)
		if !takers.take(node) {
			continue
		}
		alloc, used := n.GetAllocatable(), n.GetRequested()
		for res := range need {
			d.free[res] += AmountOf(alloc, res) - AmountOf(used, res) + freed[node.Name][res]
		}
	}
	sort.Strings(names)
	out := make([]Domain, 0, len(names))
	for _, name := range names {
		out = append(out, *byName[name])
	}
	return out
}

// AmountOf is r's quantity of the resource, in Amounts' units.
func AmountOf(r fwk.Resource, name v1.ResourceName) int64 {
	switch name {
	case v1.ResourceCPU:
		return r.GetMilliCPU()
	case v1.ResourceMemory:
		return r.GetMemory()
	case v1.ResourceEphemeralStorage:
		return r.GetEphemeralStorage()
	}
	return r.GetScalarResources()[name]
}

// Rank returns the domains whose free room covers need, tightest first,
// so that bigger domains stay whole: the one where the gang takes the
// largest share of the free room of some resource (its dominant one
// there), ties going to the least room left over. When none fits, why
// names the closest and what it lacks.
func Rank(domains []Domain, need Amounts, key string) (fit []Domain, why string) {
	type scored struct {
		d               Domain
		score, leftOver float64
	}
	var fits, short []scored
	for _, d := range domains {
		var dominant, over, under float64
		for res, n := range need {
			if n <= 0 {
				continue
			}
			free := d.free[res]
			if left := free - n; left >= 0 {
				over += float64(left) / float64(n)
				dominant = max(dominant, float64(n)/float64(max(free, 1)))
			} else {
				under += float64(-left) / float64(n)
			}
		}
		if under == 0 {
			fits = append(fits, scored{d, -dominant, over})
		} else {
			short = append(short, scored{d, under, 0})
		}
	}
	byScore := func(s []scored) {
		sort.SliceStable(s, func(i, j int) bool {
			return s[i].score < s[j].score || s[i].score == s[j].score && s[i].leftOver < s[j].leftOver
		})
	}
	byScore(fits)
	for _, s := range fits {
		fit = append(fit, s.d)
	}
	if len(fit) > 0 {
		return fit, ""
	}
	if len(short) == 0 {
		return nil, fmt.Sprintf("no node has label %s", key)
	}
	byScore(short)
	best := short[0].d
	var wants, has []string
	for _, res := range sortedNames(need) {
		if need[res] > best.free[res] {
			wants = append(wants, format(res, need[res]))
			has = append(has, format(res, max(best.free[res], 0)))
		}
	}
	return nil, fmt.Sprintf("needs %s in one %s; the best (%s) has %s free",
		strings.Join(wants, " and "), key, best.Name, strings.Join(has, " and "))
}

func sortedNames(a Amounts) []v1.ResourceName {
	names := make([]v1.ResourceName, 0, len(a))
	for n := range a {
		names = append(names, n)
	}
	sort.Slice(names, func(i, j int) bool { return names[i] < names[j] })
	return names
}

// format renders "16 nvidia.com/gpu", "4 cpu", "64Gi memory".
func format(name v1.ResourceName, v int64) string {
	var q *resource.Quantity
	switch name {
	case v1.ResourceCPU:
		q = resource.NewMilliQuantity(v, resource.DecimalSI)
	case v1.ResourceMemory, v1.ResourceEphemeralStorage:
		q = resource.NewQuantity(v, resource.BinarySI)
	default:
		q = resource.NewQuantity(v, resource.DecimalSI)
	}
	return q.String() + " " + string(name)
}

// MaxDomainTries bounds the domains of one level a placement tries, the
// tightest first: each try is a trial placement of the whole gang, and
// domains whose room covers the gang but whose nodes do not take it (its
// members too big for any one node, affinities) could be tried by the
// thousand at the host level.
const MaxDomainTries = 8

// Advertised keeps of need the resources some node has allocatable: one
// that only devices provide (DRA extended resources) is left to the trial
// placement.
func Advertised(need Amounts, nodes []fwk.NodeInfo) Amounts {
	out := Amounts{}
	for name, v := range need {
		for _, n := range nodes {
			if AmountOf(n.GetAllocatable(), name) > 0 {
				out[name] = v
				break
			}
		}
	}
	return out
}

// PlaceInDomains places the trial's members within one domain of the
// first key in keys where some domain takes them whole, trying each
// level's domains tightest first (Rank). Each domain is also within one
// domain of required, and holds every node of anchors (members placed
// before). When no domain of any key fits, a gang with no required key
// is placed anywhere; one with a required key is not, and the message
// says why the required level failed.
func (pl *Placer) PlaceInDomains(ctx context.Context, t Trial, keys []string, required string, anchors sets.Set[string]) (Result, string, error) {
	if len(keys) == 0 {
		return pl.Place(ctx, t)
	}
	nodes, err := pl.Handle.SnapshotSharedLister().NodeInfos().List()
	if err != nil {
		return nil, "", err
	}
	need := Advertised(Need(t.Members), nodes)
	var why string
	for _, key := range keys {
		domains := Domains(nodes, key, required, t.Members, need, t.Removed)
		held := domains[:0]
		for _, d := range domains {
			if d.Nodes.IsSuperset(anchors) {
				held = append(held, d)
			}
		}
		fit, short := Rank(held, need, key)
		if len(domains) > 0 && len(held) == 0 {
			short = fmt.Sprintf("its placed members are not within one %s", key)
		}
		why = short
		for i, d := range fit[:min(len(fit), MaxDomainTries)] {
			t.Nodes = d.Nodes
			result, msg, err := pl.Place(ctx, t)
			if err != nil || msg == "" {
				return result, msg, err
			}
			if i == 0 {
				why = fmt.Sprintf("no %s takes it whole (tried %d of %d with the room); in %s: %s",
					key, min(len(fit), MaxDomainTries), len(fit), d.Name, msg)
			}
		}
	}
	if required != "" {
		return nil, why, nil
	}
	t.Nodes = nil
	return pl.Place(ctx, t)
}

package binpack

import (
	fwk "k8s.io/kube-scheduler/framework"
)

// Domain-aware scoring. With L domain levels a node scores
//
//	100 · (f + Σ_l p_l) ÷ (1 + L),    p_l = (u + s_d + φ_d) ÷ 3
//
// f is the node's fill after placement, as without levels; d is the node's
// domain at level l: the nodes sharing its value of the level's label, or
// the node alone if it lacks the label. Over the weighted resources the pod
// requests, u and s_d are the weighted shares of those that the node and d
// already use, and φ_d is d's fill, Σ used ÷ Σ allocatable.
//
// A pod placed on a used node keeps every whole node and domain whole; on
// an empty node it breaks that node, and its domain if that was empty too.
// For nodes of one size, when every resource is used alike (u, s_d ∈ {0,1}):
//   - a used node earns p_l ≥ 2/3 and more fill than an empty node, which
//     earns p_l < 2/3, so it never scores below one;
//   - an empty node earns p_l ≥ 1/3 in a used domain and 0 in an empty one,
//     so at equal fill it beats a node in an empty domain by at least
//     33/(1+L) points, and the fuller domain wins;
//   - within one domain only f and u differ, and both favour the fuller
//     node, so node fill decides.
//
// Shares rather than flags keep a resource that every node uses (the cpu
// of daemon pods) from making all nodes and domains look used.

// usage returns, over the pod's weighted resources, the weighted share of
// those in use and the weighted fill (used ÷ allocatable, at most 1 each),
// both in [0, 1].
func (s *preScoreState) usage(used, allocatable []int64) (share, fill float64) {
	for i := range s.requests {
		w := float64(s.weights[i])
		if used[i] > 0 {
			share += w
		}
		if allocatable[i] > 0 {
			fill += w * min(1, float64(used[i])/float64(allocatable[i]))
		}
	}
	return share / float64(s.weightSum), fill / float64(s.weightSum)
}

// domainUsage returns, per level, each domain's s_d + φ_d keyed by its
// label value. Nodes without a level's label are left out of it.
func domainUsage(s *preScoreState, levels []string, nodeInfos []fwk.NodeInfo) []map[string]float64 {
	n := len(s.requests)
	// totals[l][value] holds the domain's used amounts, then its allocatable.
	totals := make([]map[string][]int64, len(levels))
	for l := range levels {
		totals[l] = map[string][]int64{}
	}
	node := make([]int64, 2*n)
	for _, ni := range nodeInfos {
		if ni.Node() == nil {
			continue
		}
		for i, r := range s.requests {
			node[n+i], node[i] = allocatableAndUsed(ni, r.name)
		}
		labels := ni.Node().Labels
		for l, key := range levels {
			value, ok := labels[key]
			if !ok {
				continue
			}
			t := totals[l][value]
			if t == nil {
				t = make([]int64, 2*n)
				totals[l][value] = t
			}
			for i := range t {
				t[i] += node[i]
			}
		}
	}
	sums := make([]map[string]float64, len(levels))
	for l, domains := range totals {
		sums[l] = make(map[string]float64, len(domains))
		for value, t := range domains {
			share, fill := s.usage(t[:n], t[n:])
			sums[l][value] = share + fill
		}
	}
	return sums
}

// domainScore scores a node by its own fill and its domains' usage, in
// [0, 100], and 0 when the pod would overflow the node.
func domainScore(s *preScoreState, levels []string, nodeInfo fwk.NodeInfo) int64 {
	if s.weightSum == 0 {
		return fwk.MinNodeScore
	}
	n := len(s.requests)
	var buf [16]int64 // keeps the common few resources off the heap
	amounts := buf[:]
	if 2*n > len(buf) {
		amounts = make([]int64, 2*n)
	}
	used, allocatable := amounts[:n], amounts[n:2*n]
	var after float64
	for i, r := range s.requests {
		allocatable[i], used[i] = allocatableAndUsed(nodeInfo, r.name)
		if allocatable[i] == 0 {
			continue // counts with its weight, contributes nothing
		}
		if used[i]+r.amount > allocatable[i] {
			return fwk.MinNodeScore
		}
		after += float64(s.weights[i]) * float64(used[i]+r.amount) / float64(allocatable[i])
	}
	share, fill := s.usage(used, allocatable)
	own := share + fill // s_d + φ_d of the node as its own domain
	sum := after / float64(s.weightSum)
	var labels map[string]string
	if node := nodeInfo.Node(); node != nil {
		labels = node.Labels
	}
	for l, key := range levels {
		domain := own
		if value, ok := labels[key]; ok {
			if d, ok := s.domains[l][value]; ok {
				domain = d
			}
		}
		sum += (share + domain) / 3
	}
	return int64(float64(fwk.MaxNodeScore) * sum / float64(1+len(levels)))
}

package scenario

import (
	"fmt"
	"math"

	"github.com/muster-sched/muster/pkg/simulator"
)

// Check evaluates the scenario's expectations against its results, records
// each failed bound on its result, and returns every failure.
func Check(s *Scenario, results []*Result) []string {
	byProfile := map[string]*Result{}
	for _, r := range results {
		byProfile[r.Profile] = r
	}
	var all []string
	for _, e := range s.Expect {
		for _, r := range results {
			if e.Profile != "" && e.Profile != r.Profile {
				continue
			}
			for _, f := range e.check(r, byProfile) {
				msg := fmt.Sprintf("%s/%s: %s", s.Name, r.Profile, f)
				r.Failures = append(r.Failures, f)
				all = append(all, msg)
			}
		}
	}
	return all
}

// check returns the bounds of e that r fails.
func (e *Expectation) check(r *Result, byProfile map[string]*Result) []string {
	var out []string
	maxInt := func(name string, bound *int, got int) {
		if bound != nil && got > *bound {
			out = append(out, fmt.Sprintf("%s is %d, bound %d", name, got, *bound))
		}
	}
	maxInt("partialGangs", e.PartialGangs, r.PartialGangs)
	maxInt("unscheduledPods", e.MaxUnscheduledPods, r.UnscheduledPods)
	maxInt("evictions", e.MaxEvictions, r.Evictions)
	maxInt("gangsBrokenByEviction", e.MaxGangsBroken, r.GangsBroken)
	if e.MaxShareDeviation != nil && r.MaxShareDeviation > *e.MaxShareDeviation {
		out = append(out, fmt.Sprintf("maxShareDeviation is %.4f, bound %.4f", r.MaxShareDeviation, *e.MaxShareDeviation))
	}
	if e.MinJainIndex != nil && r.JainIndex < *e.MinJainIndex {
		out = append(out, fmt.Sprintf("jainIndex is %.4f, bound ≥ %.4f", r.JainIndex, *e.MinJainIndex))
	}
	if e.MaxTimeToFairShare != nil {
		out = append(out, e.checkFairShareBursts(r)...)
	}
	if e.MaxPodLatencyP99 != nil && r.PodLatencyP99 > *e.MaxPodLatencyP99 {
		out = append(out, fmt.Sprintf("podLatencyP99 is %.3fs, bound %.3fs", r.PodLatencyP99, *e.MaxPodLatencyP99))
	}
	if e.MaxAttemptsPerPod != nil && r.AttemptsPerPod > *e.MaxAttemptsPerPod {
		out = append(out, fmt.Sprintf("attemptsPerPod is %.3f, bound %.3f", r.AttemptsPerPod, *e.MaxAttemptsPerPod))
	}
	for _, g := range sortedKeys(e.MinFreeNodes) {
		if got := r.FreeNodes[g]; got < e.MinFreeNodes[g] {
			out = append(out, fmt.Sprintf("free %s nodes at peak is %d, bound ≥ %d", g, got, e.MinFreeNodes[g]))
		}
	}
	out = append(out, e.checkTopology(r)...)
	for _, rb := range e.Relative {
		for _, other := range rb.others(r.Profile, byProfile) {
			mine, theirs := metricValue(r, rb.Metric), metricValue(other, rb.Metric)
			ratio := ratioOf(mine, theirs)
			if rb.Max != nil && ratio > *rb.Max {
				out = append(out, fmt.Sprintf("%s is %.4g × %s's (%.4g vs %.4g), bound ≤ %g×", rb.Metric, ratio, other.Profile, mine, theirs, *rb.Max))
			}
			if rb.Min != nil && ratio < *rb.Min {
				out = append(out, fmt.Sprintf("%s is %.4g × %s's (%.4g vs %.4g), bound ≥ %g×", rb.Metric, ratio, other.Profile, mine, theirs, *rb.Min))
			}
		}
	}
	return out
}

// others are the results a relative bound compares profile's with: Of's,
// or with Of "others" every other profile's, in name order.
func (rb *RelativeBound) others(profile string, byProfile map[string]*Result) []*Result {
	if rb.Of != ofOthers {
		if other := byProfile[rb.Of]; other != nil && rb.Of != profile {
			return []*Result{other}
		}
		return nil
	}
	var out []*Result
	for _, name := range sortedKeys(byProfile) {
		if name != profile {
			out = append(out, byProfile[name])
		}
	}
	return out
}

// checkTopology returns the topology bounds of e that r fails. A
// placement bound fails when no gang it bounds was placed: a bound that
// held for want of gangs would say nothing.
func (e *Expectation) checkTopology(r *Result) []string {
	var out []string
	for _, b := range []struct {
		name            string
		bound           *float64
		gangs, inDomain int
		share           float64
	}{
		{"topologyRequiredPlacement", e.MinRequiredPlacement, r.RequiredGangs, r.RequiredInDomain, r.RequiredPlacement},
		{"topologyPreferredPlacement", e.MinPreferredPlacement, r.PreferredGangs, r.PreferredInDomain, r.PreferredPlacement},
	} {
		switch {
		case b.bound == nil:
		case b.gangs == 0:
			out = append(out, fmt.Sprintf("%s: no gang it bounds was placed, bound ≥ %g", b.name, *b.bound))
		case b.share < *b.bound:
			out = append(out, fmt.Sprintf("%s is %.4g (%d of %d gangs in one domain), bound ≥ %g", b.name, b.share, b.inDomain, b.gangs, *b.bound))
		}
	}
	if e.MinWholeFreeNodes != nil && r.MeanWholeFreeNodes < *e.MinWholeFreeNodes {
		out = append(out, fmt.Sprintf("meanWholeFreeNodes is %.2f, bound ≥ %g", r.MeanWholeFreeNodes, *e.MinWholeFreeNodes))
	}
	return out
}

// checkFairShareBursts returns the bursts of r after which the queues took
// longer than the bound to be at their fair shares, or never got there.
func (e *Expectation) checkFairShareBursts(r *Result) []string {
	var out []string
	bound := *e.MaxTimeToFairShare
	for _, b := range r.FairShareBursts {
		switch {
		case !b.Reached:
			out = append(out, fmt.Sprintf("timeToFairShareSeconds after %s: never at fair shares (%.2f to the end of the run), bound %g", b.Workload, b.SecondsToFair, bound))
		case b.SecondsToFair > bound:
			out = append(out, fmt.Sprintf("timeToFairShareSeconds after %s is %.2f, bound %g", b.Workload, b.SecondsToFair, bound))
		}
	}
	return out
}

// ratioOf is a/b, with 0/0 = 1 and a/0 = +Inf.
func ratioOf(a, b float64) float64 {
	switch {
	case b == 0 && a == 0:
		return 1
	case b == 0:
		return math.Inf(1)
	}
	return a / b
}

// metricValue is a relative bound's metric of a result; wastedReservation
// sums its resources with memory in GiB.
func metricValue(r *Result, metric string) float64 {
	switch metric {
	case "makespan":
		return r.MakespanSeconds
	case "podsPerSecond":
		return r.PodsPerSecond
	case "attemptsPerPod":
		return r.AttemptsPerPod
	case "gangLatencyP50":
		return r.GangLatencyP50
	case "gangLatencyP99":
		return r.GangLatencyP99
	case "podLatencyP99":
		return r.PodLatencyP99
	case "algorithmMicrosPerPod":
		return r.AlgorithmMicrosPerPod
	case "preFilterMicrosPerPod":
		return r.PreFilterMicrosPerPod
	case "reserveMicrosPerPod":
		return r.ReserveMicrosPerPod
	case "permitMicrosPerPod":
		return r.PermitMicrosPerPod
	case "gpuUtilization":
		return r.MeanUtilization[string(simulator.GPUResource)]
	case "requiredPlacement":
		return r.RequiredPlacement
	case "preferredPlacement":
		return r.PreferredPlacement
	case "wholeFreeNodes":
		return r.MeanWholeFreeNodes
	case "wholeFreeNodeGPUs":
		return r.MeanWholeFreeNodeGPUs
	case "rackWholeFreeNodes":
		return r.MeanRackWholeFreeNodes
	case "rackFreeGPUs":
		return r.MeanRackFreeGPUs
	case "wastedReservation":
		sum := 0.0
		for _, v := range r.WastedReservation {
			sum += v
		}
		return sum
	}
	return math.NaN()
}

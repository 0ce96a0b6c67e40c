package scenario

import (
	"encoding/json"
	"fmt"
	"io"
	"sort"
	"strings"
	"text/tabwriter"
)

// Report is the results of one scenario, for output.
type Report struct {
	Scenario    string  `json:"scenario"`
	File        string  `json:"file"`
	Description string  `json:"description,omitempty"`
	Nodes       int     `json:"nodes"`
	Pods        int     `json:"pods"`
	Speedup     float64 `json:"speedup"`
	// FairShareTolerance is the scenario's, when it has queues.
	FairShareTolerance float64 `json:"fairShareTolerance,omitempty"`
	// Racks is the number of racks, when node groups have a topology.
	Racks   int       `json:"racks,omitempty"`
	Results []*Result `json:"results"`
}

// NewReport gathers a scenario's results.
func NewReport(s *Scenario, results []*Result) *Report {
	nodes := 0
	for _, g := range s.Cluster.Nodes {
		nodes += g.Count
	}
	rep := &Report{Scenario: s.Name, File: s.file, Description: s.Description, Nodes: nodes, Pods: s.PodCount(), Speedup: s.Speedup, Racks: s.Racks(), Results: results}
	if len(s.Queues) > 0 {
		rep.FairShareTolerance = s.fairShareTolerance()
	}
	return rep
}

// WriteJSON writes the reports as one JSON document: {"scenarios": [...]}.
// withSeries keeps the sampled series.
func WriteJSON(w io.Writer, reports []*Report, withSeries bool) error {
	if !withSeries {
		trimmed := make([]*Report, len(reports))
		for i, rep := range reports {
			c := *rep
			c.Results = nil
			for _, r := range rep.Results {
				rc := *r
				rc.Series = nil
				c.Results = append(c.Results, &rc)
			}
			trimmed[i] = &c
		}
		reports = trimmed
	}
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(struct {
		Scenarios []*Report `json:"scenarios"`
	}{reports})
}

// row is one line of the side-by-side table.
type row struct {
	name string
	cell func(*Result) string
	// show says whether the row means anything for the scenario.
	show func(*Report) bool
}

func always(*Report) bool { return true }

// repeated reports whether the figures are medians of several runs.
func repeated(rep *Report) bool {
	for _, r := range rep.Results {
		if r.Runs > 1 {
			return true
		}
	}
	return false
}

func hasGangs(rep *Report) bool {
	for _, r := range rep.Results {
		if r.Gangs > 0 {
			return true
		}
	}
	return false
}

func hasQueues(rep *Report) bool {
	for _, r := range rep.Results {
		if len(r.QueueShares) > 0 {
			return true
		}
	}
	return false
}

func hasBursts(rep *Report) bool {
	for _, r := range rep.Results {
		if len(r.FairShareBursts) > 0 {
			return true
		}
	}
	return false
}

func hasEvictions(rep *Report) bool {
	for _, r := range rep.Results {
		if r.Evictions > 0 || r.Preemptors > 0 {
			return true
		}
	}
	return false
}

func hasRequiredTopology(rep *Report) bool {
	for _, r := range rep.Results {
		if r.RequiredGangs > 0 {
			return true
		}
	}
	return false
}

func hasPreferredTopology(rep *Report) bool {
	for _, r := range rep.Results {
		if r.PreferredGangs > 0 {
			return true
		}
	}
	return false
}

func hasGPUs(rep *Report) bool {
	for _, r := range rep.Results {
		if _, ok := r.MeanUtilization["nvidia.com/gpu"]; ok {
			return true
		}
	}
	return false
}

func hasRacks(rep *Report) bool { return rep.Racks > 0 && hasGPUs(rep) }

// inDomain shows a placement share with its counts.
func inDomain(gangs, in int, share float64) string {
	if gangs == 0 {
		return "-"
	}
	return fmt.Sprintf("%.0f%% (%d/%d)", 100*share, in, gangs)
}

var rows = []row{
	{"pods bound / unscheduled", func(r *Result) string { return fmt.Sprintf("%d / %d", r.BoundPods, r.UnscheduledPods) }, always},
	{"makespan (s)", func(r *Result) string {
		if !r.Complete {
			return fmt.Sprintf("≥ %.1f", r.MakespanSeconds)
		}
		return fmt.Sprintf("%.1f", r.MakespanSeconds)
	}, always},
	{"pods/s", func(r *Result) string { return fmt.Sprintf("%.1f", r.PodsPerSecond) }, always},
	{"pods/s of each run", func(r *Result) string {
		runs := make([]string, len(r.RunsPodsPerSecond))
		for i, v := range r.RunsPodsPerSecond {
			runs[i] = fmt.Sprintf("%.0f", v)
		}
		return strings.Join(runs, " ")
	}, repeated},
	{"first bind (s)", func(r *Result) string { return fmt.Sprintf("%.2f", r.FirstBindSeconds) }, always},
	{"process CPU per pod (ms)", func(r *Result) string { return fmt.Sprintf("%.2f", r.CPUMillisPerPod) }, always},
	{"attempts/pod", func(r *Result) string { return fmt.Sprintf("%.2f", r.AttemptsPerPod) }, always},
	{"scheduling algorithm (µs/pod)", func(r *Result) string { return fmt.Sprintf("%.0f", r.AlgorithmMicrosPerPod) }, always},
	{"PreFilter/Reserve/Permit (µs/pod)", func(r *Result) string {
		return fmt.Sprintf("%.1f / %.1f / %.1f", r.PreFilterMicrosPerPod, r.ReserveMicrosPerPod, r.PermitMicrosPerPod)
	}, always},
	{"gangs bound", func(r *Result) string { return fmt.Sprintf("%d/%d", r.GangsBound, r.Gangs) }, hasGangs},
	{"gang latency p50/p99 (s)", func(r *Result) string {
		if r.GangsBound == 0 {
			return "-"
		}
		return fmt.Sprintf("%.2f / %.2f", r.GangLatencyP50, r.GangLatencyP99)
	}, hasGangs},
	{"partial gangs", func(r *Result) string { return fmt.Sprint(r.PartialGangs) }, hasGangs},
	{"plain pod latency p50/p99 (s)", func(r *Result) string {
		return fmt.Sprintf("%.2f / %.2f", r.PodLatencyP50, r.PodLatencyP99)
	}, always},
	{"wasted reservation", func(r *Result) string { return resourceSeconds(r.WastedReservation) }, always},
	{"  of never-bound pods", func(r *Result) string { return resourceSeconds(r.NeverBoundReservation) }, always},
	{"mean utilization", func(r *Result) string { return percentages(r.MeanUtilization) }, always},
	{"peak utilization", func(r *Result) string { return percentages(r.PeakUtilization) }, always},
	{"max share deviation", func(r *Result) string { return fmt.Sprintf("%.3f", r.MaxShareDeviation) }, hasQueues},
	{"Jain index (share/fair share)", func(r *Result) string { return fmt.Sprintf("%.3f", r.JainIndex) }, hasQueues},
	{"Jain index (share/weight)", func(r *Result) string { return fmt.Sprintf("%.3f", r.WeightedJainIndex) }, hasQueues},
	{"idle while a pod that fits waits", func(r *Result) string { return resourceSeconds(r.IdleWhileWaiting) }, always},
	{"time to fair share (s)", func(r *Result) string {
		if len(r.FairShareBursts) == 0 {
			return "-"
		}
		for _, b := range r.FairShareBursts {
			if !b.Reached {
				return fmt.Sprintf("≥ %.2f", r.TimeToFairShareSeconds) // the run ended first
			}
		}
		return fmt.Sprintf("%.2f", r.TimeToFairShareSeconds)
	}, hasBursts},
	{"contended time (s)", func(r *Result) string { return fmt.Sprintf("%.1f", r.ContendedSeconds) }, hasQueues},
	{"nodes used", func(r *Result) string { return fmt.Sprint(r.NodesUsed) }, always},
	{"free nodes at peak", func(r *Result) string { return freeNodes(r.FreeNodes) }, always},
	{"whole free GPU nodes / their GPUs / free GPUs (mean)", func(r *Result) string {
		return fmt.Sprintf("%.1f / %.0f / %.0f", r.MeanWholeFreeNodes, r.MeanWholeFreeNodeGPUs, r.MeanFreeGPUs)
	}, hasGPUs},
	{"  best rack: whole free nodes / free GPUs", func(r *Result) string {
		return fmt.Sprintf("%.1f / %.1f", r.MeanRackWholeFreeNodes, r.MeanRackFreeGPUs)
	}, hasRacks},
	{"required topology: gangs in one domain", func(r *Result) string {
		return inDomain(r.RequiredGangs, r.RequiredInDomain, r.RequiredPlacement)
	}, hasRequiredTopology},
	{"preferred topology: gangs in one domain", func(r *Result) string {
		return inDomain(r.PreferredGangs, r.PreferredInDomain, r.PreferredPlacement)
	}, hasPreferredTopology},
	{"evictions / preemptors", func(r *Result) string { return fmt.Sprintf("%d / %d", r.Evictions, r.Preemptors) }, always},
	{"victims per preemptor", func(r *Result) string {
		if r.Preemptors == 0 {
			return "-" // no preemptor seen: no nomination, no victim Event
		}
		return fmt.Sprintf("%.2f", r.VictimsPerPreemptor)
	}, hasEvictions},
	{"victims per reclaimed pod", func(r *Result) string {
		if r.ReclaimedPods == 0 {
			return "-"
		}
		return fmt.Sprintf("%.2f (%d pods)", r.VictimsPerReclaimedPod, r.ReclaimedPods)
	}, hasEvictions},
	{"gangs broken by eviction", func(r *Result) string { return fmt.Sprint(r.GangsBroken) }, hasGangs},
	{"peak RSS / heap (MiB)", func(r *Result) string {
		return fmt.Sprintf("%d / %d", r.PeakRSSBytes>>20, r.PeakHeapBytes>>20)
	}, always},
	{"wall time (s)", func(r *Result) string { return fmt.Sprintf("%.1f", r.WallSeconds) }, always},
}

// WriteTable writes a scenario's results side by side, one column per
// profile, and the bounds that failed.
func WriteTable(w io.Writer, rep *Report) {
	fmt.Fprintf(w, "%s — %d nodes, %d pods, speedup %gx (%s)\n", rep.Scenario, rep.Nodes, rep.Pods, rep.Speedup, rep.File)
	if rep.Description != "" {
		fmt.Fprintf(w, "%s\n", strings.TrimSpace(rep.Description))
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprint(tw, "METRIC")
	for _, r := range rep.Results {
		fmt.Fprintf(tw, "\t%s", r.Profile)
	}
	fmt.Fprintln(tw)
	for _, row := range rows {
		if !row.show(rep) {
			continue
		}
		fmt.Fprint(tw, row.name)
		for _, r := range rep.Results {
			fmt.Fprintf(tw, "\t%s", row.cell(r))
		}
		fmt.Fprintln(tw)
	}
	_ = tw.Flush()
	for _, r := range rep.Results {
		for _, f := range r.Failures {
			fmt.Fprintf(w, "FAIL %s: %s\n", r.Profile, f)
		}
	}
	fmt.Fprintln(w)
}

// resourceUnits name the units of resource-seconds.
var resourceUnits = map[string]string{"cpu": "cpu·s", "memory": "GiB·s", "nvidia.com/gpu": "gpu·s"}

func resourceSeconds(m map[string]float64) string {
	var parts []string
	for _, name := range sortedKeys(m) {
		if name == "memory" || name == "ephemeral-storage" {
			continue // cpu and accelerators say enough in a table; JSON has all
		}
		unit := resourceUnits[name]
		if unit == "" {
			unit = name + "·s"
		}
		parts = append(parts, fmt.Sprintf("%.0f %s", m[name], unit))
	}
	if len(parts) == 0 {
		return "0"
	}
	return strings.Join(parts, " ")
}

var shortNames = map[string]string{"cpu": "cpu", "memory": "mem", "nvidia.com/gpu": "gpu"}

func percentages(m map[string]float64) string {
	names := sortedKeys(m)
	sort.SliceStable(names, func(i, j int) bool { return dimOrder(names[i]) < dimOrder(names[j]) })
	var parts []string
	for _, name := range names {
		short := shortNames[name]
		if short == "" {
			short = name
		}
		parts = append(parts, fmt.Sprintf("%s %.0f%%", short, 100*m[name]))
	}
	return strings.Join(parts, " ")
}

func dimOrder(name string) int {
	switch name {
	case "cpu":
		return 0
	case "memory":
		return 1
	case "nvidia.com/gpu":
		return 2
	}
	return 3
}

func freeNodes(m map[string]int) string {
	var parts []string
	for _, g := range sortedKeys(m) {
		parts = append(parts, fmt.Sprintf("%s %d", g, m[g]))
	}
	return strings.Join(parts, " ")
}

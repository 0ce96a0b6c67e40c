package scenario

import (
	"math"
	"sort"
	"time"

	v1 "k8s.io/api/core/v1"
)

// Result is one profile's run of one scenario. The JSON field names are
// stable; docs/scenarios.md describes each. Times are wall-clock seconds of
// the (time-compressed) run.
type Result struct {
	Scenario string `json:"scenario"`
	Profile  string `json:"profile"`
	// Pods created, bound at least once, and never bound.
	Pods            int `json:"pods"`
	BoundPods       int `json:"boundPods"`
	UnscheduledPods int `json:"unscheduledPods"`
	// Makespan is from the run's start until the last pod finished (or was
	// bound, for pods without a run time); the whole run when some pod
	// never got there (Complete is then false).
	MakespanSeconds float64 `json:"makespanSeconds"`
	Complete        bool    `json:"complete"`
	// PodsPerSecond is bound pods ÷ (last bind − first pod created, or
	// the scheduler's start for pods created before it).
	PodsPerSecond float64 `json:"podsPerSecond"`
	// FirstBindSeconds is from the scheduler's start (its set-up done, or
	// the first pod created, if later) to the first bind: what informer
	// sync, the controllers' start and the first cycle cost before the
	// steady rate. 0 when nothing was bound.
	FirstBindSeconds float64 `json:"firstBindSeconds"`
	// AttemptsPerPod is kube-scheduler's scheduling attempts ÷ pods.
	AttemptsPerPod float64 `json:"attemptsPerPod"`
	Attempts       int     `json:"attempts"`
	// kube-scheduler's own timing, summed over the run's attempts and
	// divided by the pods, in microseconds: the scheduling algorithm
	// (PreFilter, Filter and Score over the nodes), and the PreFilter,
	// Reserve and Permit extension points (every plugin at that point).
	// They count the scheduling cycle's work, which pods/s follows when
	// the cycle is the bottleneck; what else the process does shows in
	// them only through the cores it takes.
	AlgorithmMicrosPerPod float64 `json:"algorithmMicrosPerPod"`
	PreFilterMicrosPerPod float64 `json:"preFilterMicrosPerPod"`
	ReserveMicrosPerPod   float64 `json:"reserveMicrosPerPod"`
	PermitMicrosPerPod    float64 `json:"permitMicrosPerPod"`
	// Gangs: count, fully bound, latency from the last member created to
	// the last member bound (p50, p99 over fully bound gangs), and gangs
	// left partial: fewer than minMember members ever bound, or a member
	// finished before the gang had its minimum bound (it ran without it).
	Gangs          int     `json:"gangs"`
	GangsBound     int     `json:"gangsBound"`
	GangLatencyP50 float64 `json:"gangLatencyP50Seconds"`
	GangLatencyP99 float64 `json:"gangLatencyP99Seconds"`
	PartialGangs   int     `json:"partialGangs"`
	// PodLatencyP50 and PodLatencyP99 are, over the bound pods in no gang,
	// the time from creation (or the scheduler's start) to the bind.
	PodLatencyP50 float64 `json:"podLatencyP50Seconds"`
	PodLatencyP99 float64 `json:"podLatencyP99Seconds"`
	// WastedReservation is resource-seconds of reservations released
	// without a bind (Reserve → Unreserve), plus reservations of pods never
	// bound still open at the end, per resource (cpu in cores, memory in
	// GiB, others in units). NeverBoundReservation is the part held by pods
	// that were never bound.
	WastedReservation     map[string]float64 `json:"wastedReservationResourceSeconds"`
	NeverBoundReservation map[string]float64 `json:"neverBoundReservationResourceSeconds"`
	// Utilization: mean and peak over the samples of allocated ÷ total.
	MeanUtilization map[string]float64 `json:"meanUtilization"`
	PeakUtilization map[string]float64 `json:"peakUtilization"`
	// Fairness is measured over contended samples: at least two queues
	// have demand (the dominant share of their running and pending pods)
	// and together they want more than the cluster. At such a sample a
	// queue's fair share ("deserved") is its part of the cluster by
	// weighted water-filling over the demands: by weight, each queue
	// capped at its demand, what a capped queue leaves shared again by
	// weight. QueueShares holds per queue the mean dominant share and the
	// mean fair share over the contended samples; MaxShareDeviation is
	// the largest |mean share − mean fair share|; ContendedSeconds sums,
	// over the contended samples, the time since the previous sample.
	QueueShares       map[string]QueueShare `json:"queueShares,omitempty"`
	MaxShareDeviation float64               `json:"maxShareDeviation"`
	ContendedSeconds  float64               `json:"contendedSeconds"`
	// JainIndex is Jain's fairness index as Jain defined it, of each
	// queue's allocation against its fair allocation: at each contended
	// sample J = (Σx)²/(n·Σx²), x = share ÷ fair share over the n queues
	// with a fair share; JainIndex is the mean of J weighted by the time
	// since the previous sample (ContendedSeconds' weights), 1 without
	// contended time. J is 1 when every queue holds the same fraction of
	// its fair share, which on a full cluster means its fair share; a
	// queue that wants less than its weighted share and gets what it
	// wants lowers nothing.
	JainIndex float64 `json:"jainIndex"`
	// WeightedJainIndex is Jain's index of mean share ÷ weight (means
	// over the contended samples), the literal reading of issue 4; below
	// 1 whenever a queue wants less than its weighted share.
	WeightedJainIndex float64 `json:"weightedJainIndex"`
	// IdleWhileWaiting integrates, per resource, the room idle while a pod
	// that fits it waits (pending for a second or more; see
	// idleWhileWaiting), in resource-seconds: cpu in cores, memory in
	// bytes.
	IdleWhileWaiting map[string]float64 `json:"idleWhileWaitingResourceSeconds"`
	// TimeToFairShareSeconds is the longest time to fair share over
	// FairShareBursts: after a workload of a queue arrives (after the
	// start), from its first pod's creation to the first sample, taken
	// once every pod of its first arrival exists, at which every queue is
	// within the scenario's fairShareTolerance of its fair share (a sample
	// without contention counts as fair); until the end of the run when
	// no sample is (Reached is then false). Wall seconds, as every time
	// here: arrivals are wall time, only run times are compressed.
	TimeToFairShareSeconds float64          `json:"timeToFairShareSeconds"`
	FairShareBursts        []FairShareBurst `json:"fairShareBursts,omitempty"`
	// Nodes that ever ran a pod, and per node group the nodes with no
	// running pod at the moment of peak allocation.
	NodesUsed int            `json:"nodesUsed"`
	FreeNodes map[string]int `json:"freeNodesAtPeak"`
	// Topology placement, for the gangs with a required (preferred)
	// topology key that were placed (at least minMember members bound):
	// how many, how many ran every bound member in one domain of the key,
	// and that share (0 when none was placed).
	RequiredGangs      int     `json:"topologyRequiredGangs"`
	RequiredInDomain   int     `json:"topologyRequiredInDomain"`
	RequiredPlacement  float64 `json:"topologyRequiredPlacement"`
	PreferredGangs     int     `json:"topologyPreferredGangs"`
	PreferredInDomain  int     `json:"topologyPreferredInDomain"`
	PreferredPlacement float64 `json:"topologyPreferredPlacement"`
	// Room for gangs of whole GPU nodes, the means of the samples'
	// FreeCapacity while work remained (some pod running or pending) up to
	// the last arrival (see summarizeFree): GPU
	// nodes with every GPU free and their GPUs; all free GPUs (the rest of
	// them are fragments); in the rack with the most, whole free nodes; in
	// the rack with the most, free GPUs.
	MeanWholeFreeNodes     float64 `json:"meanWholeFreeNodes"`
	MeanWholeFreeNodeGPUs  float64 `json:"meanWholeFreeNodeGPUs"`
	MeanFreeGPUs           float64 `json:"meanFreeGPUs"`
	MeanRackWholeFreeNodes float64 `json:"meanRackWholeFreeNodes"`
	MeanRackFreeGPUs       float64 `json:"meanRackFreeGPUs"`
	// Evictions are running pods deleted (the runner deletes none:
	// preemption). Preemptors are the pods that were nominated
	// (status.nominatedNodeName) or are the related object of an
	// events.k8s.io/v1 Event with reason Preempted or Reclaimed regarding
	// an observed pod (the Event every scheduler compared records on each
	// victim; Muster does not nominate when it reclaims), each pod once.
	// VictimsPerPreemptor is Evictions ÷ Preemptors, 0 without preemptors.
	// ReclaimedPods are the preemptors and the bound members of their
	// gangs (a gang scheduler preempts once for a whole gang);
	// VictimsPerReclaimedPod is Evictions ÷ ReclaimedPods, 0 without.
	// GangsBroken counts gangs an eviction left running below minMember.
	Evictions              int     `json:"evictions"`
	Preemptors             int     `json:"preemptors"`
	VictimsPerPreemptor    float64 `json:"victimsPerPreemptor"`
	ReclaimedPods          int     `json:"reclaimedPods"`
	VictimsPerReclaimedPod float64 `json:"victimsPerReclaimedPod"`
	GangsBroken            int     `json:"gangsBrokenByEviction"`
	// CPUMillisPerPod is the CPU time the whole process (control plane,
	// scheduler, simulated kubelet, runner) used during the run, user and
	// system, ÷ bound pods. On a busy machine pods/s follows it: the
	// scheduler shares the cores with everything else.
	CPUMillisPerPod float64 `json:"cpuMillisPerBoundPod"`
	// Process memory: peak resident set (control plane, scheduler and
	// runner share the process) and peak Go heap during the run.
	PeakRSSBytes  uint64  `json:"peakRSSBytes"`
	PeakHeapBytes uint64  `json:"peakHeapBytes"`
	WallSeconds   float64 `json:"wallSeconds"`
	// Series is the sampled utilization and queue shares, for pictures.
	Series []Point `json:"series,omitempty"`
	// Failed bounds, filled in by Check.
	Failures []string `json:"failures,omitempty"`
	// Runs is how many runs the figures are the median of (1: the figures
	// are one run's); RunsPodsPerSecond is each run's pods/s, in order.
	Runs              int       `json:"runs"`
	RunsPodsPerSecond []float64 `json:"runsPodsPerSecond,omitempty"`
}

// QueueShare is a queue's mean share and deserved share when contended.
type QueueShare struct {
	Weight   int32   `json:"weight"`
	Share    float64 `json:"share"`
	Deserved float64 `json:"deserved"`
}

// FairShareBurst is one workload arriving in a queue after the start and
// the time until the queues were at their fair shares.
type FairShareBurst struct {
	Workload       string  `json:"workload"`
	Queue          string  `json:"queue"`
	ArrivalSeconds float64 `json:"arrivalSeconds"`
	SecondsToFair  float64 `json:"secondsToFair"`
	Reached        bool    `json:"reached"`
}

// Point is one sample of the series.
type Point struct {
	Seconds     float64            `json:"seconds"`
	Utilization map[string]float64 `json:"utilization"`
	Shares      map[string]float64 `json:"shares,omitempty"`
	// Free is the room for gangs of whole GPU nodes (clusters with GPUs).
	Free *FreeCapacity `json:"free,omitempty"`
}

// measure computes a profile's metrics from what was observed.
func measure(s *Scenario, o *observer, rel, open []released, sched schedulerCounters, start, end time.Time) *Result {
	r := &Result{
		Scenario:              s.Name,
		Pods:                  len(o.pods),
		Attempts:              int(sched.attempts),
		WastedReservation:     map[string]float64{},
		NeverBoundReservation: map[string]float64{},
		MeanUtilization:       map[string]float64{},
		PeakUtilization:       map[string]float64{},
		FreeNodes:             map[string]int{},
		NodesUsed:             len(o.used),
		Evictions:             o.evictions,
		WallSeconds:           end.Sub(start).Seconds(),
	}
	preemptors := preemptorSet(o.pods, o.victimEvents(), o.evictions)
	r.Preemptors, r.ReclaimedPods = len(preemptors), reclaimedPods(o.pods, preemptors)
	var firstCreated, firstBound, lastBound, lastDone time.Time
	boundUIDs := map[string]bool{}
	var podLatencies []float64
	for _, p := range o.pods {
		created := p.created
		if created.Before(start) {
			created = start // created before the scheduler started
		}
		if firstCreated.IsZero() || created.Before(firstCreated) {
			firstCreated = created
		}
		if p.bound.IsZero() {
			r.UnscheduledPods++
			continue
		}
		r.BoundPods++
		boundUIDs[p.uid] = true
		if p.gang == "" {
			podLatencies = append(podLatencies, math.Max(0, p.bound.Sub(created).Seconds()))
		}
		if firstBound.IsZero() || p.bound.Before(firstBound) {
			firstBound = p.bound
		}
		if p.bound.After(lastBound) {
			lastBound = p.bound
		}
		finish := p.finished
		if p.forever {
			finish = p.bound
		}
		if finish.After(lastDone) {
			lastDone = finish
		}
	}
	r.Complete = o.done == len(o.pods) && r.UnscheduledPods == 0
	if r.Complete {
		r.MakespanSeconds = lastDone.Sub(start).Seconds()
	} else {
		r.MakespanSeconds = end.Sub(start).Seconds()
	}
	if r.BoundPods > 0 && lastBound.After(firstCreated) {
		r.PodsPerSecond = float64(r.BoundPods) / lastBound.Sub(firstCreated).Seconds()
	}
	if !firstBound.IsZero() && firstBound.After(firstCreated) {
		r.FirstBindSeconds = firstBound.Sub(firstCreated).Seconds()
	}
	if r.Pods > 0 {
		pods := float64(r.Pods)
		r.AttemptsPerPod = sched.attempts / pods
		r.AlgorithmMicrosPerPod = sched.seconds["algorithm"] * 1e6 / pods
		r.PreFilterMicrosPerPod = sched.seconds["PreFilter"] * 1e6 / pods
		r.ReserveMicrosPerPod = sched.seconds["Reserve"] * 1e6 / pods
		r.PermitMicrosPerPod = sched.seconds["Permit"] * 1e6 / pods
	}

	var latencies []float64
	var required, preferred placement
	for _, g := range o.gangs {
		required.add(g, g.required, o.nodeLabels)
		preferred.add(g, g.preferred, o.nodeLabels)
		r.Gangs++
		lat, bound, ok := gangLatency(g, start)
		if ok {
			r.GangsBound++
			latencies = append(latencies, lat)
		}
		if partial(g, bound) {
			r.PartialGangs++
		}
		if broken(g) {
			r.GangsBroken++
		}
	}
	r.RequiredGangs, r.RequiredInDomain, r.RequiredPlacement = required.gangs, required.inDomain, required.share()
	r.PreferredGangs, r.PreferredInDomain, r.PreferredPlacement = preferred.gangs, preferred.inDomain, preferred.share()
	r.GangLatencyP50 = percentile(latencies, 50)
	r.GangLatencyP99 = percentile(latencies, 99)
	r.PodLatencyP50 = percentile(podLatencies, 50)
	r.PodLatencyP99 = percentile(podLatencies, 99)

	for _, x := range rel {
		addResourceSeconds(r.WastedReservation, x)
		if !boundUIDs[string(x.pod)] {
			addResourceSeconds(r.NeverBoundReservation, x)
		}
	}
	for _, x := range open {
		if !boundUIDs[string(x.pod)] {
			addResourceSeconds(r.WastedReservation, x)
			addResourceSeconds(r.NeverBoundReservation, x)
		}
	}
	if r.Preemptors > 0 {
		r.VictimsPerPreemptor = float64(r.Evictions) / float64(r.Preemptors)
		r.VictimsPerReclaimedPod = float64(r.Evictions) / float64(r.ReclaimedPods)
	}
	r.summarizeSamples(s, o)
	return r
}

// gangLatency is the time from the last member created to the last
// member bound, when every member was bound; bound counts members ever
// bound.
func gangLatency(g *gangRecord, start time.Time) (seconds float64, bound int, ok bool) {
	var lastCreated, lastBound time.Time
	for _, m := range g.members {
		if m.created.After(lastCreated) {
			lastCreated = m.created
		}
		if lastCreated.Before(start) {
			lastCreated = start // created before the scheduler started
		}
		if m.bound.IsZero() {
			continue
		}
		bound++
		if m.bound.After(lastBound) {
			lastBound = m.bound
		}
	}
	if bound < g.size || bound == 0 {
		return 0, bound, false
	}
	return math.Max(0, lastBound.Sub(lastCreated).Seconds()), bound, true
}

// partial says whether a gang ran without its minimum: some but fewer than
// minMember members were ever bound, or a member finished before the
// minMember-th member was bound.
func partial(g *gangRecord, bound int) bool {
	if bound == 0 {
		return false
	}
	if bound < g.minMember {
		return true
	}
	var binds []time.Time
	for _, m := range g.members {
		if !m.bound.IsZero() {
			binds = append(binds, m.bound)
		}
	}
	sort.Slice(binds, func(i, j int) bool { return binds[i].Before(binds[j]) })
	ready := binds[g.minMember-1]
	for _, m := range g.members {
		if !m.finished.IsZero() && m.finished.Before(ready) {
			return true
		}
	}
	return false
}

// broken says whether evictions left the gang running without its minimum:
// at its first eviction, members that were running and were never evicted
// number more than zero and fewer than minMember. A gang evicted whole (its
// members deleted one after another) is not broken.
func broken(g *gangRecord) bool {
	var first time.Time
	for _, m := range g.members {
		if m.evicted && (first.IsZero() || m.deleted.Before(first)) {
			first = m.deleted
		}
	}
	if first.IsZero() {
		return false
	}
	survivors := 0
	for _, m := range g.members {
		if m.evicted || m.bound.IsZero() || m.bound.After(first) {
			continue
		}
		if !m.finished.IsZero() && m.finished.Before(first) {
			continue
		}
		if !m.deleted.IsZero() && m.deleted.Before(first) {
			continue
		}
		survivors++
	}
	return survivors > 0 && survivors < g.minMember
}

// percentile is the nearest-rank percentile; 0 for no values.
func percentile(values []float64, p float64) float64 {
	if len(values) == 0 {
		return 0
	}
	v := append([]float64(nil), values...)
	sort.Float64s(v)
	rank := int(math.Ceil(p / 100 * float64(len(v))))
	if rank < 1 {
		rank = 1
	}
	return v[rank-1]
}

func addResourceSeconds(sum map[string]float64, x released) {
	for name, q := range x.requests {
		if name == v1.ResourcePods {
			continue
		}
		v := q.AsApproximateFloat64()
		if name == v1.ResourceMemory {
			v /= 1 << 30
		}
		sum[string(name)] += v * x.seconds
	}
}

// summarizeSamples fills utilization, free nodes, the series and fairness.
func (r *Result) summarizeSamples(s *Scenario, o *observer) {
	peak := -1.0
	for _, smp := range o.samples {
		pt := Point{Seconds: smp.at.Seconds(), Utilization: map[string]float64{}}
		dom := 0.0
		for d, name := range o.dims {
			pt.Utilization[string(name)] = smp.used[d]
			r.MeanUtilization[string(name)] += smp.used[d] / float64(len(o.samples))
			r.PeakUtilization[string(name)] = math.Max(r.PeakUtilization[string(name)], smp.used[d])
			dom = math.Max(dom, smp.used[d])
		}
		if dom > peak {
			peak = dom
			for g, n := range smp.freeNodes {
				r.FreeNodes[g] = n
			}
		}
		if len(smp.shares) > 0 {
			pt.Shares = smp.shares
		}
		if len(o.gpuNodes) > 0 {
			free := smp.free
			pt.Free = &free
		}
		r.Series = append(r.Series, pt)
	}
	r.summarizeFree(o.samples, s.lastArrival())
	r.summarizeFairness(s, o)
	r.summarizeIdle(o)
}

// summarizeFree averages the samples' FreeCapacity over those taken while
// work remained (some pod running or pending) up to the last arrival
// (after the start; with every workload arriving at the start, until the
// work is done). Every profile is offered the same work until then; later
// samples would count the drain, where every node frees up, and the free
// nodes of a slower run as room.
func (r *Result) summarizeFree(samples []sample, lastArrival time.Duration) {
	n := 0
	var sum FreeCapacity
	for _, smp := range samples {
		if !smp.working || lastArrival > 0 && smp.at > lastArrival {
			continue
		}
		n++
		sum.WholeNodes += smp.free.WholeNodes
		sum.WholeNodeGPUs += smp.free.WholeNodeGPUs
		sum.FreeGPUs += smp.free.FreeGPUs
		sum.RackWholeNodes += smp.free.RackWholeNodes
		sum.RackFreeGPUs += smp.free.RackFreeGPUs
	}
	if n == 0 {
		return
	}
	r.MeanWholeFreeNodes = float64(sum.WholeNodes) / float64(n)
	r.MeanWholeFreeNodeGPUs = float64(sum.WholeNodeGPUs) / float64(n)
	r.MeanFreeGPUs = float64(sum.FreeGPUs) / float64(n)
	r.MeanRackWholeFreeNodes = float64(sum.RackWholeNodes) / float64(n)
	r.MeanRackFreeGPUs = float64(sum.RackFreeGPUs) / float64(n)
}

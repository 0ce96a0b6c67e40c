// Package metrics holds Muster's own metrics, served beside kube-scheduler's
// on its secure /metrics: counters and histograms that the gang, queue and
// plugin code observe as things happen, and gauges read from the live batch
// state at scrape time (see Source). They are registered with
// component-base's legacy registry once per process (Register); the
// package imports nothing of Muster's, so every package may observe.
//
// Time spent in Muster's plugins is kube-scheduler's
// scheduler_plugin_execution_duration_seconds{plugin,extension_point}, which
// covers every plugin of the framework: it is not duplicated here.
package metrics

import (
	"sync"

	"k8s.io/component-base/metrics"
	"k8s.io/component-base/metrics/legacyregistry"
)

const namespace = "muster"

// Results of an admission decision and of a placement attempt.
const (
	Admitted = "admitted"
	Refused  = "refused"
	// Placed: the attempt placed the whole gang (its plan is complete).
	Placed = "placed"
	// Unschedulable: the attempt showed the gang cannot be placed now.
	Unschedulable = "unschedulable"
)

var (
	// GangSchedulingDuration is the end-to-end latency of a gang: from its
	// first member's creation until minMember members are bound.
	GangSchedulingDuration = metrics.NewHistogramVec(&metrics.HistogramOpts{
		Namespace:      namespace,
		Subsystem:      "gang",
		Name:           "scheduling_duration_seconds",
		Help:           "Time from the creation of a gang's first member until minMember members are bound, once per gang, by queue.",
		Buckets:        metrics.ExponentialBuckets(0.05, 2, 18), // 50 ms to ~1.8 h
		StabilityLevel: metrics.ALPHA,
	}, []string{"queue"})
	// AdmissionDecisions counts the queue's decisions on gangs not yet
	// admitted, one per scheduling attempt.
	AdmissionDecisions = metrics.NewCounterVec(&metrics.CounterOpts{
		Namespace:      namespace,
		Subsystem:      "admission",
		Name:           "decisions_total",
		Help:           "Admission decisions on gangs not yet admitted to their queue, one per scheduling attempt, by queue, result (admitted, refused) and reason.",
		StabilityLevel: metrics.ALPHA,
	}, []string{"queue", "result", "reason"})
	// PlacementAttempts counts the attempts to place a whole gang.
	PlacementAttempts = metrics.NewCounterVec(&metrics.CounterOpts{
		Namespace:      namespace,
		Subsystem:      "gang",
		Name:           "placement_attempts_total",
		Help:           "Attempts to place a whole gang (a plan for minMember members), by result (placed, unschedulable).",
		StabilityLevel: metrics.ALPHA,
	}, []string{"result"})
	// Evictions counts the pods reclaim and preemption deleted.
	Evictions = metrics.NewCounterVec(&metrics.CounterOpts{
		Namespace:      namespace,
		Subsystem:      "reclaim",
		Name:           "evictions_total",
		Help:           "Pods evicted by reclaim and gang preemption, by the victim's queue and reason (reclaim, preempt, even_shares).",
		StabilityLevel: metrics.ALPHA,
	}, []string{"queue", "reason"})
	// EvictionVictims is how many pods one eviction for a preemptor gang
	// took.
	EvictionVictims = metrics.NewHistogram(&metrics.HistogramOpts{
		Namespace:      namespace,
		Subsystem:      "reclaim",
		Name:           "victims",
		Help:           "Pods evicted by one eviction for a preemptor gang.",
		Buckets:        metrics.ExponentialBuckets(1, 2, 12), // 1 to 2048
		StabilityLevel: metrics.ALPHA,
	})
	// GangsBroken counts the gangs an eviction left running below
	// minMember: reclaim takes whole gangs or their members beyond
	// minMember, so it must stay 0.
	GangsBroken = metrics.NewCounter(&metrics.CounterOpts{
		Namespace:      namespace,
		Subsystem:      "reclaim",
		Name:           "gangs_broken_total",
		Help:           "Gangs an eviction left with some but fewer than minMember members bound. Must stay 0.",
		StabilityLevel: metrics.ALPHA,
	})

	registerOnce sync.Once
)

// Register registers Muster's metrics with component-base's legacy
// registry, once per process.
func Register() {
	registerOnce.Do(func() {
		legacyregistry.MustRegister(registerables()...)
		legacyregistry.CustomMustRegister(state)
	})
}

// registerables are the counters and histograms Register registers.
func registerables() []metrics.Registerable {
	return []metrics.Registerable{GangSchedulingDuration, AdmissionDecisions, PlacementAttempts,
		Evictions, EvictionVictims, GangsBroken}
}

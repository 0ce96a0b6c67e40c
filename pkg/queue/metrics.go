package queue

import (
	"sync"

	"k8s.io/component-base/metrics"
	"k8s.io/component-base/metrics/legacyregistry"
)

// The audit's metrics, served beside kube-scheduler's on its /metrics.
var (
	driftTotal = metrics.NewCounterVec(&metrics.CounterOpts{
		Namespace:      "muster",
		Subsystem:      "accounting",
		Name:           "drift_total",
		Help:           "Audits that found a running sum of the queue accounting differing from its recount (and repaired it), by sum and resource.",
		StabilityLevel: metrics.ALPHA,
	}, []string{"sum", "resource"})
	auditDuration = metrics.NewHistogram(&metrics.HistogramOpts{
		Namespace:      "muster",
		Subsystem:      "accounting",
		Name:           "audit_duration_seconds",
		Help:           "How long an audit of the queue accounting took.",
		Buckets:        metrics.ExponentialBuckets(0.001, 2, 15),
		StabilityLevel: metrics.ALPHA,
	})
	registerOnce sync.Once
)

// RegisterMetrics registers the accounting's metrics with component-base's
// legacy registry, once.
func RegisterMetrics() {
	registerOnce.Do(func() {
		legacyregistry.MustRegister(driftTotal, auditDuration)
	})
}

// countDrift counts one drift of sum in every resource of diff.
func countDrift(sum string, diff Vector) {
	for r := range diff {
		driftTotal.WithLabelValues(sum, string(r)).Inc()
	}
}

package gang

import (
	"time"

	v1 "k8s.io/api/core/v1"

	"github.com/muster-sched/muster/apis/scheduling/v1alpha1"
	"github.com/muster-sched/muster/pkg/metrics"
)

// observeStart observes the gang's scheduling latency (first member
// created → minMember bound) when the bind of a member seen pending (old)
// takes it to minMember bound, once per gang. A gang with a member
// already bound when first seen (one listed after a restart) started
// before this process watched it: it is never timed. Only managed pods
// come here, once bound; m.mu held for writing.
func (m *Manager) observeStart(key Key, g *group, old *v1.Pod) {
	if old == nil {
		g.startTimed = true
		return
	}
	if old.Spec.NodeName != "" {
		return
	}
	sh := m.shapeLocked(key, g)
	if sh.spec.MinMember <= 0 || g.tally.scheduled < sh.spec.MinMember {
		return
	}
	g.startTimed = true
	q := sh.spec.Queue
	if q == "" {
		q = v1alpha1.DefaultQueue
	}
	if m.queueLabel == nil {
		q = ""
	} else {
		q = m.queueLabel(q)
	}
	metrics.GangSchedulingDuration.WithLabelValues(q).Observe(time.Since(g.created).Seconds())
}

package batch

import (
	"context"

	v1 "k8s.io/api/core/v1"

	queuecontroller "github.com/muster-sched/muster/pkg/controllers/queue"
	"github.com/muster-sched/muster/pkg/metrics"
	"github.com/muster-sched/muster/pkg/queue"
)

// serveMetrics makes b the source of Muster's gauges until ctx (the
// leader's) ends; a scheduler that leads later in the process replaces it.
func (b *Batch) serveMetrics(ctx context.Context) {
	src := &metricsSource{b}
	metrics.SetSource(src)
	context.AfterFunc(ctx, func() { metrics.ClearSource(src) })
}

// metricsSource reads the gauges from the batch state at scrape time: the
// queue accounting's latest snapshot (the leader's Queue status controller
// refreshes it every second) and the gang state.
type metricsSource struct{ b *Batch }

func (s *metricsSource) Queues() []metrics.QueueFigures {
	qs := s.b.Queues()
	if qs == nil {
		return nil
	}
	snap := qs.Last()
	if snap == nil {
		return nil
	}
	out := make([]metrics.QueueFigures, 0, len(snap.Queues))
	for name, f := range snap.Queues {
		out = append(out, metrics.QueueFigures{
			Name: name, Allocated: baseUnits(f.Allocated), Deserved: baseUnits(f.Deserved),
			Capability: baseUnits(f.RealCapability), Guarantee: baseUnits(f.Guarantee),
			Inqueue: baseUnits(f.Inqueue), Share: f.Share(),
		})
	}
	return out
}

func (s *metricsSource) Gangs() []metrics.GangCount {
	var snap *queue.Snapshot
	if qs := s.b.Queues(); qs != nil {
		snap = qs.Last()
		if snap == nil {
			return nil
		}
	}
	// A queue no Queue has (or any, with no queue accounting) is a name a
	// user wrote: its gangs are counted under "", so that the label set
	// stays bounded.
	type series struct{ queue, phase string }
	sums := map[series]int{}
	for q, phases := range queuecontroller.PhaseCounts(s.b.Gangs, snap) {
		if snap == nil || snap.Queues[q] == nil {
			q = ""
		}
		for p, n := range phases {
			sums[series{q, string(p)}] += int(n)
		}
	}
	out := make([]metrics.GangCount, 0, len(sums))
	for k, n := range sums {
		out = append(out, metrics.GangCount{Queue: k.queue, Phase: k.phase, Count: n})
	}
	return out
}

// queueLabel is q where a Queue of that name is accounted, else "": the
// queue label of a gang's metrics.
func (b *Batch) queueLabel(q string) string {
	if st := b.Queues(); st != nil {
		if snap := st.Last(); snap != nil && snap.Queues[q] != nil {
			return q
		}
	}
	return ""
}

// baseUnits converts a Vector (cpu in millicores) to base units.
func baseUnits(v queue.Vector) map[string]float64 {
	out := make(map[string]float64, len(v))
	for r, n := range v {
		if r == v1.ResourceCPU {
			out[string(r)] = float64(n) / 1000
		} else {
			out[string(r)] = float64(n)
		}
	}
	return out
}

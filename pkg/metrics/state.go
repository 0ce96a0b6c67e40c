package metrics

import (
	"sync"

	"k8s.io/component-base/metrics"
)

// Source gives the live batch state of the scheduler that serves the
// gauges. It is read at scrape time only, so nothing is kept up to date
// between scrapes.
type Source interface {
	// Queues returns every queue's figures; nil while no queue policy is
	// on.
	Queues() []QueueFigures
	// Gangs returns how many gangs each queue holds, by phase.
	Gangs() []GangCount
}

// QueueFigures are one queue's figures, in base units per resource name
// (cpu in cores, memory in bytes). A resource missing from Capability is
// unlimited.
type QueueFigures struct {
	Name                                                string
	Allocated, Deserved, Capability, Guarantee, Inqueue map[string]float64
	// Share is how far the queue is into its share: max over resources of
	// allocated/deserved.
	Share float64
}

// GangCount is how many gangs of a queue are in a phase.
type GangCount struct {
	Queue, Phase string
	Count        int
}

var (
	queueLabels = []string{"queue", "resource"}
	queueDescs  = [...]*metrics.Desc{
		queueDesc("allocated", "Resources held by the queue's placed and running members, in base units (cpu in cores, memory in bytes)."),
		queueDesc("deserved", "The queue's deserved share, as the queue policy computed it, in base units."),
		queueDesc("capability", "The queue's real capability (hard ceiling) per resource, in base units; absent: unlimited."),
		queueDesc("guarantee", "The queue's guaranteed floor per resource, in base units."),
		queueDesc("inqueue", "Resources held for the queue's admitted gangs that are not running yet, in base units."),
	}
	queueShareDesc = metrics.NewDesc("muster_queue_share",
		"How far the queue is into its deserved share: max over resources of allocated/deserved (+Inf: holds what it does not deserve).",
		[]string{"queue"}, nil, metrics.ALPHA, "")
	gangsDesc = metrics.NewDesc("muster_gangs",
		"Gangs by queue and phase (Pending, Inqueue, Running, Unknown, Completed, Failed).",
		[]string{"queue", "phase"}, nil, metrics.ALPHA, "")
)

func queueDesc(name, help string) *metrics.Desc {
	return metrics.NewDesc("muster_queue_"+name, help, queueLabels, nil, metrics.ALPHA, "")
}

// Phases are the gang phases muster_gangs always reports, 0 included,
// for every queue: a phase that empties reads 0, not a stale value.
var Phases = []string{"Pending", "Inqueue", "Running", "Unknown", "Completed", "Failed"}

// stateCollector serves the gauges from the Source of the scheduler
// built last in the process: a scheduler that starts replaces the one
// before (integration tests start many in sequence), one collector
// registered once.
type stateCollector struct {
	metrics.BaseStableCollector
	mu  sync.Mutex
	src Source
}

var state = &stateCollector{}

// SetSource makes src the source of the gauges, replacing any before.
func SetSource(src Source) {
	state.mu.Lock()
	defer state.mu.Unlock()
	state.src = src
}

// ClearSource stops serving src, if it is still the source: a scheduler
// that stops leaves its successor's in place.
func ClearSource(src Source) {
	state.mu.Lock()
	defer state.mu.Unlock()
	if state.src == src {
		state.src = nil
	}
}

func (c *stateCollector) DescribeWithStability(ch chan<- *metrics.Desc) {
	for _, d := range queueDescs {
		ch <- d
	}
	ch <- queueShareDesc
	ch <- gangsDesc
}

// CollectWithStability reads the source under the lock, so that a
// scheduler that stops meanwhile is not read half torn down.
func (c *stateCollector) CollectWithStability(ch chan<- metrics.Metric) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.src == nil {
		return
	}
	queues := map[string]bool{}
	for _, q := range c.src.Queues() {
		queues[q.Name] = true
		for i, v := range [...]map[string]float64{q.Allocated, q.Deserved, q.Capability, q.Guarantee, q.Inqueue} {
			for r, n := range v {
				ch <- metrics.NewLazyConstMetric(queueDescs[i], metrics.GaugeValue, n, q.Name, r)
			}
		}
		ch <- metrics.NewLazyConstMetric(queueShareDesc, metrics.GaugeValue, q.Share, q.Name)
	}
	counts := map[[2]string]int{}
	for _, g := range c.src.Gangs() {
		queues[g.Queue] = true
		counts[[2]string{g.Queue, g.Phase}] += g.Count
	}
	for q := range queues {
		for _, p := range Phases {
			ch <- metrics.NewLazyConstMetric(gangsDesc, metrics.GaugeValue, float64(counts[[2]string{q, p}]), q, p)
			delete(counts, [2]string{q, p})
		}
	}
	for k, n := range counts { // a phase not listed above
		ch <- metrics.NewLazyConstMetric(gangsDesc, metrics.GaugeValue, float64(n), k[0], k[1])
	}
}

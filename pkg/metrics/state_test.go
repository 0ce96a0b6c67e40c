package metrics

import (
	"fmt"
	"strings"
	"testing"

	"k8s.io/component-base/metrics/legacyregistry"
	"k8s.io/component-base/metrics/testutil"
)

type fakeSource struct {
	queues []QueueFigures
	gangs  []GangCount
}

func (f *fakeSource) Queues() []QueueFigures { return f.queues }
func (f *fakeSource) Gangs() []GangCount     { return f.gangs }

func TestStateCollector(t *testing.T) {
	Register()
	first := &fakeSource{
		queues: []QueueFigures{{
			Name: "team-a", Allocated: map[string]float64{"cpu": 2.5}, Deserved: map[string]float64{"cpu": 5},
			Capability: map[string]float64{"cpu": 8}, Guarantee: map[string]float64{}, Inqueue: map[string]float64{"cpu": 1}, Share: 0.5,
		}},
		gangs: []GangCount{{Queue: "team-a", Phase: "Running", Count: 2}, {Queue: "team-b", Phase: "Pending", Count: 1}},
	}
	second := &fakeSource{gangs: []GangCount{{Queue: "default", Phase: "Inqueue", Count: 3}}}
	names := []string{"muster_queue_allocated", "muster_queue_deserved", "muster_queue_capability", "muster_queue_inqueue", "muster_queue_share", "muster_gangs"}
	gangsOf := func(queue string, counts map[string]int) string {
		var b strings.Builder
		for _, p := range Phases {
			fmt.Fprintf(&b, "muster_gangs{phase=%q,queue=%q} %d\n", p, queue, counts[p])
		}
		return b.String()
	}
	header := `# HELP muster_gangs [ALPHA] Gangs by queue and phase (Pending, Inqueue, Running, Unknown, Completed, Failed).
# TYPE muster_gangs gauge
`
	tests := []struct {
		name string
		set  func()
		want string
	}{{
		name: "the source set last is served",
		set:  func() { SetSource(first) },
		want: `# HELP muster_queue_allocated [ALPHA] Resources held by the queue's placed and running members, in base units (cpu in cores, memory in bytes).
# TYPE muster_queue_allocated gauge
muster_queue_allocated{queue="team-a",resource="cpu"} 2.5
# HELP muster_queue_capability [ALPHA] The queue's real capability (hard ceiling) per resource, in base units; absent: unlimited.
# TYPE muster_queue_capability gauge
muster_queue_capability{queue="team-a",resource="cpu"} 8
# HELP muster_queue_deserved [ALPHA] The queue's deserved share, as the queue policy computed it, in base units.
# TYPE muster_queue_deserved gauge
muster_queue_deserved{queue="team-a",resource="cpu"} 5
# HELP muster_queue_inqueue [ALPHA] Resources held for the queue's admitted gangs that are not running yet, in base units.
# TYPE muster_queue_inqueue gauge
muster_queue_inqueue{queue="team-a",resource="cpu"} 1
# HELP muster_queue_share [ALPHA] How far the queue is into its deserved share: max over resources of allocated/deserved (+Inf: holds what it does not deserve).
# TYPE muster_queue_share gauge
muster_queue_share{queue="team-a"} 0.5
` + header + gangsOf("team-a", map[string]int{"Running": 2}) + gangsOf("team-b", map[string]int{"Pending": 1}),
	}, {
		name: "a scheduler built later replaces the source",
		set:  func() { SetSource(second) },
		want: header + gangsOf("default", map[string]int{"Inqueue": 3}),
	}, {
		name: "a stopped scheduler leaves its successor's source",
		set:  func() { ClearSource(first) },
		want: header + gangsOf("default", map[string]int{"Inqueue": 3}),
	}, {
		name: "no source: no gauges",
		set:  func() { ClearSource(second) },
		want: "",
	}}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			tc.set()
			if err := testutil.GatherAndCompare(legacyregistry.DefaultGatherer, strings.NewReader(tc.want), names...); err != nil {
				t.Error(err)
			}
		})
	}
}

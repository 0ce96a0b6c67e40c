package integration

import (
	"context"
	"fmt"
	"os"
	"slices"
	"sync"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/muster-sched/muster/apis/scheduling/v1alpha1"
	"github.com/muster-sched/muster/pkg/simulator"
)

// TestBadInputBigGangs is TestBadInput's rows of huge gangs, apart because
// creating their pods takes minutes on two cores: run with
// MUSTER_TEST_BIG_GANGS=1.
func TestBadInputBigGangs(t *testing.T) {
	if os.Getenv("MUSTER_TEST_BIG_GANGS") == "" {
		t.Skip("set MUSTER_TEST_BIG_GANGS=1 to run the rows of huge gangs (minutes)")
	}
	for _, tc := range bigGangRows() {
		t.Run(tc.name, tc.run)
	}
}

// plainStream creates plain pods, one every gap, while the row runs, and
// measures each one's latency: from its creation to the first poll (every
// 50 ms) that sees it bound.
type plainStream struct {
	r      *badRow
	prefix string
	mu     sync.Mutex
	made   map[string]time.Time
	bound  map[string]time.Time
	done   chan struct{}
}

// streamPlain starts creating n plain pods (100m cpu) one every gap.
func (r *badRow) streamPlain(prefix string, n int, gap time.Duration) *plainStream {
	s := &plainStream{r: r, prefix: prefix, made: map[string]time.Time{}, bound: map[string]time.Time{}, done: make(chan struct{})}
	go func() {
		defer close(s.done)
		for i := range n {
			p := r.pod(fmt.Sprintf("%s-%d", prefix, i), map[v1.ResourceName]string{v1.ResourceCPU: "100m"})
			p.Labels = map[string]string{"bi-stream": prefix}
			start := time.Now()
			if _, err := cluster.Client.CoreV1().Pods(r.ns).Create(r.ctx, p, metav1.CreateOptions{}); err != nil {
				return // the row's context ended
			}
			s.mu.Lock()
			s.made[p.Name] = start
			s.mu.Unlock()
			select {
			case <-r.ctx.Done():
				return
			case <-time.After(gap):
			}
		}
	}()
	go func() {
		for r.ctx.Err() == nil {
			s.poll()
			s.mu.Lock()
			finished := len(s.bound) == n
			s.mu.Unlock()
			if finished {
				return
			}
			time.Sleep(50 * time.Millisecond)
		}
	}()
	return s
}

// poll records the time it first sees each pod of the stream bound.
func (s *plainStream) poll() {
	pods, err := cluster.Client.CoreV1().Pods(s.r.ns).List(s.r.ctx, metav1.ListOptions{LabelSelector: "bi-stream=" + s.prefix})
	if err != nil {
		return
	}
	now := time.Now()
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, p := range pods.Items {
		if _, seen := s.bound[p.Name]; !seen && p.Spec.NodeName != "" {
			s.bound[p.Name] = now
		}
	}
}

// latencies waits until every pod of the stream is created and bound
// (within timeout) and returns their latencies, sorted.
func (s *plainStream) latencies(timeout time.Duration) []time.Duration {
	s.r.t.Helper()
	<-s.done
	var out []time.Duration
	var unbound []string
	err := wait.PollUntilContextTimeout(s.r.ctx, 50*time.Millisecond, timeout, true, func(context.Context) (bool, error) {
		s.mu.Lock()
		defer s.mu.Unlock()
		out, unbound = out[:0], unbound[:0]
		for name, made := range s.made {
			if bound, ok := s.bound[name]; ok {
				out = append(out, bound.Sub(made))
			} else {
				unbound = append(unbound, name)
			}
		}
		return len(unbound) == 0, nil
	})
	if err != nil {
		slices.Sort(unbound)
		s.r.t.Fatalf("plain pods %s: %v not bound within %v of the last one's creation", s.prefix, unbound, timeout)
	}
	slices.Sort(out)
	return out
}

// percentile returns the p-th percentile (0 < p ≤ 1) of sorted durations.
func percentile(sorted []time.Duration, p float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	i := int(float64(len(sorted))*p+0.999999) - 1
	return sorted[max(0, min(i, len(sorted)-1))]
}

// bigGang is a row of one huge gang created with concurrent clients while
// plain pods keep arriving: their p99 latency stays under 2 s, against a
// baseline measured first on the same cluster without the gang.
func bigGang(name, skip string, nodes []badNodes, members func(r *badRow) []*v1.Pod, then func(r *badRow)) badInput {
	var during *plainStream
	var before []time.Duration
	return badInput{
		name:  name,
		skip:  skip,
		nodes: nodes,
		give: func(r *badRow) {
			before = r.streamPlain("before", 40, 50*time.Millisecond).latencies(30 * time.Second)
			pods := members(r)
			start := time.Now()
			r.createAll(pods, 32)
			r.t.Logf("created %d members in %v", len(pods), time.Since(start).Round(time.Millisecond))
			// Measured from here: the load of creating the members is the
			// test's, not the scheduler's.
			during = r.streamPlain("during", 100, 100*time.Millisecond)
		},
		then: func(r *badRow) {
			start := time.Now()
			then(r)
			r.t.Logf("the gang's state reached in %v", time.Since(start).Round(time.Millisecond))
			lat := during.latencies(60 * time.Second)
			r.t.Logf("plain pods' latency without the gang: p50 %v p99 %v; with it: p50 %v p99 %v",
				percentile(before, .5), percentile(before, .99), percentile(lat, .5), percentile(lat, .99))
			if p99 := percentile(lat, .99); p99 > 2*time.Second {
				r.t.Errorf("plain pods' p99 latency beside the gang is %v, want under 2 s (%v without it)", p99, percentile(before, .99))
			}
		},
	}
}

func bigGangRows() []badInput {
	return []badInput{
		// 100 nodes of 49 pods: the cpu admits the gang, the pod slots
		// cannot hold it, so its plan fails after placing 4,900 or so.
		bigGang("gang of 5,000 members that cannot fit", "",
			[]badNodes{{"n", 100, simulator.NodeShape{CPU: "64", Memory: "256Gi", Pods: 49}}},
			func(r *badRow) []*v1.Pod {
				r.podGroup("huge", v1alpha1.PodGroupSpec{MinMember: 5000})
				var pods []*v1.Pod
				for _, name := range names("huge", 5000) {
					pods = append(pods, r.member(name, "1", map[string]string{v1alpha1.LabelPodGroup: "huge"}))
				}
				return pods
			},
			func(r *badRow) {
				r.waitConditionWithin(2*time.Minute, "huge", "Unschedulable", `^placeable \d+/5000: `)
				r.waitPodGroup("huge", "nothing scheduled", func(s *v1alpha1.PodGroupStatus) bool { return s.Scheduled == 0 })
			}),
		// Its members wait at PreEnqueue: Gang's hints leave them there on
		// pod deletions and node events (room does not make a gang valid)
		// and read a new pod's gang before theirs.
		bigGang("label-only gang of 20,000 pods, min-available 20001", "",
			[]badNodes{{"n", 4, simulator.NodeShape{CPU: "32", Memory: "128Gi"}}},
			func(r *badRow) []*v1.Pod {
				var pods []*v1.Pod
				for _, name := range names("never", 20000) {
					pods = append(pods, r.member(name, "1", musterLabels("never", 20001)))
				}
				return pods
			},
			func(r *badRow) {
				r.waitNote("GangInvalid", `^gang never: \d+ members exist, minMember 20001$`)
				for _, name := range []string{"never-0", "never-9999", "never-19999"} {
					if node := r.nodeOf(name); node != "" {
						r.t.Errorf("member %s of a gang that is never valid was bound to %s", name, node)
					}
				}
			}),
	}
}

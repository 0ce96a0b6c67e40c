package integration

import (
	"fmt"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/muster-sched/muster/apis/scheduling/v1alpha1"
	"github.com/muster-sched/muster/pkg/simulator"
)

// Reclaim: a queue below its deserved share takes back what another holds
// above its own. Each case runs once per kind of queue; preemption within
// a queue is in preempt_test.go.

// gangOf creates a PodGroup and its n members of cpu in a queue.
func (e *env) gangOf(name, queue string, min int32, n int, cpu string, mutate func(*v1.Pod)) []string {
	e.podGroup(name, v1alpha1.PodGroupSpec{MinMember: min, Queue: queue})
	var out []string
	for i := range n {
		p := e.member(fmt.Sprintf("%s-%d", name, i), cpu, map[string]string{v1alpha1.LabelPodGroup: name, v1alpha1.LabelQueue: queue})
		if mutate != nil {
			mutate(p)
		}
		e.create(p)
		out = append(out, p.Name)
	}
	return out
}

// reclaimQueuesOf creates the queues qa and qb, of weight 1 each, of that
// kind, on a cluster of 40 cpu.
func (e *env) reclaimQueuesOf(kind string) {
	e.t.Helper()
	e.nodes("n", 4, simulator.NodeShape{CPU: "10", Memory: "64Gi"})
	e.queueOf(kind, "qa", v1alpha1.QueueSpec{Weight: 1})
	e.queueOf(kind, "qb", v1alpha1.QueueSpec{Weight: 1})
}

// fillQueueA starts the scheduler and fills the 40-cpu cluster with queue
// qa's work: four gangs of five members, minMember 4, created while the
// scheduler runs, so that the fifth member of a gang often arrives while
// the first four are being placed.
func (e *env) fillQueueA(t *testing.T, kind string) []string {
	e.startScheduler(configFor(t, kind))
	var a []string
	for i := range 4 {
		a = append(a, e.gangOf(fmt.Sprintf("a%d", i), "qa", 4, 5, "2", nil)...)
	}
	e.waitBound(a...)
	return a
}

// podNames lists the case's pods that exist and are not being deleted.
func (e *env) podNames() map[string]bool {
	pods, err := cluster.Client.CoreV1().Pods(e.ns).List(e.ctx, metav1.ListOptions{})
	if err != nil {
		e.t.Fatal(err)
	}
	out := map[string]bool{}
	for _, p := range pods.Items {
		if p.DeletionTimestamp == nil {
			out[p.Name] = true
		}
	}
	return out
}

// TestReclaim: queue qa fills the cluster with four gangs of five members
// (minMember 4); queue qb arrives with a gang of four. qb reaches its
// deserved share by taking exactly the four members above qa's gangs'
// minimum, and no gang of qa drops below minMember.
func TestReclaim(t *testing.T) {
	for _, kind := range queueKinds {
		t.Run(kind+"/the members above minMember", func(t *testing.T) {
			e := newEnv(t)
			e.reclaimQueuesOf(kind)
			a := e.fillQueueA(t, kind)

			b := e.gangOf("b", "qb", 4, 4, "2", nil)
			e.waitBoundWithin(10*time.Second, b...)
			e.waitShares(map[string]float64{"qb": 8}, 0)

			left := e.podNames()
			// The minimal set: the 4 members above minMember.
			if evicted := missing(left, a); evicted != 4 {
				t.Errorf("evicted %d pods of qa; the minimal set is the 4 members above minMember", evicted)
			}
			for i := range 4 {
				if running := 5 - missing(left, names(fmt.Sprintf("a%d", i), 5)); running > 0 && running < 4 {
					t.Errorf("gang a%d left running with %d members, below its minMember 4", i, running)
				}
			}
			e.waitEvent("a0", "Reclaimed", fmt.Sprintf("evicted 1 pods of %s/a0 to give queue qb its deserved share (gang %s/b)", e.ns, e.ns))
		})
	}
}

// TestReclaimEvictsNothingForAGangThatCannotFit: the gang would be admitted,
// but no node can ever host its members; reclaim evicts nothing.
func TestReclaimEvictsNothingForAGangThatCannotFit(t *testing.T) {
	for _, kind := range queueKinds {
		t.Run(kind+"/nothing evicted", func(t *testing.T) {
			e := newEnv(t)
			e.reclaimQueuesOf(kind)
			a := e.fillQueueA(t, kind)
			b := e.gangOf("b", "qb", 4, 4, "2", func(p *v1.Pod) {
				p.Spec.NodeSelector = map[string]string{"zone": "nowhere"}
			})
			e.staysUnbound(3*time.Second, b...)
			left := e.podNames()
			for _, name := range a {
				if !left[name] {
					t.Errorf("pod %s was evicted for a gang that cannot fit anyway", name)
				}
			}
		})
	}
}

// TestReclaimBeyondExtras: qb's gang needs more than the members above
// minMember that qa's gangs have, so reclaim takes a0's extra and then a0
// whole. Choosing a0's extra twice (alone and within the whole gang) made
// every trial placement fail, and the gang never started (a review found
// it). Every pod of qa asks 2 cpu, so that qa fills the four nodes exactly
// in whatever order its pods are placed: with 1-cpu pods among them, the
// spreading score could leave 1 cpu free on several nodes, and a3 never
// fitted (seen once under make test).
func TestReclaimBeyondExtras(t *testing.T) {
	for _, kind := range queueKinds {
		t.Run(kind+"/the extras, then a whole gang", func(t *testing.T) {
			e := newEnv(t)
			e.reclaimQueuesOf(kind)
			e.startScheduler(configFor(t, kind))
			type gangOfA struct {
				name    string
				min     int32
				members []string
			}
			var gangs []gangOfA
			var a []string
			for _, g := range []struct {
				name string
				min  int32
				size int
				cpu  string
			}{{"a0", 2, 3, "2"}, {"a1", 5, 5, "2"}, {"a2", 5, 5, "2"}, {"a3", 5, 5, "2"}, {"a4", 2, 2, "2"}} {
				members := e.gangOf(g.name, "qa", g.min, g.size, g.cpu, nil)
				gangs = append(gangs, gangOfA{g.name, g.min, members})
				a = append(a, members...)
			}
			e.waitBound(a...)
			b := e.gangOf("b", "qb", 3, 3, "2", nil)
			e.waitBoundWithin(20*time.Second, b...)
			e.waitSettled(time.Second)
			left := e.podNames()
			for _, g := range gangs {
				if running := len(g.members) - missing(left, g.members); running > 0 && running < int(g.min) {
					t.Errorf("gang %s left running with %d members, below its minMember %d", g.name, running, g.min)
				}
			}
		})
	}
}

// TestReclaimByNode: queue qa's 16 one-cpu pods fill two nodes of 8 cpu,
// placed so that the eight reclaim prefers (the first by name) are five on
// n-0 and three on n-1. Queue qb's gang of four two-cpu members deserves 8
// cpu and may take eight pods: taken in that order, they leave room for
// three members; taken node by node, for all four.
func TestReclaimByNode(t *testing.T) {
	e := newEnv(t)
	e.nodes("n", 2, simulator.NodeShape{CPU: "8", Memory: "32Gi"})
	e.queue("qa", v1alpha1.QueueSpec{Weight: 1})
	e.queue("qb", v1alpha1.QueueSpec{Weight: 1})
	onN0 := map[int]bool{0: true, 1: true, 2: true, 3: true, 4: true, 8: true, 9: true, 10: true}
	var a []string
	for i := range 16 {
		p := e.member(fmt.Sprintf("a%02d", i), "1", map[string]string{v1alpha1.LabelQueue: "qa"})
		p.Spec.NodeName = "n-1"
		if onN0[i] {
			p.Spec.NodeName = "n-0"
		}
		e.create(p)
		a = append(a, p.Name)
	}
	e.startScheduler(gangConfig(t))
	e.waitAllocated(musterQueue, "qa", "16")

	b := e.gangOf("b", "qb", 4, 4, "2", nil)
	placed := e.waitBoundWithin(10*time.Second, b...)
	if evicted := missing(e.podNames(), a); evicted != 8 {
		t.Errorf("evicted %d pods of qa, want the 8 above its deserved share", evicted)
	}
	for _, name := range b {
		if placed[name] != "n-0" {
			t.Errorf("member %s placed on %s, want all four on n-0, emptied", name, placed[name])
		}
	}
}

package integration

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/klog/v2"
	"k8s.io/klog/v2/ktesting"

	"github.com/muster-sched/muster/pkg/gang"
	"github.com/muster-sched/muster/pkg/queue"
	"github.com/muster-sched/muster/pkg/simulator"
)

// TestSoak (issue 29, item 4) drives the scheduler against the real
// apiserver through random steps drawn from a seed (MUSTER_SOAK_SEED, else
// the clock; printed) — gangs and plain pods created, bound, finished and
// deleted (also while pending and mid-bind), PodGroups deleted before and
// after their pods, Queues created, closed, reweighted and deleted, nodes
// added, cordoned and deleted with pods on them, the scheduler restarted
// (soak_steps_test.go) — and checks after every step, once the cluster is
// quiet, that the queue accounting has not leaked and no room is idle
// while a pod that fits it waits. MUSTER_SOAK_STEPS sets the number of
// steps: 500 in `make test`, more in `make soak`.
//
// Quiet: the pods (node, phase, deletion, nomination), the nodes and the
// accounting's queue figures unchanged for quietFor, polled; at most
// quietMax (then the checks run anyway: they are built to hold under
// slow events too).
//
// Audit: the audit (Proportion's periodic one is off) runs at quiet until
// two audits in a row find nothing: no sum corrected, no record repaired,
// no record differing from the scheduler's caches. An audit may find
// records differing (an event on its way: a finished member's copy takes
// up to a second); then the next runs after inFlight and quiet, and any
// that still differ the same way are repaired, which fails the run. No
// audit may ever correct a sum or repair a record.
//
// Idle: a pending pod P is a violation when a ready, schedulable node has
// free room for it — allocatable less the requests of the unfinished pods
// bound to it (terminating ones included: their kubelet still runs them)
// and of the pending pods nominated to it, as kube-scheduler counts — and
// nothing Muster documents keeps P waiting:
//   - P is in no gang and no queue: Muster never limits it; or
//   - P is a gang of one (only the queue label) of an existing, Open queue
//     Q that P keeps within its realCapability and the overcommit bound,
//     and either Q is within its deserved share with P (allocated +
//     inqueue − elastic + P ≤ deserved: its placement ceiling under
//     Proportion), or no other queue claims the room: no open queue R
//     below its own share has a pending gang that could use it (valid —
//     its PodGroup exists, its live members reach its minimum — and its
//     pending members fit the free room, placed first-fit).
//
// So a pod of Q legitimately waits while Q is closed, missing or at its
// ceiling and another queue R claims the room under R's share for a gang
// that could use it (that gang is bound, or tried and blocked, by quiet).
// Nothing else excuses it: not members of Q bound to cordoned or deleted
// nodes (the accounting lends what queues hold off the divided nodes), not
// a gang of R that cannot start (too few live members, no PodGroup: it
// claims nothing), not Q's inqueue (an admission lasts one placement
// attempt, so inqueue at quiet is held by no gang being placed). Members
// of gangs of several pods are not checked (their fit is a packing
// problem across nodes; the audit covers their accounting). A flagged pod
// gets idleGrace to be placed (a pod in backoff waits up to 10 s,
// kube-scheduler's podMaxBackoffSeconds): one still waiting then fails the
// test, with the queue's figures and the cluster described
// (soak_idle_test.go).
func TestSoak(t *testing.T) {
	seed, steps := soakSeed(t), soakStepCount(t)
	t.Logf("soak: seed %d, %d steps (rerun with MUSTER_SOAK_SEED=%d)", seed, steps, seed)
	// The scheduler logs to the test at verbosity 1: a failure's output
	// is the step log and the scheduler's errors, not every cycle.
	logger := ktesting.NewLogger(t, ktesting.NewConfig(ktesting.Verbosity(1)))
	e := newEnvContext(t, klog.NewContext(context.Background(), logger))
	s := &soak{
		t: t, e: e, seed: seed, steps: steps,
		rng:    rand.New(rand.NewPCG(uint64(seed), 0x50a6)),
		config: withPluginArgs(t, gangConfig(t), "Proportion", map[string]any{"auditIntervalSeconds": 0}),
		counts: map[string]int{},
	}
	t.Cleanup(s.cleanup)
	for range 3 {
		s.addNode()
	}
	s.start()
	s.settle()
	start := time.Now()
	for s.step = 1; s.step <= steps; s.step++ {
		kind, what := s.pickAndRun()
		s.counts[kind]++
		s.record(fmt.Sprintf("step %d %s: %s", s.step, kind, what))
		s.settle()
		if s.step%100 == 0 {
			t.Logf("soak: %d steps in %v, 0 drift", s.step, time.Since(start).Round(time.Second))
		}
	}
	t.Logf("soak: seed %d, %d steps in %v (%v waiting for quiet), 0 drift, %d idle flags resolved within the grace; "+
		"steps per kind: %v", seed, steps, time.Since(start).Round(time.Second), s.quiet.Round(time.Second), s.resolved, s.counts)
}

const (
	quietFor  = 200 * time.Millisecond
	quietMax  = 10 * time.Second
	idleGrace = 15 * time.Second
	// inFlight is how long an audit that found records differing waits
	// before the next.
	inFlight = 1200 * time.Millisecond
	// soakMaxPods bounds the pods of the case; soakMinNodes and soakMaxNodes
	// the nodes (cordoned ones included).
	soakMaxPods  = 60
	soakMinNodes = 2
	soakMaxNodes = 6
	// soakLog is how many of the last steps a failure shows.
	soakLog = 40
)

// soak is the state of one soak run.
type soak struct {
	t      *testing.T
	e      *env
	seed   int64
	steps  int
	rng    *rand.Rand
	config string
	sched  *simulator.Scheduler
	step   int
	// serial numbers the objects the run creates: names are never reused.
	serial int
	log    []string
	counts map[string]int
	// resolved counts idle flags that cleared within idleGrace; quiet is
	// the time spent waiting for quiet after the steps.
	resolved int
	quiet    time.Duration
}

func soakSeed(t *testing.T) int64 {
	if v := os.Getenv("MUSTER_SOAK_SEED"); v != "" {
		seed, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			t.Fatalf("MUSTER_SOAK_SEED=%q: %v", v, err)
		}
		return seed
	}
	return time.Now().UnixNano()
}

func soakStepCount(t *testing.T) int {
	v := os.Getenv("MUSTER_SOAK_STEPS")
	if v == "" {
		return 500
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 0 {
		t.Fatalf("MUSTER_SOAK_STEPS=%q: want a whole number", v)
	}
	return n
}

// fatalf fails the run, naming the seed, the step and the last steps.
func (s *soak) fatalf(format string, args ...any) {
	s.t.Helper()
	s.t.Fatalf("step %d: %s\nrerun with MUSTER_SOAK_SEED=%d MUSTER_SOAK_STEPS=%d\nlast steps:\n%s",
		s.step, fmt.Sprintf(format, args...), s.seed, s.steps, strings.Join(s.log, "\n"))
}

func (s *soak) record(line string) {
	s.log = append(s.log, line)
	if len(s.log) > soakLog {
		s.log = s.log[len(s.log)-soakLog:]
	}
}

// start runs a scheduler and waits until its queue accounting is on.
func (s *soak) start() {
	s.t.Helper()
	sched, err := simulator.StartScheduler(s.e.ctx, kubeconfig, []byte(s.config))
	if err != nil {
		s.fatalf("starting the scheduler: %v", err)
	}
	s.sched = sched
	err = wait.PollUntilContextTimeout(s.e.ctx, 20*time.Millisecond, time.Minute, true, func(context.Context) (bool, error) {
		return sched.Queues() != nil, nil
	})
	if err != nil {
		s.fatalf("the scheduler's queue accounting did not start: %v", err)
	}
}

// cleanup stops the scheduler and deletes what the run made outside its
// namespace's pods (newEnv deletes those, the next case the nodes).
func (s *soak) cleanup() {
	if s.sched != nil {
		s.sched.Stop()
	}
	ctx := context.Background()
	for _, q := range soakQueues {
		_ = cluster.Muster.SchedulingV1alpha1().Queues().Delete(ctx, q, metav1.DeleteOptions{})
	}
	_ = cluster.Muster.SchedulingV1alpha1().PodGroups(s.e.ns).DeleteCollection(ctx, metav1.DeleteOptions{}, metav1.ListOptions{})
}

// settle waits for quiet, then audits and checks for idle room.
func (s *soak) settle() {
	s.t.Helper()
	start := time.Now()
	s.waitQuiet()
	s.quiet += time.Since(start)
	s.audit()
	s.checkIdle()
}

// waitQuiet waits until the cluster's fingerprint has not changed for
// quietFor, or quietMax has passed.
func (s *soak) waitQuiet() {
	s.t.Helper()
	last, since, deadline := s.fingerprint(), time.Now(), time.Now().Add(quietMax)
	for time.Since(since) < quietFor && time.Now().Before(deadline) {
		time.Sleep(40 * time.Millisecond)
		if now := s.fingerprint(); now != last {
			last, since = now, time.Now()
		}
	}
}

func (s *soak) fingerprint() string {
	s.t.Helper()
	pods, nodes := s.pods(), s.nodes()
	var b strings.Builder
	for _, p := range pods {
		fmt.Fprintf(&b, "%s/%s/%s/%s/%v;", p.Name, p.Spec.NodeName, p.Status.Phase, p.Status.NominatedNodeName, p.DeletionTimestamp != nil)
	}
	for _, n := range nodes {
		fmt.Fprintf(&b, "%s/%v;", n.Name, n.Spec.Unschedulable)
	}
	snap := s.sched.Queues().Refresh()
	names := make([]string, 0, len(snap.Queues))
	for name := range snap.Queues {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		f := snap.Queues[name]
		fmt.Fprintf(&b, "%s %v %v %v %v;", name, f.Allocated, f.Request, f.Inqueue, f.Deserved)
	}
	return b.String()
}

// audit runs the accounting's audit at quiet (see TestSoak) until two in
// a row find no record differing from the caches.
func (s *soak) audit() {
	s.t.Helper()
	logger := klog.FromContext(s.e.ctx)
	clean := 0
	for round := 0; clean < 2; round++ {
		d, err := s.sched.Queues().Audit(logger)
		if err != nil {
			s.fatalf("audit: %v", err)
		}
		if !d.Empty() {
			s.fatalf("the audit found drift: sums %v, records repaired %v (unconfirmed %v)", d.Sums, d.Objects, d.Unconfirmed)
		}
		if len(d.Unconfirmed) == 0 {
			clean++
			continue
		}
		if round == 4 {
			s.fatalf("records still differ from the scheduler's caches at quiet: %v", d.Unconfirmed)
		}
		// An event on its way: a finished member's copy may take a second
		// (README, Gangs). The next audit repairs what still differs the
		// same way, and fails the run.
		clean = 0
		time.Sleep(inFlight)
		s.waitQuiet()
	}
}

// soakStep is one kind of step: run does it and says what it did, or
// returns "" when it does not apply now (another kind is drawn).
type soakStep struct {
	name   string
	weight int
	run    func(s *soak) string
}

// soakSteps are the kinds of step and how often each is drawn; restart is
// about 2 % of the steps.
var soakSteps = []soakStep{
	{"plain pods", 10, createPlainPods},
	{"queue pods", 12, createQueuePods},
	{"PodGroup gang", 8, createPodGroupGang},
	{"label gang", 4, createLabelGang},
	{"create and delete", 6, createAndDelete},
	{"delete pods", 8, deletePods},
	{"finish pods", 5, finishPods},
	{"reap pods", 5, reapPods},
	{"delete PodGroup", 4, deletePodGroup},
	{"create queue", 4, createQueue},
	{"close or open queue", 4, toggleQueue},
	{"reweight queue", 4, reweightQueue},
	{"delete queue", 2, deleteQueue},
	{"add node", 4, addNodeStep},
	{"cordon or uncordon node", 4, cordonStep},
	{"delete node", 3, deleteNodeStep},
	{"restart scheduler", 2, restartStep},
}

// pickAndRun draws kinds by weight until one applies, and runs it.
func (s *soak) pickAndRun() (string, string) {
	total := 0
	for _, k := range soakSteps {
		total += k.weight
	}
	for {
		n := s.rng.IntN(total)
		for _, k := range soakSteps {
			if n -= k.weight; n < 0 {
				if what := k.run(s); what != "" {
					return k.name, what
				}
				break
			}
		}
	}
}

// describe renders the queues' figures and the pods, for a failure.
func (s *soak) describe() string {
	var b strings.Builder
	snap := s.sched.Queues().Refresh()
	fmt.Fprintf(&b, "total %v, off nodes %v, unclaimed %v\n", snap.Total, snap.OffNodes, snap.Unclaimed())
	names := make([]string, 0, len(snap.Queues))
	for name := range snap.Queues {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		f := snap.Queues[name]
		fmt.Fprintf(&b, "queue %s: closed %v weight %d allocated %v request %v inqueue %v deserved %v realCapability %v\n",
			name, f.Closed, f.Weight, f.Allocated, f.Request, f.Inqueue, f.Deserved, f.RealCapability)
	}
	snap.RangeGangs(func(k gang.Key, g *queue.GangFigures) bool {
		if g.Next != nil || g.Admitted {
			fmt.Fprintf(&b, "gang %s: queue %s min %v allocated %v next %v blocked %v admitted %v\n", k, g.Queue, g.MinResources, g.Allocated, g.Next, g.Blocked, g.Admitted)
		}
		return true
	})
	for _, p := range s.pods() {
		fmt.Fprintf(&b, "pod %s: node %q phase %s deleting %v labels %v requests %v\n",
			p.Name, p.Spec.NodeName, p.Status.Phase, p.DeletionTimestamp != nil, p.Labels, requests(p))
	}
	for _, n := range s.nodes() {
		fmt.Fprintf(&b, "node %s: unschedulable %v allocatable %v\n", n.Name, n.Spec.Unschedulable, queue.FromList(n.Status.Allocatable))
	}
	return b.String()
}

// pods lists the case's pods, by name.
func (s *soak) pods() []*v1.Pod {
	s.t.Helper()
	list, err := cluster.Client.CoreV1().Pods(s.e.ns).List(s.e.ctx, metav1.ListOptions{})
	if err != nil {
		s.fatalf("listing pods: %v", err)
	}
	out := make([]*v1.Pod, len(list.Items))
	for i := range list.Items {
		out[i] = &list.Items[i]
	}
	return out
}

// nodes lists the cluster's nodes, by name.
func (s *soak) nodes() []*v1.Node {
	s.t.Helper()
	list, err := cluster.Client.CoreV1().Nodes().List(s.e.ctx, metav1.ListOptions{})
	if err != nil {
		s.fatalf("listing nodes: %v", err)
	}
	out := make([]*v1.Node, len(list.Items))
	for i := range list.Items {
		out[i] = &list.Items[i]
	}
	return out
}

package deploy

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"k8s.io/klog/v2/ktesting"

	"github.com/muster-sched/muster/pkg/simulator"
)

// Lease timings of the failover test, set through the chart's values. Short,
// so the test is quick, but with room for a loaded machine: a leader that
// cannot renew within renewDeadline exits.
const (
	leaseDuration = 6 * time.Second
	renewDeadline = 4 * time.Second
	retryPeriod   = 500 * time.Millisecond
)

// TestFailover runs two replicas of the chart (replace-default mode, leader
// election on) as separate processes of the built binary and kills the
// leader with SIGKILL while gangs are half placed, twice: the follower takes
// over within the lease time, no pod is ever bound twice, no gang is left
// partially bound, and every gang completes. After the first kill a fresh
// replica starts, as the Deployment would start one, and is the follower
// that takes over from the second kill.
//
// The replicas bind slowly (client QPS 20) so that gangs are still being
// placed when the leader dies; the kill comes once a quarter of the pods are
// bound and some gang is bound in part.
func TestFailover(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	r := installChart(t, ctx, "muster", "muster-failover",
		"--set", "mode=replace-default",
		"--set", fmt.Sprintf("leaderElection.leaseDuration=%v,leaderElection.renewDeadline=%v,leaderElection.retryPeriod=%v", leaseDuration, renewDeadline, retryPeriod),
		"--set", "clientConnection.qps=20,clientConnection.burst=20",
	)
	leaseLog := leaseAcquired("kube-system/kube-scheduler")
	const gangs, gangSize = 8, 6

	// Nodes for every gang of both rounds, with room to spare.
	w := newWorkload(t, ctx, "work-failover", "default-scheduler", 8, simulator.NodeShape{CPU: "16", Memory: "64Gi"})
	binds := watchBinds(t, ctx, w.ns)

	replicas := []*schedulerProcess{startReplica(t, ctx, r, "replica-0"), startReplica(t, ctx, r, "replica-1")}
	leader, follower := waitLeader(t, ctx, leaseLog, replicas)
	if err := follower.waitHTTP(ctx, "/readyz", 30*time.Second); err != nil {
		t.Fatal(err)
	}

	for round := range 2 {
		prefix := fmt.Sprintf("r%d-g", round)
		for g := range gangs {
			w.create(w.gangPods(fmt.Sprintf("%s%d", prefix, g), gangSize, "1", false))
		}
		// Kill the leader once a quarter of this round's pods are bound and a
		// gang is bound in part.
		err := binds.waitFor(ctx, 60*time.Second, func(bound, size map[string]int) bool {
			total := 0
			for g, n := range bound {
				if strings.HasPrefix(g, prefix) {
					total += n
				}
			}
			return total >= gangs*gangSize/4 && len(partialGangs(bound, size)) > 0
		})
		if err != nil {
			t.Fatalf("round %d: no gang half placed: %v", round, err)
		}
		leader.kill()
		killed := time.Now()
		// Binds the leader sent before it died may still land; then the state
		// is what the follower inherits.
		time.Sleep(200 * time.Millisecond)
		bound, size, err := w.boundByGang()
		if err != nil {
			t.Fatal(err)
		}
		partial := partialGangs(bound, size)
		t.Logf("round %d: killed %s with gangs bound/size:%s", round, leader.name, describeGangs(bound, size))
		if len(partial) == 0 {
			// A gang was bound in part when the leader was killed (the wait
			// above); binds it had already sent completed it since. That
			// is correct: the follower inherits whole gangs.
			t.Logf("round %d: the dead leader's last binds completed every half-bound gang", round)
		}

		took, err := follower.waitLog(ctx, leaseLog, 3*leaseDuration)
		if err != nil {
			t.Fatalf("round %d: the follower did not take over: %v", round, err)
		}
		if took.Before(killed) {
			t.Fatalf("round %d: %s acquired the lease while %s still held it", round, follower.name, leader.name)
		}
		takeover := took.Sub(killed)
		t.Logf("round %d: %s took over %v after the kill", round, follower.name, takeover.Round(time.Millisecond))
		// The follower polls the lease every retryPeriod to 2.2×retryPeriod
		// (client-go's jitter); it takes over once leaseDuration has passed
		// since it last saw a renewal, at its next poll: at most
		// leaseDuration + 2.2×retryPeriod after the kill, plus 2s for a
		// loaded machine.
		if limit := leaseDuration + retryPeriod*22/10 + 2*time.Second; takeover > limit {
			t.Errorf("round %d: takeover took %v, more than the lease time allows (%v)", round, takeover, limit)
		}

		w.waitAllBound(90 * time.Second)
		// The replacement replica, as the Deployment would start it.
		leader, follower = follower, startReplica(t, ctx, r, fmt.Sprintf("replica-%d", round+2))
		if err := follower.waitHTTP(ctx, "/readyz", 30*time.Second); err != nil {
			t.Fatal(err)
		}
		if follower.hasLogged(leaseLog) {
			t.Fatalf("round %d: the new replica %s took the lease while %s holds it", round, follower.name, leader.name)
		}
	}

	if v := binds.violations(); len(v) > 0 {
		t.Errorf("pods bound twice:\n%s", strings.Join(v, "\n"))
	}
	bound, size, err := w.boundByGang()
	if err != nil {
		t.Fatal(err)
	}
	if partial := partialGangs(bound, size); len(partial) > 0 || len(size) != 2*gangs {
		t.Errorf("want %d gangs, all bound whole; bound/size:%s", 2*gangs, describeGangs(bound, size))
	}
	for _, p := range append(replicas, leader, follower) {
		if lines := p.forbidden(); len(lines) > 0 {
			t.Errorf("%s was refused by the chart's RBAC:\n%s", p.name, strings.Join(lines, "\n"))
		}
	}
}

// waitLeader waits until one of the replicas holds the lease and returns it
// and another.
func waitLeader(t *testing.T, ctx context.Context, leaseLog string, replicas []*schedulerProcess) (leader, follower *schedulerProcess) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		for i, p := range replicas {
			if p.hasLogged(leaseLog) {
				return p, replicas[(i+1)%len(replicas)]
			}
		}
		select {
		case <-ctx.Done():
			t.Fatal(ctx.Err())
		case <-time.After(50 * time.Millisecond):
		}
	}
	t.Fatal("no replica acquired the lease in 30s")
	return nil, nil
}

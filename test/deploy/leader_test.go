package deploy

import (
	"bufio"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	auditv1 "k8s.io/apiserver/pkg/apis/audit/v1"
	"k8s.io/klog/v2/ktesting"

	"github.com/muster-sched/muster/pkg/controllers/podgroup"
	"github.com/muster-sched/muster/pkg/simulator"
)

// TestOneLeaderWrites runs two replicas of the chart with leader election:
// the leader writes the status of a gang that cannot fit, with its reason;
// the follower makes no write at all (the apiserver's audit log); after
// the leader is killed the follower takes over and writes the status of a
// new gang within the lease time; the replica started after it writes
// nothing either.
func TestOneLeaderWrites(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	r := installChart(t, ctx, "muster", "muster-leader",
		"--set", "mode=replace-default",
		"--set", fmt.Sprintf("leaderElection.leaseDuration=%v,leaderElection.renewDeadline=%v,leaderElection.retryPeriod=%v", leaseDuration, renewDeadline, retryPeriod),
	)
	leaseLog := leaseAcquired("kube-system/kube-scheduler")
	w := newWorkload(t, ctx, "work-leader", "default-scheduler", 2, simulator.NodeShape{CPU: "4", Memory: "16Gi"})

	leader, follower := waitLeader(t, ctx, leaseLog, []*schedulerProcess{startReplica(t, ctx, r, "replica-0"), startReplica(t, ctx, r, "replica-1")})
	if err := follower.waitHTTP(ctx, "/readyz", 30*time.Second); err != nil {
		t.Fatal(err)
	}
	// Three members of 8 CPUs on two nodes of 4: it never fits.
	w.createPodGroup("big", 3)
	w.create(w.gangPods("big", 3, "8", true))
	waitUnschedulable(t, ctx, w.ns, "big", 30*time.Second)
	if writes(t, leader) == 0 {
		t.Fatalf("no write of the leader %s in the audit log: it cannot tell who writes", leader.name)
	}
	if n := writes(t, follower); n > 0 {
		t.Errorf("the follower %s made %d writes, want none", follower.name, n)
	}

	leader.kill()
	killed := time.Now()
	if _, err := follower.waitLog(ctx, leaseLog, 3*leaseDuration); err != nil {
		t.Fatalf("the follower did not take over: %v", err)
	}
	w.createPodGroup("late", 3)
	w.create(w.gangPods("late", 3, "8", true))
	waitUnschedulable(t, ctx, w.ns, "late", 30*time.Second)
	took := time.Since(killed)
	t.Logf("the new leader wrote the new gang's status %v after the kill", took.Round(time.Millisecond))
	// Takeover (lease duration and two polls, see TestFailover), then the
	// status, plus 2s for a loaded machine.
	if limit := leaseDuration + retryPeriod*22/10 + 4*time.Second; took > limit {
		t.Errorf("the new leader wrote status %v after the kill, more than the lease time allows (%v)", took, limit)
	}

	replacement := startReplica(t, ctx, r, "replica-2")
	if err := replacement.waitHTTP(ctx, "/readyz", 30*time.Second); err != nil {
		t.Fatal(err)
	}
	// Something for a writer to write: the gang loses a member. The
	// leader writes it; then the follower has had its chance to.
	before, err := cluster.Muster.SchedulingV1alpha1().PodGroups(w.ns).Get(ctx, "late", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	w.deletePod("late-2")
	err = wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		pg, err := cluster.Muster.SchedulingV1alpha1().PodGroups(w.ns).Get(ctx, "late", metav1.GetOptions{})
		return err == nil && pg.ResourceVersion != before.ResourceVersion, nil
	})
	if err != nil {
		t.Fatalf("the leader did not write the status of the shrunk gang: %v", err)
	}
	if n := writes(t, replacement); n > 0 {
		t.Errorf("the new follower %s made %d writes, want none", replacement.name, n)
	}
	for _, p := range []*schedulerProcess{leader, follower, replacement} {
		if lines := p.forbidden(); len(lines) > 0 {
			t.Errorf("%s was refused by the chart's RBAC:\n%s", p.name, strings.Join(lines, "\n"))
		}
	}
}

// waitUnschedulable waits until the PodGroup's status says why it cannot
// be placed.
func waitUnschedulable(t *testing.T, ctx context.Context, ns, name string, timeout time.Duration) {
	t.Helper()
	var last []metav1.Condition
	err := wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, timeout, true, func(ctx context.Context) (bool, error) {
		pg, err := cluster.Muster.SchedulingV1alpha1().PodGroups(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		last = pg.Status.Conditions
		for _, c := range last {
			if c.Type == podgroup.ConditionScheduled && c.Reason == podgroup.ReasonUnschedulable && c.Message != "" {
				return true, nil
			}
		}
		return false, nil
	})
	if err != nil {
		t.Fatalf("PodGroup %s/%s does not say why it waits: conditions %+v: %v", ns, name, last, err)
	}
}

// writes counts the requests of the process's token that the apiserver
// carried out and that may change something (the audit log's create,
// update, patch, delete...), but the token and access reviews its secure
// port asks for when it is scraped or probed: they change nothing.
func writes(t *testing.T, p *schedulerProcess) int {
	t.Helper()
	if p.credential == "" {
		t.Fatalf("%s has no credential to find in the audit log", p.name)
	}
	f, err := os.Open(auditLog)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	n := 0
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		var e auditv1.Event
		if err := json.Unmarshal(sc.Bytes(), &e); err != nil {
			t.Fatalf("audit log: %v", err)
		}
		if e.Stage != auditv1.StageResponseComplete || !slices.Contains(e.User.Extra[credentialID], p.credential) ||
			e.ResponseStatus == nil || e.ResponseStatus.Code >= 300 {
			continue
		}
		if r := e.ObjectRef; r != nil && (r.Resource == "tokenreviews" || r.Resource == "subjectaccessreviews") {
			continue
		}
		if n < 5 {
			t.Logf("%s wrote: %s %s", p.name, e.Verb, e.RequestURI)
		}
		n++
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return n
}

// credentialID is the user extra that identifies a token.
const credentialID = "authentication.kubernetes.io/credential-id"

// tokenID returns a service-account token's ID (its JWT's jti claim).
func tokenID(t *testing.T, token string) string {
	t.Helper()
	parts := strings.Split(token, ".")
	if len(parts) != 3 {
		t.Fatalf("a token that is not a JWT")
	}
	payload, err := base64.RawURLEncoding.DecodeString(parts[1])
	if err != nil {
		t.Fatal(err)
	}
	var claims struct {
		ID string `json:"jti"`
	}
	if err := json.Unmarshal(payload, &claims); err != nil || claims.ID == "" {
		t.Fatalf("token claims without an ID: %v", err)
	}
	return claims.ID
}

func (w *workload) deletePod(name string) {
	w.t.Helper()
	if err := cluster.Client.CoreV1().Pods(w.ns).Delete(w.ctx, name, metav1.DeleteOptions{GracePeriodSeconds: new(int64)}); err != nil {
		w.t.Fatal(err)
	}
}

// live returns the pods of the gang that exist and are not being deleted.
func (w *workload) live(gangName string) []*v1.Pod {
	var out []*v1.Pod
	for _, p := range w.pods(gangName) {
		if p.DeletionTimestamp == nil {
			out = append(out, p)
		}
	}
	return out
}

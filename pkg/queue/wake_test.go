package queue

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"

	"github.com/muster-sched/muster/apis/scheduling/v1alpha1"
	"github.com/muster-sched/muster/pkg/gang"
)

// TestNoVictimsRetriedWhenSharesMove: a gang reclaim found no victims for
// is handed back (Redivided, TakeRedivided) once the deserved shares move,
// at once if they moved since the snapshot it was judged on, and not while
// they stay; trying it again (Retry) forgets it.
func TestNoVictimsRetriedWhenSharesMove(t *testing.T) {
	q1 := &v1alpha1.Queue{ObjectMeta: metav1.ObjectMeta{Name: "q1", UID: "q1"}, Spec: v1alpha1.QueueSpec{Weight: 1}}
	q2 := &v1alpha1.Queue{ObjectMeta: metav1.ObjectMeta{Name: "q2", UID: "q2"}, Spec: v1alpha1.QueueSpec{Weight: 1}}
	var pods []*v1.Pod
	pods = append(pods, labelGang("running", "q2", 8, "n", "n", "n", "n", "n", "n", "n", "n")...)
	pods = append(pods, labelGang("waiting", "q1", 8, "", "", "", "", "", "", "", "")...)
	f := newLifecycleFixture(t, []*v1alpha1.Queue{q1, q2}, pods)
	waiting := gang.Key{Family: gang.FamilyMuster, Namespace: "ns", Name: "waiting"}
	poll(f.ctx, t, "the accounting to count every bound pod", func() bool {
		return f.state.Refresh().Used[v1.ResourceCPU] == 8000
	})
	deserved := func(snap *Snapshot) map[string]string {
		return map[string]string{"q1": onlyNonZero(snap.Queues["q1"].Deserved).String(), "q2": onlyNonZero(snap.Queues["q2"].Deserved).String()}
	}
	// setWeight gives q1 a new weight and waits until a refresh divides by it.
	setWeight := func(weight int32, want map[string]string) *Snapshot {
		t.Helper()
		err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
			q, err := f.muster.SchedulingV1alpha1().Queues().Get(f.ctx, "q1", metav1.GetOptions{})
			if err != nil {
				return err
			}
			q.Spec.Weight = weight
			q.Generation++ // as the apiserver would; the fake does not
			_, err = f.muster.SchedulingV1alpha1().Queues().Update(f.ctx, q, metav1.UpdateOptions{})
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
		var snap *Snapshot
		poll(f.ctx, t, "the shares of the new weight", func() bool {
			snap = f.state.Refresh()
			return cmp.Equal(deserved(snap), want)
		})
		return snap
	}
	signalled := func() bool {
		select {
		case <-f.state.Redivided():
			return true
		default:
			return false
		}
	}
	check := func(step string, wantSignal bool, want []gang.Key) {
		t.Helper()
		if got := signalled(); got != wantSignal {
			t.Errorf("%s: Redivided signalled %v, want %v", step, got, wantSignal)
		}
		if diff := cmp.Diff(want, f.state.TakeRedivided()); diff != "" {
			t.Errorf("%s: TakeRedivided (-want,+got):\n%s", step, diff)
		}
	}

	snap := f.state.Refresh()
	if diff := cmp.Diff(map[string]string{"q1": "cpu=4", "q2": "cpu=4"}, deserved(snap)); diff != "" {
		t.Fatalf("deserved (-want,+got):\n%s", diff)
	}
	signalled() // drain what building the fixture may have sent
	f.state.NoVictims(waiting, snap)
	check("no victims, shares unchanged", false, nil)

	f.state.NoVictims(waiting, snap)
	setWeight(3, map[string]string{"q1": "cpu=6", "q2": "cpu=2"})
	check("shares moved", true, []gang.Key{waiting})
	check("taken already", false, nil)

	// Judged on the shares before the weight changed back: handed back at
	// once.
	stale := f.state.Refresh()
	setWeight(1, map[string]string{"q1": "cpu=4", "q2": "cpu=4"})
	signalled() // the new division found no gang to retry
	f.state.NoVictims(waiting, stale)
	check("judged on stale shares", true, []gang.Key{waiting})

	// A usage change that moves no share (the running gang's members
	// finishing one by one would) hands nothing back; tried again, the gang
	// is forgotten.
	f.state.NoVictims(waiting, f.state.Refresh())
	f.state.Retry(waiting)
	setWeight(3, map[string]string{"q1": "cpu=6", "q2": "cpu=2"})
	check("tried again before the shares moved", false, nil)
}

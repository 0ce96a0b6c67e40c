package gang

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	kubefake "k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2/ktesting"
	st "k8s.io/kubernetes/pkg/scheduler/testing"

	"github.com/muster-sched/muster/apis/scheduling/v1alpha1"
	musterfake "github.com/muster-sched/muster/pkg/generated/clientset/versioned/fake"
)

// TestShortGangInvalid: while a gang is short of members, Observe says so
// without computing its whole status, and says what the whole status says.
func TestShortGangInvalid(t *testing.T) {
	m := newTestManager(t)
	member := func(name, min string) *v1.Pod {
		return st.MakePod().Namespace("ns").Name(name).UID(name).
			Label(v1alpha1.LabelPodGroup, "g").Label(v1alpha1.LabelMinAvailable, min).Obj()
	}
	key := Key{FamilyMuster, "ns", "g"}
	for _, step := range []struct {
		name    string
		observe *v1.Pod
		delete  *v1.Pod
		want    string
	}{
		{name: "first of three", observe: member("a", "3"), want: "1 members exist, minMember 3"},
		{name: "second of three", observe: member("b", "3"), want: "2 members exist, minMember 3"},
		{name: "a member says another minimum", observe: member("a", "2"),
			want: `PodGroup ns/g does not exist and members disagree on muster.dev/min-available: "2" (a), "3" (b)`},
		{name: "both say two", observe: member("b", "2"), want: ""},
		{name: "one left", delete: member("a", "2"), want: "1 members exist, minMember 2"},
		{name: "a third member of a failed one's gang", observe: func() *v1.Pod {
			p := member("c", "2")
			p.Status.Phase = v1.PodFailed
			return p
		}(), want: "1 members exist, minMember 2"},
		{name: "it is back", observe: member("c", "2"), want: ""},
	} {
		var got string
		if step.observe != nil {
			_, got, _ = m.Observe(step.observe)
		} else {
			m.deletePod(step.delete)
			m.mu.Lock()
			got = m.invalidLocked(key)
			m.mu.Unlock()
		}
		if diff := cmp.Diff(step.want, got); diff != "" {
			t.Errorf("%s: invalid (-want +got):\n%s", step.name, diff)
		}
		if full := m.Status(key).Invalid; full != got {
			t.Errorf("%s: the short answer %q differs from the whole status's %q", step.name, got, full)
		}
	}
}

// TestObserveWakesRefusedMembers: the member whose Observe makes its gang
// valid wakes the members refused before it, once, even when nothing else
// will tell the Manager of it (a scheduling gate holds it back after
// PreEnqueue).
func TestObserveWakesRefusedMembers(t *testing.T) {
	m := newTestManager(t)
	woken := make(chan []string, 4)
	m.OnWake(func(_ Key, pending []*v1.Pod) {
		var names []string
		for _, p := range pending {
			names = append(names, p.Name)
		}
		woken <- names
	})
	member := func(name string) *v1.Pod {
		return st.MakePod().Namespace("ns").Name(name).UID(name).
			Label(v1alpha1.LabelPodGroup, "g").Label(v1alpha1.LabelMinAvailable, "2").Obj()
	}
	for _, step := range []struct {
		name  string
		pod   *v1.Pod
		valid bool
		want  []string
	}{
		{name: "first of two, refused", pod: member("a")},
		{name: "second makes the gang valid", pod: member("b"), valid: true, want: []string{"a", "b"}},
		{name: "observed again", pod: member("b"), valid: true},
	} {
		if _, invalid, _ := m.Observe(step.pod); (invalid == "") != step.valid {
			t.Fatalf("%s: invalid = %q", step.name, invalid)
		}
		// A wake that must come is waited for at length; one that must not
		// is given a moment to show.
		within := 200 * time.Millisecond
		if step.want != nil {
			within = 10 * time.Second
		}
		var got []string
		select {
		case got = <-woken:
		case <-time.After(within):
		}
		if diff := cmp.Diff(step.want, got); diff != "" {
			t.Errorf("%s: woken (-want +got):\n%s", step.name, diff)
		}
	}
}

// TestPlanLivesWhileItProgresses: a plan is followed for PlanTTL after it
// last reserved a member, not after it was made, so a large gang whose
// members take longer than that to reserve keeps its plan.
func TestPlanLivesWhileItProgresses(t *testing.T) {
	m := newTestManager(t)
	key := Key{FamilyMuster, "ns", "g"}
	nodes := map[types.UID]string{}
	for _, name := range []string{"a", "b", "c"} {
		m.Observe(st.MakePod().Namespace("ns").Name(name).UID(name).
			Label(v1alpha1.LabelPodGroup, "g").Label(v1alpha1.LabelMinAvailable, "3").Obj())
		nodes[types.UID(name)] = "n-" + name
	}
	t0 := time.Date(2026, 11, 25, 0, 0, 0, 0, time.UTC)
	m.SetPlan(key, nodes, nil, nil, t0)
	for _, step := range []struct {
		name      string
		reserve   types.UID
		at        time.Duration
		ask       types.UID
		wantPlan  bool
		wantFound bool
	}{
		{name: "fresh", at: time.Second, ask: "a", wantPlan: true, wantFound: true},
		{name: "a reserved late, within the TTL", reserve: "a", at: PlanTTL - time.Second, ask: "b", wantPlan: true, wantFound: true},
		{name: "past the TTL since made, within it since a", at: PlanTTL + 5*time.Second, ask: "b", wantPlan: true, wantFound: true},
		{name: "b reserved", reserve: "b", at: 2 * PlanTTL, ask: "c", wantPlan: true, wantFound: true},
		{name: "no progress for the TTL", at: 3*PlanTTL + time.Second, ask: "c", wantPlan: false, wantFound: false},
	} {
		now := t0.Add(step.at)
		if step.reserve != "" {
			m.Reserve(key, step.reserve, nodes[step.reserve], now)
		}
		node, found, hasPlan := m.PlannedNode(key, step.ask, now)
		if hasPlan != step.wantPlan || found != step.wantFound || found && node != nodes[step.ask] {
			t.Errorf("%s: PlannedNode(%s) = %q, %v, %v; want %q, %v, %v", step.name, step.ask, node, found, hasPlan, nodes[step.ask], step.wantFound, step.wantPlan)
		}
	}
}

// newTestManager is a Manager over an empty cluster; pods come in through
// Observe.
func newTestManager(t testing.TB) *Manager {
	t.Helper()
	_, ctx := ktesting.NewTestContext(t)
	kube := kubefake.NewClientset()
	factory := informers.NewSharedInformerFactory(kube, 0)
	m, err := NewManager(ctx, Clients{Kube: kube, Muster: musterfake.NewSimpleClientset(), Pods: factory.Core().V1().Pods().Informer()})
	if err != nil {
		t.Fatal(err)
	}
	// The informers' first (empty) lists replace their stores: wait for
	// them before a test adds to the stores itself.
	factory.Start(ctx.Done())
	if !cache.WaitForCacheSync(ctx.Done(), m.HasSynced) {
		t.Fatal("the gang state did not take in the first lists")
	}
	return m
}

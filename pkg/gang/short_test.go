package gang

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	"k8s.io/client-go/informers"
	kubefake "k8s.io/client-go/kubernetes/fake"
	"k8s.io/klog/v2/ktesting"
	st "k8s.io/kubernetes/pkg/scheduler/testing"

	"github.com/muster-sched/muster/apis/scheduling/v1alpha1"
	musterfake "github.com/muster-sched/muster/pkg/generated/clientset/versioned/fake"
)

// TestShortGangInvalid: while a gang is short of members, Observe says so
// without computing its whole status, and says what the whole status says.
func TestShortGangInvalid(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	kube := kubefake.NewClientset()
	factory := informers.NewSharedInformerFactory(kube, 0)
	m, err := NewManager(ctx, Clients{Kube: kube, Muster: musterfake.NewSimpleClientset(), Pods: factory.Core().V1().Pods().Informer()})
	if err != nil {
		t.Fatal(err)
	}
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

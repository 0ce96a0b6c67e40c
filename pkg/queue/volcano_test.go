package queue

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/ptr"
	vcv1beta1 "volcano.sh/apis/pkg/apis/scheduling/v1beta1"
	vclisters "volcano.sh/apis/pkg/client/listers/scheduling/v1beta1"

	"github.com/muster-sched/muster/apis/scheduling/v1alpha1"
	musterlisters "github.com/muster-sched/muster/pkg/generated/listers/scheduling/v1alpha1"
)

func TestFromVolcano(t *testing.T) {
	cpu := func(v string) v1.ResourceList { return v1.ResourceList{v1.ResourceCPU: resource.MustParse(v)} }
	spec := vcv1beta1.QueueSpec{
		Weight: 3, Priority: 7, Parent: "org", Reclaimable: ptr.To(false),
		Capability: cpu("10"), Deserved: cpu("6"), Guarantee: vcv1beta1.Guarantee{Resource: cpu("2")},
	}
	want := v1alpha1.QueueSpec{
		Weight: 3, Priority: 7, Parent: "org", Reclaimable: ptr.To(false),
		Capability: cpu("10"), Deserved: cpu("6"), Guarantee: cpu("2"), State: v1alpha1.QueueOpen,
	}
	tests := []struct {
		state vcv1beta1.QueueState
		want  v1alpha1.QueueState
	}{
		{"", v1alpha1.QueueOpen},
		{vcv1beta1.QueueStateOpen, v1alpha1.QueueOpen},
		{vcv1beta1.QueueStateClosing, v1alpha1.QueueClosed},
		{vcv1beta1.QueueStateClosed, v1alpha1.QueueClosed},
		{vcv1beta1.QueueStateUnknown, v1alpha1.QueueOpen},
	}
	for _, tt := range tests {
		t.Run(string(tt.state), func(t *testing.T) {
			vq := &vcv1beta1.Queue{ObjectMeta: metav1.ObjectMeta{Name: "q", UID: "u", Generation: 4}, Spec: spec, Status: vcv1beta1.QueueStatus{State: tt.state}}
			got := FromVolcano(vq)
			w := want
			w.State = tt.want
			if diff := cmp.Diff(w, got.Spec); diff != "" {
				t.Errorf("spec (-want,+got):\n%s", diff)
			}
			if got.Name != "q" || got.UID != "u" || got.Generation != 4 {
				t.Errorf("metadata %v, want the Volcano Queue's", got.ObjectMeta)
			}
		})
	}
}

func TestLister(t *testing.T) {
	muster := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{})
	volcano := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{})
	for _, q := range []*v1alpha1.Queue{
		{ObjectMeta: metav1.ObjectMeta{Name: "default"}, Spec: v1alpha1.QueueSpec{Weight: 1}},
		{ObjectMeta: metav1.ObjectMeta{Name: "shared"}, Spec: v1alpha1.QueueSpec{Weight: 5}},
	} {
		if err := muster.Add(q); err != nil {
			t.Fatal(err)
		}
	}
	for _, q := range []*vcv1beta1.Queue{
		{ObjectMeta: metav1.ObjectMeta{Name: "root"}, Spec: vcv1beta1.QueueSpec{Weight: 1}},
		{ObjectMeta: metav1.ObjectMeta{Name: "shared"}, Spec: vcv1beta1.QueueSpec{Weight: 9}},
		{ObjectMeta: metav1.ObjectMeta{Name: "team"}, Spec: vcv1beta1.QueueSpec{Weight: 2}},
	} {
		if err := volcano.Add(q); err != nil {
			t.Fatal(err)
		}
	}
	l := NewLister(musterlisters.NewQueueLister(muster), vclisters.NewQueueLister(volcano))
	list, err := l.List(labels.Everything())
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]int32{}
	for _, q := range list {
		got[q.Name] = q.Spec.Weight
	}
	// Volcano's root is the implicit root; Muster's "shared" wins.
	if diff := cmp.Diff(map[string]int32{"default": 1, "shared": 5, "team": 2}, got); diff != "" {
		t.Errorf("listed queues by weight (-want,+got):\n%s", diff)
	}
	for name, want := range map[string]int32{"shared": 5, "team": 2} {
		q, err := l.Get(name)
		if err != nil || q.Spec.Weight != want {
			t.Errorf("Get(%q) = %v, %v; want weight %d", name, q, err, want)
		}
	}
	if _, err := l.Get("root"); err == nil {
		t.Error("Get(root) found a queue; root is implicit")
	}
	if _, err := l.Get("none"); err == nil {
		t.Error("Get(none) found a queue")
	}
}

package queue

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/muster-sched/muster/apis/scheduling/v1alpha1"
)

func cpu(n int64) Vector { return Vector{"cpu": n * 1000} }

func TestComputeProportion(t *testing.T) {
	all := func(n int64) Usage { return Usage{Request: cpu(n)} }
	holds := func(allocated, request int64) Usage { return Usage{Allocated: cpu(allocated), Request: cpu(request)} }
	tests := []struct {
		name         string
		total        Vector
		specs        []Spec
		usage        map[string]Usage
		wantDeserved map[string]Vector
		wantReal     map[string]Vector
		wantInvalid  map[string]string
	}{
		{
			name:         "weights 1:2:3, all saturated",
			total:        cpu(60),
			specs:        []Spec{{Name: "a", Weight: 1}, {Name: "b", Weight: 2}, {Name: "c", Weight: 3}},
			usage:        map[string]Usage{"a": all(60), "b": all(60), "c": all(60)},
			wantDeserved: map[string]Vector{"a": cpu(10), "b": cpu(20), "c": cpu(30)},
		},
		{
			name:  "a capability cap gives the excess to the others by weight",
			total: cpu(60),
			specs: []Spec{{Name: "a", Weight: 1}, {Name: "b", Weight: 2}, {Name: "c", Weight: 3, Capability: cpu(15)}},
			usage: map[string]Usage{"a": all(60), "b": all(60), "c": all(60)},
			// c stops at 15; the other 45 go 1:2.
			wantDeserved: map[string]Vector{"a": cpu(15), "b": cpu(30), "c": cpu(15)},
		},
		{
			name:         "a queue asking less than its share leaves the rest to others",
			total:        cpu(60),
			specs:        []Spec{{Name: "a", Weight: 1}, {Name: "b", Weight: 2}, {Name: "c", Weight: 3}},
			usage:        map[string]Usage{"a": all(5), "b": all(60), "c": all(60)},
			wantDeserved: map[string]Vector{"a": cpu(5), "b": cpu(22), "c": cpu(33)},
		},
		{
			name:         "guarantee wins over weight and request",
			total:        cpu(60),
			specs:        []Spec{{Name: "a", Weight: 1, Guarantee: cpu(30)}, {Name: "b", Weight: 5}},
			usage:        map[string]Usage{"a": all(10), "b": all(60)},
			wantDeserved: map[string]Vector{"a": cpu(30), "b": cpu(30)},
			wantReal:     map[string]Vector{"a": cpu(60), "b": cpu(30)},
		},
		{
			name:  "a guarantee is a floor, not a head start",
			total: cpu(60),
			specs: []Spec{{Name: "a", Weight: 1, Guarantee: cpu(30)}, {Name: "b", Weight: 2}, {Name: "c", Weight: 3}},
			usage: map[string]Usage{"a": all(60), "b": all(60), "c": all(60)},
			// a's weighted share (10) is below its floor: it gets 30, and the
			// other 30 go 2:3.
			wantDeserved: map[string]Vector{"a": cpu(30), "b": cpu(12), "c": cpu(18)},
		},
		{
			name:         "guarantees above the total each still win",
			total:        cpu(20),
			specs:        []Spec{{Name: "a", Weight: 1, Guarantee: cpu(15)}, {Name: "b", Weight: 1, Guarantee: cpu(15)}},
			usage:        map[string]Usage{"a": all(60), "b": all(60)},
			wantDeserved: map[string]Vector{"a": cpu(15), "b": cpu(15)},
		},
		{
			name:  "children share their parent's deserved by weight",
			total: cpu(80),
			specs: []Spec{{Name: "org", Weight: 1}, {Name: "other", Weight: 1},
				{Name: "small", Parent: "org", Weight: 1}, {Name: "big", Parent: "org", Weight: 3}},
			usage: map[string]Usage{"other": all(80), "small": all(80), "big": all(80)},
			wantDeserved: map[string]Vector{
				"org": cpu(40), "other": cpu(40), "small": cpu(10), "big": cpu(30),
			},
		},
		{
			name:  "an unknown parent and a loop are reported, placed at the top, and deserve what they hold",
			total: cpu(30),
			specs: []Spec{{Name: "orphan", Parent: "nope", Weight: 1}, {Name: "x", Parent: "y", Weight: 1}, {Name: "y", Parent: "x", Weight: 1},
				{Name: "ok", Weight: 1}},
			usage: map[string]Usage{"orphan": holds(4, 30), "x": holds(2, 30), "y": all(30), "ok": all(30)},
			// They cannot admit: what they ask for beyond what they hold
			// draws nothing, and ok takes the rest.
			wantDeserved: map[string]Vector{"orphan": cpu(4), "x": cpu(2), "y": {}, "ok": cpu(24)},
			wantInvalid: map[string]string{
				"orphan": `parent queue "nope" does not exist`,
				"x":      "parent chain loops: x -> y -> x",
				"y":      "parent chain loops: y -> x -> y",
			},
		},
		{
			name:  "below an orphan, queues deserve what they hold",
			total: cpu(30),
			specs: []Spec{{Name: "orphan", Parent: "nope", Weight: 1}, {Name: "child", Parent: "orphan", Weight: 1},
				{Name: "ok", Weight: 1}},
			usage:        map[string]Usage{"child": holds(3, 30), "ok": all(30)},
			wantDeserved: map[string]Vector{"orphan": cpu(3), "child": cpu(3), "ok": cpu(27)},
			wantInvalid:  map[string]string{"orphan": `parent queue "nope" does not exist`},
		},
		{
			name:  "a closed queue deserves what it holds; the others split the rest by weight",
			total: cpu(70),
			specs: []Spec{{Name: "a", Weight: 1, Closed: true}, {Name: "b", Weight: 1}, {Name: "c", Weight: 2}},
			usage: map[string]Usage{"a": holds(10, 70), "b": all(70), "c": all(70)},
			// Open, a would deserve 17.5.
			wantDeserved: map[string]Vector{"a": cpu(10), "b": cpu(20), "c": cpu(40)},
		},
		{
			name:         "a closed queue holding nothing takes nothing, however much is pending in it",
			total:        cpu(60),
			specs:        []Spec{{Name: "a", Weight: 1, Closed: true}, {Name: "b", Weight: 1}, {Name: "c", Weight: 2}},
			usage:        map[string]Usage{"a": all(60), "b": all(60), "c": all(60)},
			wantDeserved: map[string]Vector{"a": {}, "b": cpu(20), "c": cpu(40)},
		},
		{
			name:         "a closed queue holding more than its weighted share deserves all it holds",
			total:        cpu(60),
			specs:        []Spec{{Name: "a", Weight: 1, Closed: true}, {Name: "b", Weight: 1}},
			usage:        map[string]Usage{"a": holds(40, 60), "b": all(60)},
			wantDeserved: map[string]Vector{"a": cpu(40), "b": cpu(20)},
		},
		{
			name:  "a closed queue deserves what its admitted gangs still need to start",
			total: cpu(60),
			specs: []Spec{{Name: "a", Weight: 1, Closed: true}, {Name: "b", Weight: 1}},
			usage: map[string]Usage{"a": {Allocated: cpu(4), Inqueue: cpu(6), Request: cpu(60)}, "b": all(60)},
			// Closed after it admitted a gang of 10 that has 4 placed.
			wantDeserved: map[string]Vector{"a": cpu(10), "b": cpu(50)},
		},
		{
			name:  "a closed queue keeps its guarantee",
			total: cpu(60),
			specs: []Spec{{Name: "a", Weight: 1, Closed: true, Guarantee: cpu(20)}, {Name: "b", Weight: 1}},
			usage: map[string]Usage{"a": holds(5, 60), "b": all(60)},
			// b's realCapability leaves a's guarantee out in any case.
			wantDeserved: map[string]Vector{"a": cpu(20), "b": cpu(40)},
			wantReal:     map[string]Vector{"a": cpu(60), "b": cpu(40)},
		},
		{
			name:         "a closed queue's capability caps what it deserves",
			total:        cpu(60),
			specs:        []Spec{{Name: "a", Weight: 1, Closed: true, Capability: cpu(5)}, {Name: "b", Weight: 1}},
			usage:        map[string]Usage{"a": holds(8, 60), "b": all(60)},
			wantDeserved: map[string]Vector{"a": cpu(5), "b": cpu(55)},
		},
		{
			name:  "below a closed parent, every queue deserves what it holds",
			total: cpu(60),
			specs: []Spec{{Name: "org", Weight: 1, Closed: true}, {Name: "other", Weight: 1},
				{Name: "small", Parent: "org", Weight: 1}, {Name: "big", Parent: "org", Weight: 3}},
			usage: map[string]Usage{"small": holds(5, 60), "big": holds(10, 60), "other": all(60)},
			wantDeserved: map[string]Vector{
				"org": cpu(15), "small": cpu(5), "big": cpu(10), "other": cpu(45),
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			figs := Compute(Proportion, tt.total, tt.specs, tt.usage)
			got, gotReal, gotInvalid := map[string]Vector{}, map[string]Vector{}, map[string]string{}
			for name, f := range figs {
				got[name] = onlyNonZero(f.Deserved)
				gotReal[name] = f.RealCapability
				if f.Invalid != "" {
					gotInvalid[name] = f.Invalid
				}
			}
			if diff := cmp.Diff(tt.wantDeserved, got); diff != "" {
				t.Errorf("deserved (-want,+got):\n%s", diff)
			}
			for name, want := range tt.wantReal {
				if diff := cmp.Diff(want, gotReal[name]); diff != "" {
					t.Errorf("realCapability of %s (-want,+got):\n%s", name, diff)
				}
			}
			if tt.wantInvalid == nil {
				tt.wantInvalid = map[string]string{}
			}
			if diff := cmp.Diff(tt.wantInvalid, gotInvalid); diff != "" {
				t.Errorf("invalid (-want,+got):\n%s", diff)
			}
		})
	}
}

func TestComputeCapacity(t *testing.T) {
	figs := Compute(Capacity, Vector{"cpu": 100000, "memory": 100},
		[]Spec{
			{Name: "a", Weight: 1, Deserved: cpu(40), Guarantee: cpu(10)},
			{Name: "b", Weight: 1, Deserved: cpu(90), Capability: cpu(50)},
			{Name: "c", Weight: 1, Deserved: cpu(5), Guarantee: cpu(20)},
		}, nil)
	want := map[string]Vector{
		"a": {"cpu": 40000, "memory": 100}, // memory not named: no reclaim line below realCapability
		"b": {"cpu": 50000, "memory": 100}, // clamped to realCapability
		"c": {"cpu": 20000, "memory": 100}, // raised to guarantee
	}
	for name, w := range want {
		if diff := cmp.Diff(w, figs[name].Deserved); diff != "" {
			t.Errorf("deserved of %s (-want,+got):\n%s", name, diff)
		}
	}
	// realCapability: total − Σ guarantees (30) + own guarantee, capped.
	if diff := cmp.Diff(Vector{"cpu": 50000, "memory": 100}, figs["b"].RealCapability); diff != "" {
		t.Errorf("realCapability of b (-want,+got):\n%s", diff)
	}
	if diff := cmp.Diff(Vector{"cpu": 80000, "memory": 100}, figs["a"].RealCapability); diff != "" {
		t.Errorf("realCapability of a (-want,+got):\n%s", diff)
	}
}

func TestShare(t *testing.T) {
	f := &Figures{Usage: Usage{Allocated: Vector{"cpu": 5000, "memory": 30}}, Deserved: Vector{"cpu": 10000, "memory": 40}}
	if got := f.Share(); got != 0.75 {
		t.Errorf("share = %v, want 0.75 (memory dominates)", got)
	}
}

func onlyNonZero(v Vector) Vector {
	out := Vector{}
	for k, n := range v {
		if n != 0 {
			out[k] = n
		}
	}
	return out
}

func TestDivisionReuse(t *testing.T) {
	queue := func(name string, uid types.UID, generation int64, weight int32, parent string) *v1alpha1.Queue {
		return &v1alpha1.Queue{
			ObjectMeta: metav1.ObjectMeta{Name: name, UID: uid, Generation: generation, ResourceVersion: "1"},
			Spec:       v1alpha1.QueueSpec{Weight: weight, Parent: parent},
		}
	}
	use := func(allocated, request int64) Usage {
		return Usage{Allocated: cpu(allocated), Request: cpu(request), Inqueue: Vector{}, Elastic: Vector{}}
	}
	parent, a, b := queue("parent", "p", 1, 1, ""), queue("a", "a", 1, 1, "parent"), queue("b", "b", 1, 3, "parent")
	queues := []*v1alpha1.Queue{parent, a, b}
	total := cpu(40)
	usage := map[string]Usage{"a": use(0, 40), "b": use(0, 40)}

	d := newDivision(Proportion, total, queues, usage)
	if diff := cmp.Diff(Compute(Proportion, total, specsOf(queues), usage), d.figs, ignoreCaches); diff != "" {
		t.Errorf("division differs from Compute (-Compute +division):\n%s", diff)
	}

	// Placing pods moves usage from pending to allocated: requests stay.
	// Writing a queue's status replaces the object, not its spec.
	placed := map[string]Usage{"a": use(7, 40), "b": use(21, 40)}
	statusWritten := b.DeepCopy()
	statusWritten.ResourceVersion = "2"
	sameSpecs := []*v1alpha1.Queue{parent, a, statusWritten}
	if !d.matches(total, sameSpecs, placed) {
		t.Fatal("division does not match inputs that only moved allocation and wrote status")
	}
	if diff := cmp.Diff(Compute(Proportion, total, specsOf(sameSpecs), placed), d.figures(placed, map[string]bool{"a": true, "b": true}), ignoreCaches); diff != "" {
		t.Errorf("reused figures differ from computed ones (-computed +reused):\n%s", diff)
	}
	// Only a's usage moved: b keeps its published figures, its parent
	// sums anew.
	before := d.published
	placedMore := map[string]Usage{"a": use(9, 40), "b": use(21, 40)}
	after := d.figures(placedMore, map[string]bool{"a": true})
	if diff := cmp.Diff(Compute(Proportion, total, specsOf(sameSpecs), placedMore), after, ignoreCaches); diff != "" {
		t.Errorf("figures after a moved differ from computed ones (-computed +reused):\n%s", diff)
	}
	for name, want := range map[string]bool{"a": false, "b": true, "parent": false} {
		if kept := after[name] == before[name]; kept != want {
			t.Errorf("queue %s kept its figures: %v, want %v", name, kept, want)
		}
	}

	tests := []struct {
		name   string
		total  Vector
		queues []*v1alpha1.Queue
		usage  map[string]Usage
	}{
		{"a request changed", total, queues, map[string]Usage{"a": use(0, 41), "b": use(0, 40)}},
		{"a queue without usage before", total, queues, map[string]Usage{"a": use(0, 40), "b": use(0, 40), "parent": use(0, 0)}},
		{"the total changed", cpu(41), queues, usage},
		{"the total names a new dimension, at 0", Vector{"cpu": 40000, "nvidia.com/gpu": 0}, queues, usage},
		{"a queue's spec changed", total, []*v1alpha1.Queue{parent, a, queue("b", "b", 2, 1, "parent")}, usage},
		{"a queue was recreated", total, []*v1alpha1.Queue{parent, a, queue("b", "b2", 1, 3, "parent")}, usage},
		{"a queue was deleted", total, []*v1alpha1.Queue{parent, a}, usage},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if d.matches(tc.total, tc.queues, tc.usage) {
				t.Error("matches, want a new division")
			}
		})
	}
}

// ignoreCaches leaves out what Figures cache of their own exported fields.
var ignoreCaches = cmpopts.IgnoreUnexported(Figures{})

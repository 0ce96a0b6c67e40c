package queue

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/api/resource"

	v1 "k8s.io/api/core/v1"
)

func TestFits(t *testing.T) {
	tests := []struct {
		name   string
		v      Vector
		limit  Vector
		wantOK bool
		want   v1.ResourceName
	}{
		{"fits", Vector{"cpu": 2, "memory": 4}, Vector{"cpu": 2, "memory": 8}, true, ""},
		{"over in one", Vector{"cpu": 3, "memory": 4}, Vector{"cpu": 2, "memory": 8}, false, "cpu"},
		{"over in two: the first by name", Vector{"nvidia.com/gpu": 2, "memory": 9, "cpu": 1}, Vector{"cpu": 2, "memory": 8, "nvidia.com/gpu": 1}, false, "memory"},
		{"a dimension the limit does not name is unlimited", Vector{"cpu": 1, "nvidia.com/gpu": 5}, Vector{"cpu": 2}, true, ""},
		{"only positive amounts count", Vector{"cpu": -3, "memory": 0}, Vector{"cpu": -4, "memory": -1}, true, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			for range 10 { // map order varies: the answer must not
				if ok, got := tc.v.Fits(tc.limit); ok != tc.wantOK || got != tc.want {
					t.Fatalf("Fits = %v, %q; want %v, %q", ok, got, tc.wantOK, tc.want)
				}
			}
		})
	}
}

func TestFitsCeiling(t *testing.T) {
	snap := &Snapshot{Policy: Capacity, Queues: map[string]*Figures{
		"parent": {Spec: Spec{Name: "parent"}, Usage: Usage{Allocated: Vector{"cpu": 6000, "memory": 6}},
			RealCapability: Vector{"cpu": 8000, "memory": 8}, Children: []string{"child"}},
		"child": {Spec: Spec{Name: "child", Parent: "parent"}, Usage: Usage{Allocated: Vector{"cpu": 2000, "memory": 2}},
			RealCapability: Vector{"cpu": 4000, "memory": 8}},
	}}
	tests := []struct {
		name string
		need Vector
		want string
	}{
		{"fits the queue and its parent", Vector{"cpu": 2000, "memory": 2}, ""},
		{"over the queue", Vector{"cpu": 3000}, "queue child: cpu 2/4 realCapability, needs 3 more"},
		{"over the parent", Vector{"memory": 3}, "queue parent: memory 6/8 realCapability, needs 3 more"},
		{"over both dimensions: the first by name", Vector{"memory": 7, "cpu": 3000}, "queue child: cpu 2/4 realCapability, needs 3 more"},
		{"a dimension the ceiling does not name has none", Vector{"nvidia.com/gpu": 1}, "queue child: nvidia.com/gpu 0/0 realCapability, needs 1 more"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			for range 10 { // map order varies: the answer must not
				ok, got := snap.FitsCeiling("child", tc.need)
				if ok != (tc.want == "") || got != tc.want {
					t.Fatalf("FitsCeiling = %v, %q; want %q", ok, got, tc.want)
				}
			}
		})
	}
}

func TestFromListClamps(t *testing.T) {
	tests := []struct {
		name string
		in   v1.ResourceList
		want Vector
	}{
		{"plain", v1.ResourceList{"cpu": resource.MustParse("1500m"), "memory": resource.MustParse("1Gi")}, Vector{"cpu": 1500, "memory": 1 << 30}},
		{"pods dropped", v1.ResourceList{"pods": resource.MustParse("110")}, Vector{}},
		{"negative counts as none", v1.ResourceList{"cpu": resource.MustParse("-2"), "nvidia.com/gpu": resource.MustParse("-1")}, Vector{"cpu": 0, "nvidia.com/gpu": 0}},
		{"cpu beyond int64 millicores", v1.ResourceList{"cpu": resource.MustParse("10000000000000000")}, Vector{"cpu": MaxQuantity}},
		{"cpu in exponent form", v1.ResourceList{"cpu": resource.MustParse("1e16")}, Vector{"cpu": MaxQuantity}},
		{"cpu just below the bound", v1.ResourceList{"cpu": resource.MustParse("9007199254740")}, Vector{"cpu": 9007199254740000}},
		{"cpu at the bound", v1.ResourceList{"cpu": resource.MustParse("9007199254740992m")}, Vector{"cpu": MaxQuantity}},
		{"memory beyond the bound", v1.ResourceList{"memory": resource.MustParse("100Ei")}, Vector{"memory": MaxQuantity}},
		{"an exponent of a billion (parses, and exact arithmetic on it would not end)", v1.ResourceList{"cpu": resource.MustParse("1e1000000000"), "memory": resource.MustParse("1e1000000000")}, Vector{"cpu": MaxQuantity, "memory": MaxQuantity}},
		{"a positive amount below the unit rounds up", v1.ResourceList{"cpu": resource.MustParse("1n"), "memory": resource.MustParse("1m")}, Vector{"cpu": 1, "memory": 1}},
		{"extended resource beyond int64", v1.ResourceList{"example.com/x": resource.MustParse("1e30")}, Vector{"example.com/x": MaxQuantity}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, FromList(tc.in)); diff != "" {
				t.Errorf("FromList (-want,+got):\n%s", diff)
			}
		})
	}
	// A thousand quantities at the bound sum without wrapping.
	sum := Vector{}
	for range 1000 {
		sum.Add(FromList(v1.ResourceList{"cpu": resource.MustParse("1e30")}))
	}
	if sum["cpu"] <= 0 {
		t.Errorf("sum of 1000 clamped quantities wrapped: %d", sum["cpu"])
	}
}

package queue

import (
	"math"
	"testing"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

// TestProjectedShare checks projectedShare, which looks only at the
// resources a gang holds or asks for, against its definition: max over
// every allocatable resource of (allocated + n·requests)/allocatable.
func TestProjectedShare(t *testing.T) {
	allocatable := Vector{"cpu": 10_000, "memory": 40, "pods": 110, "nvidia.com/gpu": 4, "example.com/none": 0}
	list := func(kv ...string) v1.ResourceList {
		out := v1.ResourceList{}
		for i := 0; i < len(kv); i += 2 {
			out[v1.ResourceName(kv[i])] = resource.MustParse(kv[i+1])
		}
		return out
	}
	definition := func(allocated, requests v1.ResourceList, n int) float64 {
		share := 0.0
		for name, total := range allocatable {
			if total > 0 {
				a := quantity(name, allocated[name]) + int64(n)*quantity(name, requests[name])
				share = math.Max(share, float64(a)/float64(total))
			}
		}
		return share
	}
	tests := []struct {
		name                string
		allocated, requests v1.ResourceList
		n                   int
		want                float64
	}{
		{"nothing", nil, nil, 0, 0},
		{"requests only, cpu dominant", nil, list("cpu", "1", "memory", "2"), 3, 0.3},
		{"requests only, memory dominant", nil, list("cpu", "1", "memory", "8"), 2, 0.4},
		{"allocated only (n = 0)", list("cpu", "2", "memory", "1"), list("cpu", "5"), 0, 0.2},
		{"allocated and requests add up", list("cpu", "2"), list("cpu", "1", "nvidia.com/gpu", "1"), 2, 0.5},
		{"a resource no node has is left out", list("example.com/fpga", "3"), list("example.com/none", "1", "cpu", "1"), 1, 0.1},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := projectedShare(allocatable, tc.allocated, tc.requests, tc.n)
			if math.Abs(got-tc.want) > 1e-12 {
				t.Errorf("projectedShare = %v, want %v", got, tc.want)
			}
			if def := definition(tc.allocated, tc.requests, tc.n); math.Abs(got-def) > 1e-12 {
				t.Errorf("projectedShare = %v, its definition gives %v", got, def)
			}
		})
	}
}

package queue

import (
	"math/big"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

// fuzzList reads a ResourceList from "name=quantity,…", skipping the
// quantities resource.ParseQuantity refuses (an apiserver refuses them
// too), and those with an exponent of ten digits or more, which
// ParseQuantity itself takes minutes to parse (1000e1000000000000).
func fuzzList(s string) v1.ResourceList {
	l := v1.ResourceList{}
	for _, kv := range strings.Split(s, ",") {
		k, v, _ := strings.Cut(kv, "=")
		if _, exp, ok := strings.Cut(strings.ToLower(v), "e"); ok && len(strings.TrimLeft(exp, "+-0")) >= 10 {
			continue
		}
		if q, err := resource.ParseQuantity(v); err == nil && k != "" {
			l[v1.ResourceName(k)] = q
		}
	}
	return l
}

// wantQuantity is what FromList must make of q: q in the Vector's unit,
// rounded up as resource.Quantity rounds, then clamped to
// [0, MaxQuantity]. Computed exactly, apart from quantity.
func wantQuantity(name v1.ResourceName, q resource.Quantity) int64 {
	d := q.AsDec()
	n := new(big.Int).Set(d.UnscaledBig())
	if name == v1.ResourceCPU {
		n.Mul(n, big.NewInt(1000))
	}
	scale := int64(d.Scale()) // q = n × 10^-scale
	// Beyond 10^±40 the answer is a bound (n has at most a few thousand
	// digits here); 10^(10^9), which ParseQuantity accepts, would not end.
	switch {
	case n.Sign() <= 0:
		return 0
	case scale < -40:
		return MaxQuantity
	case scale > 40+int64(len(n.String())):
		return 1
	}
	pow := new(big.Int).Exp(big.NewInt(10), big.NewInt(max(scale, -scale)), nil)
	if scale < 0 {
		n.Mul(n, pow)
	} else if r := new(big.Int); n.Sign() > 0 {
		if n.QuoRem(n, pow, r); r.Sign() > 0 {
			n.Add(n, big.NewInt(1)) // rounded up
		}
	}
	switch {
	case n.Sign() <= 0:
		return 0
	case n.Cmp(big.NewInt(MaxQuantity)) >= 0:
		return MaxQuantity
	}
	return n.Int64()
}

// FuzzVector converts two arbitrary ResourceLists and checks the contract
// of FromList (each quantity in its unit clamped to [0, MaxQuantity], pods
// dropped, List converting back) and the arithmetic on the results: Add
// and Sub undo each other, a sum of up to 1,000 quantities is exact (no
// int64 overflow), and Fits names the first dimension over its limit.
func FuzzVector(f *testing.F) {
	// From TestFits and the limits of the clamp.
	f.Add("cpu=2,memory=4", "cpu=2,memory=8", uint16(1))
	f.Add("nvidia.com/gpu=2,memory=9,cpu=1", "cpu=2,memory=8,nvidia.com/gpu=1", uint16(3))
	f.Add("cpu=1,nvidia.com/gpu=5", "cpu=2", uint16(7))
	f.Add("cpu=-3,memory=0", "cpu=-4,memory=-1", uint16(2))
	f.Add("cpu=10000000000000000,memory=1e16", "cpu=500m,pods=110", uint16(999))
	f.Add("cpu=9007199254741,memory=9007199254740993", "cpu=9007199254739,memory=9007199254740991", uint16(1000))
	f.Add("cpu=1n,memory=1Ei,ephemeral-storage=8Pi", "cpu=0.5m,memory=1.5", uint16(42))
	f.Add("example.com/foo=1k,cpu=1.0001", "example.com/foo=999", uint16(0))

	f.Fuzz(func(t *testing.T, a, b string, n uint16) {
		la, lb := fuzzList(a), fuzzList(b)
		va, vb := FromList(la), FromList(lb)
		checkFromList(t, la, va)
		checkFromList(t, lb, vb)
		if back := FromList(va.List()); !back.Equal(va) {
			t.Fatalf("FromList(%v.List()) = %v", va, back)
		}
		_ = va.String()

		sum := va.Clone()
		sum.Add(vb)
		for k := range sum {
			if sum[k] != va[k]+vb[k] || sum[k] < va[k] {
				t.Fatalf("(%v + %v)[%s] = %d", va, vb, k, sum[k])
			}
		}
		diff := sum.Clone()
		diff.Sub(vb)
		for k := range diff {
			if diff[k] != va[k] {
				t.Fatalf("%v + %v - %v = %v", va, vb, vb, diff)
			}
		}
		// A thousand quantities, each at most MaxQuantity, sum exactly.
		copies := int64(n%1000) + 1
		total := Vector{}
		for range copies {
			total.Add(va)
		}
		for k, q := range va {
			if total[k] != copies*q || total[k] < 0 {
				t.Fatalf("%d × %s=%d summed to %d", copies, k, q, total[k])
			}
		}

		checkFits(t, va, vb)
		checkFits(t, vb, va)
		if ok, k := va.Fits(va); !ok {
			t.Fatalf("%v does not fit itself: %s", va, k)
		}
		if ok, k := va.Fits(sum); !ok {
			t.Fatalf("%v does not fit %v, itself plus %v: %s", va, sum, vb, k)
		}
	})
}

// checkFromList checks v = FromList(l) against wantQuantity.
func checkFromList(t *testing.T, l v1.ResourceList, v Vector) {
	t.Helper()
	for name, q := range l {
		got, ok := v[name]
		if name == v1.ResourcePods {
			if ok {
				t.Fatalf("FromList(%v) keeps pods", l)
			}
			continue
		}
		if want := wantQuantity(name, q); !ok || got != want {
			t.Fatalf("FromList: %s=%s is %d, want %d", name, q.String(), got, want)
		}
	}
	if len(v) > len(l) {
		t.Fatalf("FromList(%v) = %v: dimensions the list does not name", l, v)
	}
}

// checkFits checks v.Fits(limit) against its definition: the first
// dimension by name that v is positive in and limit names lower.
func checkFits(t *testing.T, v, limit Vector) {
	t.Helper()
	var want v1.ResourceName
	for _, k := range sortedNames(v) {
		if l, ok := limit[k]; ok && v[k] > 0 && v[k] > l {
			want = k
			break
		}
	}
	if ok, got := v.Fits(limit); ok != (want == "") || got != want {
		t.Fatalf("%v.Fits(%v) = %v, %q; want %q", v, limit, ok, got, want)
	}
}

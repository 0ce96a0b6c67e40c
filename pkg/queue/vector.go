// Package queue computes what every queue holds, asks for and deserves:
// allocated, request, inqueue, elastic, deserved, realCapability and share,
// per resource, under the proportion or the capacity policy. The figures
// are derived on demand from the gang state and the cluster's nodes, so
// they are the same after a restart.
package queue

import (
	"fmt"
	"sort"
	"strings"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

// Vector is an amount of every resource: cpu in millicores, everything else
// in its base unit. The pods count is not part of shares.
type Vector map[v1.ResourceName]int64

// FromList converts a ResourceList, dropping pods.
func FromList(l v1.ResourceList) Vector {
	out := make(Vector, len(l))
	out.addList(l)
	return out
}

// addList adds l, but its pods, to v in place.
func (v Vector) addList(l v1.ResourceList) {
	for name, q := range l {
		if name != v1.ResourcePods {
			v[name] += quantity(name, q)
		}
	}
}

// MaxQuantity bounds one quantity in a Vector (2^53 base units, millicores
// for cpu: 9·10^12 cores, 8 PiB of memory), so that a sum of a thousand
// of them cannot overflow int64. Sums over more (every pod of a queue) can
// only if over a thousand pods each ask beyond any real node; Add and Sub
// then wrap alike, so running sums still recount to the same values.
const MaxQuantity = 1 << 53

// quantity is q in a Vector's unit for resource name, clamped to
// [0, MaxQuantity]: a negative quantity (which only objects written before
// validation refused them can hold) counts as none, a larger one as
// MaxQuantity, a positive one below the unit as one. The bounds are
// checked on an approximation first: a quantity such as 1e1000000000
// parses, and exact comparison or conversion of it would not end.
// (resource.Quantity's own int64 conversions also wrap beyond int64.)
func quantity(name v1.ResourceName, q resource.Quantity) int64 {
	if q.Sign() <= 0 {
		return 0
	}
	f := q.AsApproximateFloat64()
	if name == v1.ResourceCPU {
		f *= 1000
	}
	switch {
	case f >= MaxQuantity:
		return MaxQuantity
	case f < 1:
		return 1 // rounded up, as Value and MilliValue do
	case name == v1.ResourceCPU:
		return min(q.MilliValue(), MaxQuantity)
	}
	return min(q.Value(), MaxQuantity)
}

// List converts back to a ResourceList.
func (v Vector) List() v1.ResourceList {
	out := make(v1.ResourceList, len(v))
	for name, n := range v {
		if name == v1.ResourceCPU {
			out[name] = *resource.NewMilliQuantity(n, resource.DecimalSI)
		} else if name == v1.ResourceMemory || name == v1.ResourceEphemeralStorage {
			out[name] = *resource.NewQuantity(n, resource.BinarySI)
		} else {
			out[name] = *resource.NewQuantity(n, resource.DecimalSI)
		}
	}
	return out
}

// Clone copies v.
func (v Vector) Clone() Vector {
	out := make(Vector, len(v))
	for k, n := range v {
		out[k] = n
	}
	return out
}

// Equal reports whether v and o name the same dimensions with the same
// amounts. A missing dimension differs from a 0: what the total names
// decides what deserved names, and a dimension deserved does not name is
// unlimited.
func (v Vector) Equal(o Vector) bool {
	if len(v) != len(o) {
		return false
	}
	for k, n := range v {
		if m, ok := o[k]; !ok || m != n {
			return false
		}
	}
	return true
}

// Add adds o to v in place.
func (v Vector) Add(o Vector) {
	for k, n := range o {
		v[k] += n
	}
}

// Sub subtracts o from v in place.
func (v Vector) Sub(o Vector) {
	for k, n := range o {
		v[k] -= n
	}
}

// Fits reports whether v ≤ limit in every dimension v is positive in and
// limit names; a dimension limit does not name is unlimited. The first
// dimension that does not fit is returned.
func (v Vector) Fits(limit Vector) (bool, v1.ResourceName) {
	k := firstOver(v, func(k v1.ResourceName) bool {
		l, ok := limit[k]
		return v[k] > 0 && ok && v[k] > l
	})
	return k == "", k
}

// Grew reports whether v is positive and above was in some dimension.
func (v Vector) Grew(was Vector) bool {
	for k, n := range v {
		if n > 0 && n > was[k] {
			return true
		}
	}
	return false
}

// firstOver returns the first dimension of names, by name, for which over
// holds, or "" when it holds for none. It sorts, and so allocates, only
// when there is one: admission and the ceiling pass on every scheduling
// cycle.
func firstOver(names Vector, over func(v1.ResourceName) bool) v1.ResourceName {
	for k := range names {
		if over(k) {
			for _, k := range sortedNames(names) {
				if over(k) {
					return k
				}
			}
		}
	}
	return ""
}

// String renders v for messages: "cpu=4,memory=8Gi".
func (v Vector) String() string {
	l := v.List()
	var parts []string
	for _, k := range sortedNames(v) {
		q := l[k]
		parts = append(parts, fmt.Sprintf("%s=%s", k, q.String()))
	}
	return strings.Join(parts, ",")
}

// Format renders one dimension of v for messages.
func Format(name v1.ResourceName, n int64) string {
	q := Vector{name: n}.List()[name]
	return q.String()
}

func sortedNames(v Vector) []v1.ResourceName {
	names := make([]v1.ResourceName, 0, len(v))
	for k := range v {
		names = append(names, k)
	}
	sort.Slice(names, func(i, j int) bool { return names[i] < names[j] })
	return names
}

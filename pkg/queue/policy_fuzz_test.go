package queue

import (
	"encoding/binary"
	"fmt"
	"math"
	"testing"

	v1 "k8s.io/api/core/v1"
)

// fuzzInput reads a fuzz input byte by byte; past its end it reads zeros.
type fuzzInput []byte

func (in *fuzzInput) byte() byte {
	if len(*in) == 0 {
		return 0
	}
	b := (*in)[0]
	*in = (*in)[1:]
	return b
}

// amount is a quantity as FromList makes them, in [0, MaxQuantity]:
// mostly small whole units, sometimes any, sometimes the largest.
func (in *fuzzInput) amount() int64 {
	switch b := in.byte(); {
	case b < 0xf0:
		return int64(b) * 1000
	case b < 0xff:
		var raw [8]byte
		for i := range raw {
			raw[i] = in.byte()
		}
		return int64(binary.LittleEndian.Uint64(raw[:]) % (MaxQuantity + 1))
	default:
		return MaxQuantity
	}
}

var fuzzDims = []v1.ResourceName{v1.ResourceCPU, v1.ResourceMemory, "nvidia.com/gpu"}

// vector names the dimensions a mask byte selects.
func (in *fuzzInput) vector() Vector {
	v := Vector{}
	mask := in.byte()
	for i, k := range fuzzDims {
		if mask&(1<<i) != 0 {
			v[k] = in.amount()
		}
	}
	return v
}

// fuzzQueues reads up to 6 queues q0, q1…, each at the top or below an
// earlier one, or (rarely) below any name, which may loop or not exist.
func (in *fuzzInput) queues() ([]Spec, map[string]Usage) {
	n := int(in.byte()%6) + 1
	specs := make([]Spec, n)
	usage := map[string]Usage{}
	for i := range specs {
		s := Spec{Name: fmt.Sprintf("q%d", i)}
		switch p := in.byte(); {
		case p >= 0xf8:
			s.Parent = fmt.Sprintf("q%d", p%8)
		case i > 0 && p%4 != 0:
			s.Parent = fmt.Sprintf("q%d", int(p)%i)
		}
		flags := in.byte()
		s.Closed = flags&1 != 0
		s.Weight = int64(in.byte()) + 1 // SpecOf makes it >= 1
		s.Capability, s.Guarantee, s.Deserved = in.vector(), in.vector(), in.vector()
		specs[i] = s
		u := Usage{Allocated: in.vector(), Inqueue: in.vector(), Elastic: in.vector()}
		u.Request = u.Allocated.Clone()
		u.Request.Add(in.vector()) // pending
		usage[s.Name] = u
	}
	return specs, usage
}

// fuzzEncode writes what fuzzInput reads back as policy, total, specs
// and usage: the seeds are written as the table tests' cases. Specs must
// be named q0, q1… in order; only cpu, memory and nvidia.com/gpu count.
func fuzzEncode(policy Policy, total Vector, specs []Spec, usage map[string]Usage) []byte {
	var out []byte
	amount := func(n int64) {
		switch {
		case n%1000 == 0 && n/1000 < 0xf0:
			out = append(out, byte(n/1000))
		case n == MaxQuantity:
			out = append(out, 0xff)
		default:
			out = binary.LittleEndian.AppendUint64(append(out, 0xf0), uint64(n))
		}
	}
	vector := func(v Vector) {
		mask := len(out)
		out = append(out, 0)
		for i, k := range fuzzDims {
			if n, ok := v[k]; ok {
				out[mask] |= 1 << i
				amount(n)
			}
		}
	}
	out = append(out, map[Policy]byte{Proportion: 0, Capacity: 1}[policy])
	vector(total)
	out = append(out, byte(len(specs)-1))
	for i, s := range specs {
		var parent byte
		if s.Parent != "" {
			var j int
			fmt.Sscanf(s.Parent, "q%d", &j)
			parent = 0xf8 + byte(j)
			for p := 1; p < 0xf8 && j < i; p++ {
				if p%4 != 0 && p%i == j {
					parent = byte(p)
					break
				}
			}
		}
		var flags byte
		if s.Closed {
			flags = 1
		}
		out = append(out, parent, flags, byte(s.Weight-1))
		vector(s.Capability)
		vector(s.Guarantee)
		vector(s.Deserved)
		u := usage[s.Name]
		vector(u.Allocated)
		vector(u.Inqueue)
		vector(u.Elastic)
		pending := u.Request.Clone()
		pending.Sub(u.Allocated)
		vector(pending)
	}
	return out
}

// FuzzCompute divides an arbitrary total among an arbitrary hierarchy of
// queues, under both policies, every quantity in [0, MaxQuantity] as
// FromList makes them. It checks what policy.go documents: realCapability
// is min(capability, max(0, parent's − siblings' guarantees) + own
// guarantee); Proportion gives each queue at least its guarantee, at most
// what it asks for within realCapability (a guarantee above it still
// wins), a queue that admits nothing what it holds, and siblings together
// no more than their parent's deserved beyond their floors; Capacity
// gives min(max(deserved, guarantee), realCapability); no figure is
// negative; a parent's usage sums its children's; share and dominant
// share are never negative or NaN, share infinite only when the queue
// holds what it does not deserve. Float rounding is allowed for.
func FuzzCompute(f *testing.F) {
	all := func(n int64) Usage { return Usage{Allocated: cpu(0), Request: cpu(n)} }
	holds := func(allocated, request int64) Usage { return Usage{Allocated: cpu(allocated), Request: cpu(request)} }
	huge := Vector{v1.ResourceCPU: MaxQuantity, v1.ResourceMemory: MaxQuantity, "nvidia.com/gpu": MaxQuantity}
	seeds := []struct {
		policy Policy
		total  Vector
		specs  []Spec
		usage  map[string]Usage
	}{
		// From TestComputeProportion.
		{Proportion, cpu(60), []Spec{{Name: "q0", Weight: 1}, {Name: "q1", Weight: 2}, {Name: "q2", Weight: 3, Capability: cpu(15)}},
			map[string]Usage{"q0": all(60), "q1": all(60), "q2": all(60)}},
		{Proportion, cpu(60), []Spec{{Name: "q0", Weight: 1, Guarantee: cpu(30)}, {Name: "q1", Weight: 2}, {Name: "q2", Weight: 3}},
			map[string]Usage{"q0": all(60), "q1": all(60), "q2": all(5)}},
		{Proportion, cpu(20), []Spec{{Name: "q0", Weight: 1, Guarantee: cpu(15)}, {Name: "q1", Weight: 1, Guarantee: cpu(15)}},
			map[string]Usage{"q0": all(60), "q1": all(60)}},
		{Proportion, cpu(80), []Spec{{Name: "q0", Weight: 1}, {Name: "q1", Weight: 1}, {Name: "q2", Parent: "q0", Weight: 1}, {Name: "q3", Parent: "q0", Weight: 3}},
			map[string]Usage{"q1": all(80), "q2": all(80), "q3": all(80)}},
		{Proportion, cpu(30), []Spec{{Name: "q0", Parent: "q7", Weight: 1}, {Name: "q1", Parent: "q2", Weight: 1}, {Name: "q2", Parent: "q1", Weight: 1}, {Name: "q3", Parent: "q0", Weight: 1}, {Name: "q4", Weight: 1}},
			map[string]Usage{"q0": holds(4, 30), "q1": holds(2, 30), "q2": all(30), "q3": holds(3, 30), "q4": all(30)}},
		{Proportion, cpu(60), []Spec{{Name: "q0", Weight: 1, Closed: true}, {Name: "q1", Weight: 1}},
			map[string]Usage{"q0": {Allocated: cpu(4), Inqueue: cpu(6), Request: cpu(60)}, "q1": all(60)}},
		{Proportion, cpu(60), []Spec{{Name: "q0", Weight: 1, Closed: true, Guarantee: cpu(20)}, {Name: "q1", Weight: 1}},
			map[string]Usage{"q0": holds(5, 60), "q1": all(60)}},
		{Proportion, cpu(60), []Spec{{Name: "q0", Weight: 1, Closed: true, Capability: cpu(5)}, {Name: "q1", Weight: 1}},
			map[string]Usage{"q0": holds(40, 60), "q1": all(60)}},
		// Capacity: deserved from the spec, a guarantee above it.
		{Capacity, cpu(8), []Spec{{Name: "q0", Weight: 1, Deserved: cpu(7), Guarantee: cpu(6)}, {Name: "q1", Weight: 1, Capability: cpu(4)}},
			map[string]Usage{"q0": holds(8, 8), "q1": all(2)}},
		// Every quantity at MaxQuantity.
		{Proportion, huge, []Spec{{Name: "q0", Weight: 1, Guarantee: huge, Capability: huge}, {Name: "q1", Weight: 256, Guarantee: huge}, {Name: "q2", Parent: "q1", Weight: 1, Guarantee: huge}},
			map[string]Usage{"q0": {Allocated: huge, Request: huge, Inqueue: huge}, "q2": {Allocated: huge, Request: huge, Elastic: huge}}},
		{Capacity, huge, []Spec{{Name: "q0", Weight: 1, Guarantee: huge, Deserved: huge}, {Name: "q1", Weight: 1, Closed: true, Guarantee: huge}},
			map[string]Usage{"q0": {Allocated: huge, Request: huge}, "q1": {Allocated: huge, Request: huge, Inqueue: huge}}},
	}
	for _, s := range seeds {
		f.Add(fuzzEncode(s.policy, s.total, s.specs, s.usage))
	}

	f.Fuzz(func(t *testing.T, data []byte) {
		in := fuzzInput(data)
		policy := Proportion
		if in.byte()&1 != 0 {
			policy = Capacity
		}
		total := in.vector()
		specs, usage := in.queues()
		figs := Compute(policy, total, specs, usage)
		if len(figs) != len(specs) {
			t.Fatalf("%d figures for %d queues", len(figs), len(specs))
		}
		var top []string
		for _, s := range specs {
			f := figs[s.Name]
			checkQueue(t, f, figs, usage[s.Name], total)
			if f.Parent == "" || f.Invalid != "" {
				top = append(top, s.Name)
			}
		}
		checkSiblings(t, policy, figs, top, total, total)
		for _, s := range specs {
			if f := figs[s.Name]; len(f.Children) > 0 {
				checkSiblings(t, policy, figs, f.Children, f.RealCapability, f.Deserved)
			}
		}
	})
}

// checkQueue checks one queue's figures on their own.
func checkQueue(t *testing.T, f *Figures, figs map[string]*Figures, own Usage, total Vector) {
	t.Helper()
	for _, v := range []Vector{f.Deserved, f.RealCapability, f.Allocated, f.Request, f.Inqueue, f.Elastic} {
		for k, n := range v {
			if n < 0 {
				t.Fatalf("queue %s: %s %d in %v", f.Name, k, n, v)
			}
		}
	}
	want := own.Allocated.Clone()
	for _, c := range f.Children {
		want.Add(figs[c].Allocated)
	}
	if !equalIgnoringZeros(want, f.Allocated) {
		t.Fatalf("queue %s: allocated %v, its own and its children's %v", f.Name, f.Allocated, want)
	}
	share, unbounded := 0.0, false
	for k, a := range f.Allocated {
		if a > 0 && f.Deserved[k] <= 0 {
			unbounded = true
		} else if a > 0 {
			share = math.Max(share, float64(a)/float64(f.Deserved[k]))
		}
	}
	if got := f.Share(); math.IsNaN(got) || got < 0 || unbounded != math.IsInf(got, 1) || !unbounded && got != share {
		t.Fatalf("queue %s: share %v of allocated %v, deserved %v", f.Name, got, f.Allocated, f.Deserved)
	}
	if d := dominantShare(f.Allocated, total); math.IsNaN(d) || math.IsInf(d, 0) || d < 0 {
		t.Fatalf("queue %s: dominant share %v of %v in %v", f.Name, d, f.Allocated, total)
	}
}

// checkSiblings checks the division among siblings of a parent whose
// realCapability is parentReal and whose deserved is avail.
func checkSiblings(t *testing.T, policy Policy, figs map[string]*Figures, siblings []string, parentReal, avail Vector) {
	t.Helper()
	guarantees := Vector{}
	for _, s := range siblings {
		guarantees.Add(figs[s].Guarantee)
	}
	for _, s := range siblings {
		f := figs[s]
		// Per dimension of the parent's and the capability's; one the
		// parent does not name counts as 0 there.
		dims := parentReal.Clone()
		dims.Add(f.Capability)
		want := Vector{}
		for k := range dims {
			want[k] = max(0, parentReal[k]-guarantees[k]) + f.Guarantee[k]
			if c, ok := f.Capability[k]; ok {
				want[k] = min(want[k], c)
			}
		}
		if !want.Equal(f.RealCapability) {
			t.Fatalf("queue %s: realCapability %v, want %v", s, f.RealCapability, want)
		}
	}
	if policy == Capacity {
		for _, s := range siblings {
			f := figs[s]
			want := Vector{}
			for k, real := range f.RealCapability {
				d, ok := f.Spec.Deserved[k]
				if !ok {
					d = real
				}
				want[k] = min(max(d, f.Guarantee[k]), real)
			}
			if !want.Equal(f.Deserved) {
				t.Fatalf("queue %s: deserved %v, want %v", s, f.Deserved, want)
			}
		}
		return
	}
	dims := avail.Clone()
	dims.Add(guarantees)
	for k := range dims {
		var sum, floors, biggest float64
		for _, s := range siblings {
			f := figs[s]
			d, ok := f.Deserved[k]
			if !ok {
				t.Fatalf("queue %s: deserved %v does not name %s (unlimited)", s, f.Deserved, k)
			}
			g, real := f.Guarantee[k], f.RealCapability[k]
			if d < g {
				t.Fatalf("queue %s: deserved %s %d below its guarantee %d", s, k, d, g)
			}
			floor := g
			if admitsNone(figs, s) {
				held := f.Allocated[k] + f.Inqueue[k]
				floor = max(g, min(real, held))
				if !near(d, floor, 1) {
					t.Fatalf("queue %s admits nothing: deserved %s %d, want %d (holds %d, guarantee %d, realCapability %d)", s, k, d, floor, held, g, real)
				}
			} else if hi := max(g, min(real, f.Request[k])); d > hi+slack(hi, 1) {
				t.Fatalf("queue %s: deserved %s %d above %d (request %d, guarantee %d, realCapability %d)", s, k, d, hi, f.Request[k], g, real)
			}
			sum += float64(d)
			floors += float64(floor)
			biggest = math.Max(biggest, float64(d))
		}
		limit := math.Max(float64(avail[k]), floors)
		if sum > limit+float64(slack(int64(math.Max(limit, biggest)), len(siblings))) {
			t.Fatalf("siblings %v: deserved %s sums to %.0f, above %.0f (parent's deserved %d, floors %.0f)", siblings, k, sum, limit, avail[k], floors)
		}
	}
}

// slack is the rounding allowed on n figures of magnitude up to x: each
// is floored from a float64 that holds 53 bits.
func slack(x int64, n int) int64 { return int64(n) * (1 + x>>45) }

func near(a, b int64, n int) bool { return max(a-b, b-a) <= slack(max(a, b), n) }

// equalIgnoringZeros compares vectors where a missing dimension is 0.
func equalIgnoringZeros(a, b Vector) bool {
	for k := range a {
		if a[k] != b[k] {
			return false
		}
	}
	for k := range b {
		if a[k] != b[k] {
			return false
		}
	}
	return true
}

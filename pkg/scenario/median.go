package scenario

import (
	"reflect"
	"slices"
	"sort"
)

// medianOf merges repeated runs of one profile into one result: every
// number is the median over the runs (the lower of the two middle ones for
// an even count), Complete holds when it held in every run, and what is
// not a number (per-resource maps, queue shares, bursts, series) is the
// run's whose pods/s is the median. RunsPodsPerSecond keeps each run's
// pods/s. One run is returned as it is.
// The figures of a median result need not come from one run: the median
// makespan and the median pods/s may be two runs'.
func medianOf(rs []*Result) *Result {
	if len(rs) == 1 {
		rs[0].Runs = 1
		return rs[0]
	}
	byRate := slices.Clone(rs)
	sort.SliceStable(byRate, func(i, j int) bool { return byRate[i].PodsPerSecond < byRate[j].PodsPerSecond })
	out := *byRate[(len(byRate)-1)/2]
	ov := reflect.ValueOf(&out).Elem()
	for i := 0; i < ov.NumField(); i++ {
		f := ov.Field(i)
		if !f.CanSet() {
			continue
		}
		field := func(r *Result) reflect.Value { return reflect.ValueOf(r).Elem().Field(i) }
		switch f.Kind() {
		case reflect.Float64:
			vals := make([]float64, len(rs))
			for k, r := range rs {
				vals[k] = field(r).Float()
			}
			f.SetFloat(lowerMedian(vals))
		case reflect.Int, reflect.Int64:
			vals := make([]int64, len(rs))
			for k, r := range rs {
				vals[k] = field(r).Int()
			}
			f.SetInt(lowerMedian(vals))
		case reflect.Uint64:
			vals := make([]uint64, len(rs))
			for k, r := range rs {
				vals[k] = field(r).Uint()
			}
			f.SetUint(lowerMedian(vals))
		case reflect.Bool:
			all := true
			for _, r := range rs {
				all = all && field(r).Bool()
			}
			f.SetBool(all)
		}
	}
	out.Runs = len(rs)
	out.RunsPodsPerSecond = make([]float64, len(rs))
	for k, r := range rs {
		out.RunsPodsPerSecond[k] = r.PodsPerSecond
	}
	return &out
}

func lowerMedian[T int64 | uint64 | float64](vals []T) T {
	slices.Sort(vals)
	return vals[(len(vals)-1)/2]
}

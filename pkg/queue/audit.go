package queue

import (
	"fmt"
	"slices"
	"sort"
	"sync"
	"time"

	"k8s.io/klog/v2"

	"github.com/muster-sched/muster/pkg/gang"
)

// An audit recounts the accounting's running sums and compares them with
// what they sum: the cluster's (allocatable, used, unmanaged) with the
// nodes and pods in the scheduler's informers' caches, each gang's
// contribution to its queue with the gang's status, each queue's usage
// with its gangs' contributions. A sum that does not add up to its records
// is set to what they add up to at once. A record that differs from the
// caches may only be behind an event on its way: it is made the caches'
// when it differed the same way at the previous audit too.

// Drift is what an audit found wrong, and repaired.
type Drift struct {
	// Sums holds the correction made to each running sum that did not
	// agree with its recount, by sum ("cluster used", "queue q
	// allocated") and resource.
	Sums map[string]Vector
	// Objects lists the records made the caches' (nodes, pods, gangs).
	Objects []string
	// Unconfirmed lists the records that differ from the caches now and
	// did not at the previous audit: an event on its way, most likely.
	// They are repaired if they still differ the same way at the next.
	Unconfirmed []string
}

// Empty reports whether the audit found nothing wrong (records that
// differ for the first time aside).
func (d Drift) Empty() bool { return len(d.Sums) == 0 && len(d.Objects) == 0 }

// auditor holds what the previous audit found differing.
type auditor struct {
	mu      sync.Mutex
	cluster map[string]string
	gangs   map[gang.Key]contribution
}

// Audit recounts the accounting's sums, repairs what drifted, logs it
// with the objects that differed and counts it in
// muster_accounting_drift_total.
func (s *State) Audit(logger klog.Logger) (Drift, error) {
	start := time.Now()
	s.audits.mu.Lock()
	defer s.audits.mu.Unlock()
	diffs, clusterDrift, repaired, err := s.cluster.audit(s.audits.cluster)
	if err != nil {
		return Drift{}, err
	}
	s.audits.cluster = diffs
	d := Drift{Sums: map[string]Vector{}, Objects: repaired}
	for key, version := range diffs {
		if !slices.Contains(repaired, key+" ("+version+")") {
			d.Unconfirmed = append(d.Unconfirmed, key+" ("+version+")")
		}
	}
	for name, v := range clusterDrift {
		d.Sums["cluster "+name] = v
		countDrift(name, v)
	}
	s.auditQueues(&d)
	sort.Strings(d.Objects)
	sort.Strings(d.Unconfirmed)
	auditDuration.Observe(time.Since(start).Seconds())
	if !d.Empty() {
		logger.Error(nil, "Queue accounting drifted from the cluster: repaired", "sums", d.Sums, "objects", d.Objects)
	} else {
		logger.V(4).Info("Queue accounting audited: no drift", "duration", time.Since(start), "unconfirmed", d.Unconfirmed)
	}
	return d, nil
}

// auditQueues checks each gang's contribution against its status and each
// queue's usage against its gangs' contributions. s.audits.mu held.
func (s *State) auditQueues(d *Drift) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for key := range s.dirty {
		s.refreshGang(key)
	}
	clear(s.dirty)
	keys := map[gang.Key]bool{}
	for _, k := range s.gangs.Keys() {
		keys[k] = true
	}
	for _, k := range s.gangs.VolcanoKeys() {
		keys[k] = true
	}
	for k := range s.contrib {
		keys[k] = true
	}
	differ := map[gang.Key]contribution{}
	for key := range keys {
		st := s.gangs.Status(key)
		var fresh contribution
		counts := st.Members > 0 || Reserved(&st) != nil
		if counts {
			g := &GangFigures{MinResources: FromList(st.MinResources), Allocated: FromList(st.Allocated), Admitted: s.admitted[key] || st.Placed > 0}
			fresh = contributionOf(&st, s.queueOf(&st), g)
		}
		old, had := s.contrib[key]
		if had == counts && (!had || old.equal(fresh)) {
			continue
		}
		differ[key] = fresh
		if prev, ok := s.audits.gangs[key]; ok && prev.equal(fresh) {
			s.refreshGang(key)
			d.Objects = append(d.Objects, "gang "+key.String())
		} else {
			d.Unconfirmed = append(d.Unconfirmed, "gang "+key.String())
		}
	}
	s.audits.gangs = differ

	want := map[string]Usage{}
	for _, c := range s.contrib {
		u, ok := want[c.queue]
		if !ok {
			u = Usage{Allocated: Vector{}, Request: Vector{}, Inqueue: Vector{}, Elastic: Vector{}, Reserved: Vector{}}
		}
		u.Allocated.Add(c.allocated)
		u.Request.Add(c.request)
		u.Inqueue.Add(c.inqueue)
		u.Elastic.Add(c.elastic)
		u.Reserved.Add(c.reserved)
		want[c.queue] = u
	}
	names := map[string]bool{}
	for q := range want {
		names[q] = true
	}
	for q := range s.usage {
		names[q] = true
	}
	for q := range names {
		w, got := want[q], s.usage[q]
		drifted := false
		for _, f := range []struct {
			name      string
			want, got Vector
		}{{"allocated", w.Allocated, got.Allocated}, {"request", w.Request, got.Request}, {"inqueue", w.Inqueue, got.Inqueue}, {"elastic", w.Elastic, got.Elastic}, {"reserved", w.Reserved, got.Reserved}} {
			if diff := difference(f.want, f.got); diff != nil {
				d.Sums[fmt.Sprintf("queue %s %s", q, f.name)] = diff
				countDrift(f.name, diff)
				drifted = true
			}
		}
		if drifted {
			if w.Allocated == nil {
				w = Usage{Allocated: Vector{}, Request: Vector{}, Inqueue: Vector{}, Elastic: Vector{}, Reserved: Vector{}}
			}
			s.usage[q] = w
			s.moved[q] = true
		}
	}
}

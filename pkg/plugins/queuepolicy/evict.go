package queuepolicy

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"
	"time"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/klog/v2"

	"github.com/muster-sched/muster/pkg/gang"
	"github.com/muster-sched/muster/pkg/metrics"
	"github.com/muster-sched/muster/pkg/queue"
)

// evict marks the victims, then deletes them (see marks.go), and says why,
// on each victim and its gang: "evicted 2 pods of team-a/job-7 to give
// queue team-b its deserved share (gang team-b/job-9)".
//
// The pod whose cycle found the victims is each victim Event's related
// object, as in kube-scheduler's own preemption. A victim that could not be
// deleted is forgotten, so that the gang does not wait for it. snap is the
// snapshot the victims were chosen on: the queue Events give its figures.
func (pl *Plugin) evict(ctx context.Context, snap *queue.Snapshot, preemptorPod *v1.Pod, preemptor gang.Key, preemptorQueue string, units []unit) {
	ctx, cancel := context.WithTimeout(ctx, evictTimeout)
	defer cancel()
	logger := klog.FromContext(ctx)
	m := mark{gang: preemptor, eviction: time.Now().UnixNano()}
	for _, u := range units {
		_, why := u.reason.describe(preemptor, preemptorQueue)
		for _, p := range u.pods {
			if _, err := writeMark(ctx, pl.client, p, m, preemptorPod.Spec.SchedulerName, why); err != nil {
				// Nothing is deleted: the eviction is not committed, and
				// the gang chooses again now.
				logger.Error(err, "Marking a victim failed: evicting nothing", "gang", preemptor, "victim", klog.KObj(p))
				for _, u := range units {
					for _, p := range u.pods {
						pl.records.forgetVictim(preemptor, p.UID)
					}
				}
				pl.records.activate(preemptor)
				return
			}
		}
	}
	byGang := map[victimGang]int{}
	freed := map[gang.Key]queue.Vector{}
	before := pl.victimStatus(units)
	// After a failed deletion the unit in progress is finished, so that no
	// victim gang is left running below its minimum, and the units not
	// started are left alone: the gang chooses afresh.
	failed := false
	for _, u := range units {
		event, why := u.reason.describe(preemptor, preemptorQueue)
		if failed {
			for _, p := range u.pods {
				pl.records.forgetVictim(preemptor, p.UID)
			}
			continue
		}
		for _, p := range u.pods {
			err := pl.client.CoreV1().Pods(p.Namespace).Delete(ctx, p.Name, metav1.DeleteOptions{Preconditions: metav1.NewUIDPreconditions(string(p.UID))})
			switch {
			case apierrors.IsNotFound(err) || apierrors.IsConflict(err):
				// Gone already, or the name is another pod's now.
				pl.records.forgetVictim(preemptor, p.UID)
				continue
			case err != nil:
				logger.Error(err, "Evicting a victim failed", "gang", preemptor, "victim", klog.KObj(p))
				pl.records.forgetVictim(preemptor, p.UID)
				failed = true
				continue
			}
			byGang[victimGang{u.gang, u.queue, u.reason}]++
			if freed[u.gang] == nil {
				freed[u.gang] = queue.Vector{}
			}
			freed[u.gang].Add(queue.FromList(podRequests(p)))
			pl.recorder.Eventf(p, preemptorPod, v1.EventTypeNormal, event, "Evict", "evicted %s", why)
		}
	}
	var parts []string
	for v, n := range byGang {
		event, why := v.why.describe(preemptor, preemptorQueue)
		parts = append(parts, fmt.Sprintf("%d pods of %s/%s %s", n, v.key.Namespace, v.key.Name, why))
		if pg := pl.gangs.Status(v.key).Spec.PodGroup; pg != nil {
			pl.recorder.Eventf(pg, nil, v1.EventTypeWarning, event, "Evict", "evicted %d pods of %s/%s %s", n, v.key.Namespace, v.key.Name, why)
		}
	}
	sort.Strings(parts)
	logger.Info("Evicted for gang", "gang", preemptor, "evicted", strings.Join(parts, "; "))
	pl.recordReclaims(snap, preemptor, preemptorQueue, byGang, freed)
	countEvicted(logger, byGang, before)
	if failed {
		// Not all the room was made: the gang chooses again now rather
		// than after its backoff.
		pl.records.activate(preemptor)
	}
}

// victimGang is a victim gang and why it was evicted.
type victimGang struct {
	key   gang.Key
	queue string
	why   reason
}

// victimStatus is the status of every victim gang before the deletions.
func (pl *Plugin) victimStatus(units []unit) map[gang.Key]gang.Status {
	out := make(map[gang.Key]gang.Status, len(units))
	for _, u := range units {
		if _, ok := out[u.gang]; !ok {
			out[u.gang] = pl.gangs.Status(u.gang)
		}
	}
	return out
}

// countEvicted counts one eviction in the metrics: the pods deleted, by
// victim queue and reason; how many one preemptor took; and the victim
// gangs it left with some but fewer than minMember members placed (before
// holds their status before the deletions), which reclaim must never do.
func countEvicted(logger klog.Logger, byGang map[victimGang]int, before map[gang.Key]gang.Status) {
	total := 0
	deleted := map[gang.Key]int32{}
	for v, n := range byGang {
		metrics.Evictions.WithLabelValues(v.queue, v.why.label()).Add(float64(n))
		deleted[v.key] += int32(n)
		total += n
	}
	if total > 0 {
		metrics.EvictionVictims.Observe(float64(total))
	}
	for key, n := range deleted {
		st := before[key]
		if left := st.Placed - n; st.Placed >= st.Spec.MinMember && left > 0 && left < st.Spec.MinMember {
			logger.Error(nil, "Eviction left a gang below minMember", "gang", key, "placed", left, "minMember", st.Spec.MinMember)
			metrics.GangsBroken.Inc()
		}
	}
}

// label is the reason's value in metrics.
func (r reason) label() string {
	switch r {
	case preempt:
		return "preempt"
	case evenShares:
		return "even_shares"
	}
	return "reclaim"
}

// evictTimeout bounds the marks and deletions of one eviction.
const evictTimeout = 30 * time.Second

// describe returns the Event reason and the why of an eviction.
func (r reason) describe(preemptor gang.Key, preemptorQueue string) (event, why string) {
	switch r {
	case preempt:
		return "Preempted", fmt.Sprintf("for gang %s/%s of higher priority", preemptor.Namespace, preemptor.Name)
	case evenShares:
		return "Preempted", fmt.Sprintf("to even dominant shares (DRF) with gang %s/%s", preemptor.Namespace, preemptor.Name)
	default:
		return "Reclaimed", fmt.Sprintf("to give queue %s its deserved share (gang %s/%s)", preemptorQueue, preemptor.Namespace, preemptor.Name)
	}
}

// pdbBlocks reports whether evicting pods together would take more
// disruptions than a PodDisruptionBudget selecting them allows now: a
// budget allowing one guards a gang of two.
func pdbBlocks(lister func(namespace string) ([]pdb, error)) func([]*v1.Pod) bool {
	return func(pods []*v1.Pod) bool {
		lists := map[string][]pdb{}
		taken := map[*pdb]int32{}
		for _, p := range pods {
			list, ok := lists[p.Namespace]
			if !ok {
				var err error
				if list, err = lister(p.Namespace); err != nil {
					return true // unknown: do not risk it
				}
				lists[p.Namespace] = list
			}
			for i := range list {
				b := &list[i]
				if b.selector.Matches(labels.Set(p.Labels)) {
					if taken[b]++; taken[b] > b.allowed {
						return true
					}
				}
			}
		}
		return false
	}
}

type pdb struct {
	selector labels.Selector
	allowed  int32
}

// recordReclaims records, for each victim gang that reclaim (not
// preemption within a queue) evicted, an Event on the queue it was taken
// from (Reclaimed) and one on the queue it was given to (Reclaiming), with
// the figures of the resources it freed: the one is above its deserved
// share in them, the other below. The figures are snap's, those the
// victims were chosen on, not the latest: by now the evictions may have
// brought the one queue down to its share.
func (pl *Plugin) recordReclaims(snap *queue.Snapshot, preemptor gang.Key, preemptorQueue string, byGang map[victimGang]int, freed map[gang.Key]queue.Vector) {
	to := pl.state.Object(preemptorQueue)
	for v, n := range byGang {
		if v.why != reclaim {
			continue
		}
		// The victim's PodGroup as related object keeps the Events of two
		// victims apart (the events API makes one series of the Events of
		// the same object, reason and related object).
		var group runtime.Object
		if pg := pl.gangs.Status(v.key).Spec.PodGroup; pg != nil {
			group = pg
		} else if pg := pl.gangs.VolcanoPodGroup(v.key); pg != nil {
			group = pg
		}
		below := againstDeserved(snap.Queues[preemptorQueue], freed[v.key], false)
		above := againstDeserved(snap.Queues[v.queue], freed[v.key], true)
		if from := pl.state.Object(v.queue); from != nil {
			pl.recorder.Eventf(from, group, v1.EventTypeWarning, "Reclaimed", "Evict",
				"evicted %d pods of gang %s/%s (%s) for queue %s, which is below its deserved share%s; queue %s holds%s",
				n, v.key.Namespace, v.key.Name, freed[v.key], preemptorQueue, inParens(below), v.queue, orShare(above))
		}
		if to != nil {
			pl.recorder.Eventf(to, group, v1.EventTypeNormal, "Reclaiming", "Evict",
				"evicted %d pods of gang %s/%s (%s) from queue %s, which is above its deserved share%s, for gang %s/%s; queue %s holds%s",
				n, v.key.Namespace, v.key.Name, freed[v.key], v.queue, inParens(above), preemptor.Namespace, preemptor.Name, preemptorQueue, orShare(below))
		}
	}
}

// againstDeserved renders, for the resources of freed, what the queue
// holds against its deserved share where it holds less (or, with above,
// more): "cpu 4 of 20 deserved"; "" where it does in none.
func againstDeserved(f *queue.Figures, freed queue.Vector, above bool) string {
	if f == nil {
		return ""
	}
	var parts []string
	for _, r := range slices.Sorted(maps.Keys(freed)) {
		held, deserved := f.Allocated[r], f.Deserved[r]
		if held != deserved && held > deserved == above {
			parts = append(parts, fmt.Sprintf("%s %s of %s deserved", r, queue.Format(r, held), queue.Format(r, deserved)))
		}
	}
	return strings.Join(parts, ", ")
}

func inParens(s string) string {
	if s == "" {
		return ""
	}
	return " (" + s + ")"
}

func orShare(s string) string {
	if s == "" {
		return " its deserved share"
	}
	return " " + s
}

package scenario

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"
)

// A preemptor is a pod that was nominated (status.nominatedNodeName) or that
// is the related object of a victim Event. kube-scheduler's DefaultPreemption
// nominates its preemptor; Muster's queue plugin does not when it reclaims
// room from other queues (a nomination would hold the room idle). Both
// record an events.k8s.io/v1 Event on each victim, regarding the victim and
// related to the preemptor, so the Events find every scheduler's preemptors.

// victimReasons are the reasons of those Events: "Preempted"
// (kube-scheduler's DefaultPreemption, Muster's preemption by priority) and
// "Reclaimed" (Muster taking back a queue's deserved share).
var victimReasons = []string{"Preempted", "Reclaimed"}

// victimEventsWait bounds how long the runner waits, once the run has
// ended, for the Events of its evictions to arrive.
const victimEventsWait = 3 * time.Second

// watchVictims starts informers on the victim Events about pods in the
// namespaces, one per namespace and reason (a field selector cannot say
// "or"), so that their caches hold these Events alone and not the
// scheduler's Scheduled and FailedScheduling Events of every pod. They stop
// with ctx or the returned function.
func (o *observer) watchVictims(ctx context.Context, client kubernetes.Interface, namespaces []string) (func(), error) {
	var factories []informers.SharedInformerFactory
	stop := func() {
		for _, f := range factories {
			f.Shutdown()
		}
	}
	var synced []cache.InformerSynced
	for _, ns := range namespaces {
		for _, reason := range victimReasons {
			selector := fields.Set{"reason": reason, "regarding.kind": "Pod"}.AsSelector().String()
			f := informers.NewSharedInformerFactoryWithOptions(client, 0, informers.WithNamespace(ns),
				informers.WithTweakListOptions(func(opts *metav1.ListOptions) { opts.FieldSelector = selector }))
			inf := f.Events().V1().Events().Informer()
			o.victimStores = append(o.victimStores, inf.GetStore())
			synced = append(synced, inf.HasSynced)
			factories = append(factories, f)
			f.Start(ctx.Done())
		}
	}
	if !cache.WaitForCacheSync(ctx.Done(), synced...) {
		stop()
		return nil, fmt.Errorf("event informers did not sync")
	}
	return stop, nil
}

// victimEvents lists the victim Events seen so far (the caches outlive
// their informers).
func (o *observer) victimEvents() []*eventsv1.Event {
	var out []*eventsv1.Event
	for _, s := range o.victimStores {
		for _, obj := range s.List() {
			if e, ok := obj.(*eventsv1.Event); ok {
				out = append(out, e)
			}
		}
	}
	return out
}

// awaitVictimEvents waits, up to limit, until every evicted pod has its
// victim Event: recorders post Events asynchronously, after the deletion,
// so the last evictions of a run may not have theirs yet when it ends.
func (o *observer) awaitVictimEvents(ctx context.Context, limit time.Duration) {
	deadline := time.Now().Add(limit)
	for {
		events := o.victimEvents()
		o.mu.Lock()
		missing := victimsWithoutEvent(o.pods, events)
		o.mu.Unlock()
		if missing == 0 {
			return
		}
		if time.Now().After(deadline) {
			klog.FromContext(ctx).V(1).Info("Evicted pods without a victim Event", "pods", missing, "waited", limit)
			return
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// preemptorSet is the set of pods, by namespace/name, that preempted: the
// observed pods that were nominated, and the related pod of each victim
// Event regarding an observed pod. A pod is in it once however many victims
// it had and whether or not it was also nominated. A run that evicted
// nothing had no preemptor: kube-scheduler also nominates pods that wait at
// Permit or for their binding, which are not preemptions.
func preemptorSet(pods map[string]*podRecord, events []*eventsv1.Event, evictions int) map[string]bool {
	set := map[string]bool{}
	if evictions == 0 {
		return set
	}
	for key, p := range pods {
		if p.nominated {
			set[key] = true
		}
	}
	for _, e := range events {
		if victim := regardedPod(pods, e); victim != "" && e.Related != nil && e.Related.Kind == "Pod" {
			set[e.Related.Namespace+"/"+e.Related.Name] = true
		}
	}
	return set
}

// reclaimedPods counts the pods preemption was for: each preemptor, and
// every bound member of a preemptor's gang. A gang scheduler preempts once
// for a whole gang (one preemptor, its member whose cycle found the
// victims) where a pod-by-pod one preempts once per member, so victims per
// reclaimed pod compares the two where victims per preemptor cannot.
func reclaimedPods(pods map[string]*podRecord, preemptors map[string]bool) int {
	gangs := map[string]bool{} // namespace/gang
	for key := range preemptors {
		if p := pods[key]; p != nil && p.gang != "" {
			gangs[namespaceOf(key)+"/"+p.gang] = true
		}
	}
	n := 0
	for key, p := range pods {
		if preemptors[key] || p.gang != "" && !p.bound.IsZero() && gangs[namespaceOf(key)+"/"+p.gang] {
			n++
		}
	}
	return n
}

// namespaceOf is the namespace of a namespace/name key.
func namespaceOf(key string) string {
	ns, _, _ := strings.Cut(key, "/")
	return ns
}

// victimsWithoutEvent counts the evicted pods that no victim Event regards.
func victimsWithoutEvent(pods map[string]*podRecord, events []*eventsv1.Event) int {
	recorded := map[string]bool{}
	for _, e := range events {
		if victim := regardedPod(pods, e); victim != "" {
			recorded[victim] = true
		}
	}
	n := 0
	for key, p := range pods {
		if p.evicted && !recorded[key] {
			n++
		}
	}
	return n
}

// regardedPod is the namespace/name of the observed pod a victim Event
// regards; "" when e is not a victim Event or regards no observed pod.
func regardedPod(pods map[string]*podRecord, e *eventsv1.Event) string {
	if !slices.Contains(victimReasons, e.Reason) || e.Regarding.Kind != "Pod" {
		return ""
	}
	key := e.Regarding.Namespace + "/" + e.Regarding.Name
	if pods[key] == nil {
		return ""
	}
	return key
}

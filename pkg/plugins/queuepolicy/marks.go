package queuepolicy

import (
	"context"
	"fmt"
	"strconv"
	"strings"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/client-go/kubernetes"
	podutil "k8s.io/kubernetes/pkg/api/v1/pod"
	"k8s.io/kubernetes/pkg/scheduler/util"

	"github.com/muster-sched/muster/pkg/gang"
)

// An eviction is written to the API before it takes effect: every victim
// is marked first with kube-scheduler's DisruptionTarget condition (reason
// PreemptionByScheduler, as its own preemption sets), whose message names
// the gang the room is for and the eviction; then the victims are deleted.
// The first deletion commits the eviction. A leader that takes over reads
// the marks back (Records.observe): victims being deleted are room already
// coming for the gang named, and the marked victims of a committed
// eviction that are not deleted yet are deleted (Records.finish), so that
// no victim gang is left half evicted. The marks of an eviction that was
// never committed are left alone: the pods keep running, and
// kube-controller-manager's disruption controller clears stale marks.

// markPrefix starts the message of every mark, after the scheduler's name.
const markPrefix = "evicted to place gang "

// mark is what a victim's condition says.
type mark struct {
	// gang is the gang the room is for.
	gang gang.Key
	// eviction identifies the eviction: the victims chosen together.
	eviction int64
}

// message is the condition message of m: "<scheduler>: evicted to place
// gang <family>/<namespace>/<name> (eviction <id>): <why>".
func (m mark) message(scheduler, why string) string {
	return fmt.Sprintf("%s: %s%s/%s/%s (eviction %d): %s", scheduler, markPrefix, m.gang.Family, m.gang.Namespace, m.gang.Name, m.eviction, why)
}

// markOf returns the mark Muster left on pod, if it has one.
func markOf(pod *v1.Pod) (mark, bool) {
	_, c := podutil.GetPodCondition(&pod.Status, v1.DisruptionTarget)
	if c == nil || c.Status != v1.ConditionTrue || c.Reason != v1.PodReasonPreemptionByScheduler {
		return mark{}, false
	}
	_, rest, ok := strings.Cut(c.Message, ": "+markPrefix)
	if !ok {
		return mark{}, false // kube-scheduler's own preemption
	}
	key, rest, ok := strings.Cut(rest, " (eviction ")
	if !ok {
		return mark{}, false
	}
	id, _, ok := strings.Cut(rest, ")")
	if !ok {
		return mark{}, false
	}
	parts := strings.Split(key, "/")
	eviction, err := strconv.ParseInt(id, 10, 64)
	if len(parts) != 3 || err != nil {
		return mark{}, false
	}
	return mark{gang: gang.Key{Family: gang.Family(parts[0]), Namespace: parts[1], Name: parts[2]}, eviction: eviction}, true
}

// writeMark sets the victim's DisruptionTarget condition; a victim gone
// already is not an error (gone reports it).
func writeMark(ctx context.Context, client kubernetes.Interface, victim *v1.Pod, m mark, scheduler, why string) (gone bool, err error) {
	c := &v1.PodCondition{
		Type:               v1.DisruptionTarget,
		ObservedGeneration: podutil.CalculatePodConditionObservedGeneration(&victim.Status, victim.Generation, v1.DisruptionTarget),
		Status:             v1.ConditionTrue,
		Reason:             v1.PodReasonPreemptionByScheduler,
		Message:            m.message(scheduler, why),
	}
	status := victim.Status.DeepCopy()
	if !podutil.UpdatePodCondition(status, c) {
		return false, nil
	}
	err = util.PatchPodStatus(ctx, client, victim.Name, victim.Namespace, &victim.Status, status)
	if apierrors.IsNotFound(err) {
		return true, nil
	}
	return false, err
}

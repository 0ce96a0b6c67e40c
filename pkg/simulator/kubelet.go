package simulator

import (
	"context"
	"fmt"
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/klog/v2"
)

// AnnotationRunTime on a pod is how long (a Go duration, e.g. "30s") the
// simulated kubelet runs it before it succeeds and frees its resources.
// Without it a pod runs until deleted.
const AnnotationRunTime = "sim.muster.dev/run-time"

// AnnotationStopTime on a pod is how long (a Go duration) it takes to stop
// once deleted, at most its grace period. Without it a pod being deleted is
// removed at once.
const AnnotationStopTime = "sim.muster.dev/stop-time"

// Kubelet plays the kubelet of every simulated node: a bound pod becomes
// Running; a pod with a run time becomes Succeeded when it is up; a pod
// being deleted is removed once it has stopped (AnnotationStopTime).
type Kubelet struct {
	client kubernetes.Interface
	pods   corelisters.PodLister
	queue  workqueue.TypedRateLimitingInterface[string]
	// Speedup divides every run time, compressing simulated time.
	speedup float64
	now     func() time.Time
	synced  cache.InformerSynced
	wg      sync.WaitGroup
}

// StartKubelet starts the simulated kubelet; it stops when ctx ends, and
// Wait waits for its goroutines. speedup ≥ 1 compresses run times.
func StartKubelet(ctx context.Context, client kubernetes.Interface, speedup float64) (*Kubelet, error) {
	if speedup < 1 {
		speedup = 1
	}
	factory := informers.NewSharedInformerFactoryWithOptions(client, 0,
		informers.WithTweakListOptions(func(o *metav1.ListOptions) {
			o.FieldSelector = fields.OneTermNotEqualSelector("spec.nodeName", "").String()
		}))
	informer := factory.Core().V1().Pods()
	k := &Kubelet{
		client:  client,
		pods:    informer.Lister(),
		queue:   workqueue.NewTypedRateLimitingQueueWithConfig(workqueue.DefaultTypedControllerRateLimiter[string](), workqueue.TypedRateLimitingQueueConfig[string]{Name: "simulated-kubelet"}),
		speedup: speedup,
		now:     time.Now,
		synced:  informer.Informer().HasSynced,
	}
	enqueue := func(obj any) {
		if key, err := cache.DeletionHandlingMetaNamespaceKeyFunc(obj); err == nil {
			k.queue.Add(key)
		}
	}
	if _, err := informer.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    enqueue,
		UpdateFunc: func(_, obj any) { enqueue(obj) },
	}); err != nil {
		return nil, err
	}
	factory.Start(ctx.Done())
	k.wg.Add(1)
	go func() {
		defer k.wg.Done()
		<-ctx.Done()
		k.queue.ShutDown()
		factory.Shutdown()
	}()
	if !cache.WaitForCacheSync(ctx.Done(), k.synced) {
		return nil, fmt.Errorf("simulated kubelet: pod informer did not sync")
	}
	for range 4 {
		k.wg.Add(1)
		go func() {
			defer k.wg.Done()
			for k.processNext(ctx) {
			}
		}()
	}
	return k, nil
}

// Wait blocks until the kubelet's goroutines have ended (after ctx ends).
func (k *Kubelet) Wait() { k.wg.Wait() }

func (k *Kubelet) processNext(ctx context.Context) bool {
	key, quit := k.queue.Get()
	if quit {
		return false
	}
	defer k.queue.Done(key)
	requeueAfter, err := k.sync(ctx, key)
	switch {
	case err != nil:
		utilruntime.HandleErrorWithContext(ctx, err, "Simulated kubelet failed to sync pod", "pod", key)
		k.queue.AddRateLimited(key)
	case requeueAfter > 0:
		k.queue.Forget(key)
		k.queue.AddAfter(key, requeueAfter)
	default:
		k.queue.Forget(key)
	}
	return true
}

// sync moves one pod along its simulated life and says when to look again.
func (k *Kubelet) sync(ctx context.Context, key string) (time.Duration, error) {
	namespace, name, err := cache.SplitMetaNamespaceKey(key)
	if err != nil {
		return 0, nil
	}
	pod, err := k.pods.Pods(namespace).Get(name)
	if apierrors.IsNotFound(err) {
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	logger := klog.FromContext(ctx)
	if pod.DeletionTimestamp != nil {
		if left := k.stopping(pod); left > 0 {
			return left, nil
		}
		err := k.client.CoreV1().Pods(namespace).Delete(ctx, name, metav1.DeleteOptions{
			GracePeriodSeconds: new(int64),
			Preconditions:      metav1.NewUIDPreconditions(string(pod.UID)),
		})
		if apierrors.IsNotFound(err) || apierrors.IsConflict(err) {
			return 0, nil
		}
		return 0, err
	}
	switch pod.Status.Phase {
	case v1.PodPending, "":
		logger.V(5).Info("Simulated kubelet starts pod", "pod", klog.KObj(pod), "node", pod.Spec.NodeName)
		return 0, k.setRunning(ctx, pod)
	case v1.PodRunning:
		runTime, ok, err := podRunTime(pod)
		if err != nil {
			return 0, k.setFinished(ctx, pod, v1.PodFailed, "InvalidRunTime", err.Error())
		}
		if !ok {
			return 0, nil
		}
		start := pod.Status.StartTime.Time
		if left := start.Add(time.Duration(float64(runTime) / k.speedup)).Sub(k.now()); left > 0 {
			return left, nil
		}
		logger.V(5).Info("Simulated kubelet completes pod", "pod", klog.KObj(pod))
		return 0, k.setFinished(ctx, pod, v1.PodSucceeded, "Completed", "")
	}
	return 0, nil
}

// stopping returns how long a pod being deleted still takes to stop.
func (k *Kubelet) stopping(pod *v1.Pod) time.Duration {
	value, ok := pod.Annotations[AnnotationStopTime]
	if !ok || pod.DeletionGracePeriodSeconds == nil {
		return 0
	}
	d, err := time.ParseDuration(value)
	if err != nil || d <= 0 {
		return 0
	}
	grace := time.Duration(*pod.DeletionGracePeriodSeconds) * time.Second
	deleted := pod.DeletionTimestamp.Add(-grace) // when the deletion was asked for
	return deleted.Add(min(d, grace)).Sub(k.now())
}

func podRunTime(pod *v1.Pod) (time.Duration, bool, error) {
	value, ok := pod.Annotations[AnnotationRunTime]
	if !ok {
		return 0, false, nil
	}
	d, err := time.ParseDuration(value)
	if err != nil || d < 0 {
		return 0, false, fmt.Errorf("annotation %s=%q is not a non-negative duration", AnnotationRunTime, value)
	}
	return d, true, nil
}

func (k *Kubelet) setRunning(ctx context.Context, pod *v1.Pod) error {
	pod = pod.DeepCopy()
	now := metav1.NewTime(k.now())
	pod.Status.Phase = v1.PodRunning
	pod.Status.StartTime = &now
	pod.Status.Conditions = []v1.PodCondition{
		{Type: v1.PodScheduled, Status: v1.ConditionTrue, LastTransitionTime: now},
		{Type: v1.PodInitialized, Status: v1.ConditionTrue, LastTransitionTime: now},
		{Type: v1.ContainersReady, Status: v1.ConditionTrue, LastTransitionTime: now},
		{Type: v1.PodReady, Status: v1.ConditionTrue, LastTransitionTime: now},
	}
	return k.updateStatus(ctx, pod)
}

func (k *Kubelet) setFinished(ctx context.Context, pod *v1.Pod, phase v1.PodPhase, reason, message string) error {
	pod = pod.DeepCopy()
	pod.Status.Phase = phase
	pod.Status.Reason = reason
	pod.Status.Message = message
	for i := range pod.Status.Conditions {
		if c := &pod.Status.Conditions[i]; c.Type == v1.PodReady || c.Type == v1.ContainersReady {
			c.Status = v1.ConditionFalse
			c.Reason = "PodCompleted"
		}
	}
	return k.updateStatus(ctx, pod)
}

// updateStatus writes the status; a conflict or a deleted pod is dropped, as
// the informer will deliver the newer object.
func (k *Kubelet) updateStatus(ctx context.Context, pod *v1.Pod) error {
	_, err := k.client.CoreV1().Pods(pod.Namespace).UpdateStatus(ctx, pod, metav1.UpdateOptions{})
	if apierrors.IsNotFound(err) || apierrors.IsConflict(err) {
		return nil
	}
	return err
}

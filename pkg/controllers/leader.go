// Package controllers holds the status controllers that run inside the
// scheduler process, and the leader election that keeps one of them
// writing per cluster however many scheduler replicas run.
package controllers

import (
	"context"
	"fmt"
	"os"
	"time"

	"github.com/google/uuid"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/leaderelection"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
	"k8s.io/klog/v2"
)

// LeaseName is the Lease the controllers elect their leader with.
const LeaseName = "muster-controllers"

// Namespace is where the Lease lives: the scheduler's own namespace (from
// the POD_NAMESPACE environment variable, set by the Helm chart), else
// kube-system.
func Namespace() string {
	if ns := os.Getenv("POD_NAMESPACE"); ns != "" {
		return ns
	}
	return "kube-system"
}

// RunWhenLeader runs run for as long as this process holds the lease, and
// again whenever it regains it, until ctx ends. The lease is released on
// the way out so that another replica takes over at once.
func RunWhenLeader(ctx context.Context, client kubernetes.Interface, namespace string, run func(context.Context)) {
	logger := klog.FromContext(ctx)
	host, _ := os.Hostname()
	id := fmt.Sprintf("%s_%s", host, uuid.NewString())
	lock := &resourcelock.LeaseLock{
		LeaseMeta:  metav1.ObjectMeta{Namespace: namespace, Name: LeaseName},
		Client:     client.CoordinationV1(),
		LockConfig: resourcelock.ResourceLockConfig{Identity: id},
	}
	for ctx.Err() == nil {
		leaderelection.RunOrDie(ctx, leaderelection.LeaderElectionConfig{
			Lock:            lock,
			LeaseDuration:   15 * time.Second,
			RenewDeadline:   10 * time.Second,
			RetryPeriod:     2 * time.Second,
			ReleaseOnCancel: true,
			Name:            LeaseName,
			Callbacks: leaderelection.LeaderCallbacks{
				OnStartedLeading: run,
				OnStoppedLeading: func() { logger.Info("Controllers stopped leading", "identity", id) },
			},
		})
	}
}

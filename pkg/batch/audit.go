package batch

import (
	"context"
	"os"
	"os/signal"
	"time"

	"k8s.io/klog/v2"

	"github.com/muster-sched/muster/pkg/queue"
)

// auditQueues audits the queue accounting every interval (never when 0),
// and on SIGUSR2, on which kube-scheduler compares and dumps its own cache
// too, until ctx ends. Every replica audits: each keeps its own
// accounting, and a follower's must be right when it takes over.
func auditQueues(ctx context.Context, s *queue.State, interval time.Duration) {
	logger := klog.LoggerWithName(klog.FromContext(ctx), "audit")
	usr2 := make(chan os.Signal, 1)
	if auditSignal != nil {
		signal.Notify(usr2, auditSignal)
		defer signal.Stop(usr2)
	}
	var tick <-chan time.Time
	if interval > 0 {
		t := time.NewTicker(interval)
		defer t.Stop()
		tick = t.C
	}
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick:
		case <-usr2:
		}
		if _, err := s.Audit(logger); err != nil {
			logger.Error(err, "Auditing the queue accounting")
		}
	}
}

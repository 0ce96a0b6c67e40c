package server

import (
	"context"
	"sync"

	"k8s.io/client-go/tools/leaderelection/resourcelock"
	"k8s.io/klog/v2"
	"k8s.io/kubernetes/cmd/kube-scheduler/app"
	schedulerserverconfig "k8s.io/kubernetes/cmd/kube-scheduler/app/config"
	"k8s.io/kubernetes/pkg/scheduler"

	"github.com/muster-sched/muster/pkg/batch"
)

// Run runs a scheduler built by app.Setup with plugins.Options(process), as
// app.Run does, and has process write only while this replica leads: its
// writers start when the replica acquires the scheduler's own lease (at
// once when leader election is off) and stop with ctx. A kube-scheduler
// that loses its lease exits, and so do they.
//
// app.Run sets the elector's callbacks itself, to start scheduling; Muster
// learns of the same moment from the lock, which reports the first write
// that makes this replica the holder. The lease, its timings and the
// elected replica are the scheduler's: there is no second election.
func Run(ctx context.Context, cc *schedulerserverconfig.CompletedConfig, sched *scheduler.Scheduler, process *batch.Process) error {
	guardRequeues(sched, cc.InformerFactory.Core().V1().Pods().Lister())
	if cc.LeaderElection == nil {
		process.Lead(ctx)
	} else {
		cc.LeaderElection.Lock = &leaderLock{Interface: cc.LeaderElection.Lock, acquired: func() {
			klog.FromContext(ctx).Info("Acquired the scheduler's lease: Muster's writers start", "lock", cc.LeaderElection.Lock.Describe())
			process.Lead(ctx)
		}}
	}
	return app.Run(ctx, cc, sched)
}

// leaderLock is the scheduler's lock, reporting the first successful write
// that names this replica the holder: the elector has then acquired the
// lease, and calls its OnStartedLeading right after.
type leaderLock struct {
	resourcelock.Interface
	once     sync.Once
	acquired func()
}

func (l *leaderLock) Create(ctx context.Context, ler resourcelock.LeaderElectionRecord) error {
	err := l.Interface.Create(ctx, ler)
	l.wrote(err, ler)
	return err
}

func (l *leaderLock) Update(ctx context.Context, ler resourcelock.LeaderElectionRecord) error {
	err := l.Interface.Update(ctx, ler)
	l.wrote(err, ler)
	return err
}

func (l *leaderLock) wrote(err error, ler resourcelock.LeaderElectionRecord) {
	if err == nil && ler.HolderIdentity != "" && ler.HolderIdentity == l.Identity() {
		l.once.Do(l.acquired)
	}
}

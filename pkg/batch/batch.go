package gang

import (
	"context"
	"fmt"
	"sync"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/informers"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/events"
	"k8s.io/klog/v2"
	"k8s.io/kubernetes/pkg/scheduler/framework"
	spclient "sigs.k8s.io/scheduler-plugins/pkg/generated/clientset/versioned"

	"github.com/muster-sched/muster/apis/scheduling/v1alpha1"
	"github.com/muster-sched/muster/pkg/controllers"
	"github.com/muster-sched/muster/pkg/controllers/podgroup"
	"github.com/muster-sched/muster/pkg/gang"
	musterclient "github.com/muster-sched/muster/pkg/generated/clientset/versioned"
)

// shared is the gang state of one scheduler process, used by the Gang
// plugin of every profile.
type shared struct {
	manager *gang.Manager
}

var (
	sharedMu sync.Mutex
	// byScheduler holds the state of each running scheduler, keyed by its
	// informer factory: one per scheduler, shared by its profiles.
	byScheduler = map[informers.SharedInformerFactory]*shared{}
)

// sharedState returns the gang state of the scheduler h belongs to, building
// it on first use; it is dropped when ctx (the scheduler's) ends.
func sharedState(ctx context.Context, h framework.Handle) (*shared, error) {
	sharedMu.Lock()
	defer sharedMu.Unlock()
	factory := h.SharedInformerFactory()
	if s, ok := byScheduler[factory]; ok {
		return s, nil
	}
	clients, err := clientsFor(h.KubeConfig())
	if err != nil {
		return nil, err
	}
	clients.Kube = h.ClientSet()
	m, err := gang.NewManager(ctx, clients)
	if err != nil {
		return nil, err
	}
	s := &shared{manager: m}
	logger := klog.FromContext(ctx)
	m.OnValid(func(key gang.Key, pending []*v1.Pod) {
		pods := make(map[string]*v1.Pod, len(pending))
		for _, p := range pending {
			pods[p.Namespace+"/"+p.Name] = p
		}
		logger.V(4).Info("Gang became valid: activating its members", "gang", key, "members", len(pods))
		h.Activate(logger, pods)
	})
	byScheduler[factory] = s
	go func() {
		<-ctx.Done()
		sharedMu.Lock()
		delete(byScheduler, factory)
		sharedMu.Unlock()
	}()
	if err := startControllers(ctx, h, clients, m); err != nil {
		return nil, err
	}
	klog.FromContext(ctx).Info("Gang state started", "schedulerPluginsPodGroups", m.SchedulerPluginsInstalled())
	return s, nil
}

// clientsFor builds the CRD clients, checking that Muster's CRDs are served
// and whether scheduler-plugins' PodGroup is.
func clientsFor(kubeConfig *rest.Config) (gang.Clients, error) {
	cfg := rest.CopyConfig(kubeConfig)
	cfg.ContentType, cfg.AcceptContentTypes = "application/json", "application/json"
	dc, err := discovery.NewDiscoveryClientForConfig(cfg)
	if err != nil {
		return gang.Clients{}, err
	}
	served := func(groupVersion, resource string) (bool, error) {
		list, err := dc.ServerResourcesForGroupVersion(groupVersion)
		if apierrors.IsNotFound(err) {
			return false, nil
		}
		if err != nil {
			return false, err
		}
		for _, r := range list.APIResources {
			if r.Name == resource {
				return true, nil
			}
		}
		return false, nil
	}
	ok, err := served(v1alpha1.SchemeGroupVersion.String(), "podgroups")
	if err != nil {
		return gang.Clients{}, fmt.Errorf("checking for Muster's CRDs: %w", err)
	}
	if !ok {
		return gang.Clients{}, fmt.Errorf("Muster's CRDs (%s) are not installed: apply manifests/crds first", v1alpha1.GroupName)
	}
	var c gang.Clients
	if c.Muster, err = musterclient.NewForConfig(cfg); err != nil {
		return gang.Clients{}, err
	}
	if ok, err = served("scheduling.x-k8s.io/v1alpha1", "podgroups"); err != nil {
		return gang.Clients{}, fmt.Errorf("checking for scheduler-plugins' PodGroup CRD: %w", err)
	}
	if ok {
		if c.SchedulerPlugins, err = spclient.NewForConfig(cfg); err != nil {
			return gang.Clients{}, err
		}
	}
	return c, nil
}

// startControllers runs the status controllers on the elected replica and
// an event recorder for them; all stop with ctx.
func startControllers(ctx context.Context, h framework.Handle, clients gang.Clients, m *gang.Manager) error {
	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		return err
	}
	if err := v1alpha1.AddToScheme(scheme); err != nil {
		return err
	}
	broadcaster := events.NewBroadcaster(&events.EventSinkImpl{Interface: h.ClientSet().EventsV1()})
	broadcaster.StartRecordingToSink(ctx.Done())
	recorder := broadcaster.NewRecorder(scheme, "muster-scheduler")
	pgController := podgroup.New(clients.Muster, m.PodGroupLister(), m, recorder)
	go func() {
		defer broadcaster.Shutdown()
		controllers.RunWhenLeader(ctx, h.ClientSet(), controllers.Namespace(), pgController.Run)
	}()
	return nil
}

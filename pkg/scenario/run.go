package scenario

import (
	"context"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"sync"
	"time"

	"golang.org/x/sync/errgroup"
	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/restmapper"
	"k8s.io/klog/v2"

	"github.com/muster-sched/muster/manifests/scheduler-plugins"
	"github.com/muster-sched/muster/manifests/scheduler-plugins/elasticquota"
	"github.com/muster-sched/muster/pkg/controlplane"
	"github.com/muster-sched/muster/pkg/simulator"
)

// Options tune a run.
type Options struct {
	// Profiles, when set, replace each scenario's list (unknown or
	// inapplicable names are an error).
	Profiles []string
	// Progress, when set, receives a progress line while each run goes.
	Progress io.Writer
	// Interactive redraws the progress line in place (a terminal).
	Interactive bool
	// Runs, when set, replaces each scenario's runs.
	Runs int
	// Window, when set, is called as each run's measured window opens
	// (the scheduler has started) with the run's profile and number from
	// 1; the function it returns is called as the window closes.
	Window func(profile string, run int) (closeWindow func())
}

// Run runs the scenario once per profile, or its runs times with the
// profiles taking turns, each round starting with the next (so that a slow
// spell of the machine, or what a run leaves behind, does not fall
// on one profile), each run on a fresh control plane, and returns one
// result per profile in profile order: the median of its runs.
func Run(ctx context.Context, s *Scenario, opts Options) ([]*Result, error) {
	profiles := s.Profiles
	if len(opts.Profiles) > 0 {
		profiles = opts.Profiles
	}
	runs := s.Runs
	if opts.Runs > 0 {
		runs = opts.Runs
	}
	byProfile := make([][]*Result, len(profiles))
	for i := 0; i < max(1, runs); i++ {
		// Each round starts with the next profile: no profile always
		// runs first, or always right after the same other one.
		for k := range profiles {
			j := (i + k) % len(profiles)
			r, err := runProfile(ctx, s, profiles[j], i+1, opts)
			if err != nil {
				return nil, fmt.Errorf("%s, profile %s: %w", s.Name, profiles[j], err)
			}
			byProfile[j] = append(byProfile[j], r)
		}
	}
	results := make([]*Result, len(profiles))
	for j, rs := range byProfile {
		results[j] = medianOf(rs)
	}
	return results, nil
}

// runProfile runs the scenario under one profile and stops every goroutine
// it started before returning.
func runProfile(parent context.Context, s *Scenario, profile string, run int, opts Options) (*Result, error) {
	cfg, err := schedulerConfig(profile, s.gangWait, s.Speedup)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(parent)
	defer cancel()
	cp, err := controlplane.StartWithOptions(ctx, controlplane.Options{
		CRDs:    []fs.FS{schedulerplugins.FS, elasticquota.FS},
		GangAPI: profile == ProfileUpstream,
	})
	if err != nil {
		return nil, err
	}
	defer cp.Stop()
	if err := setUpCluster(ctx, s, profile, cp); err != nil {
		return nil, err
	}

	gangs := map[string]*gangRecord{}
	for _, a := range s.timeline() {
		if a.workload.Kind == KindGang {
			g := &gangRecord{
				name: a.groupName(), queue: a.workload.Queue, minMember: a.workload.minMember(), size: a.workload.size(),
			}
			if t := a.workload.Topology; t != nil {
				g.required, g.preferred = t.Required, t.Preferred
			}
			gangs[a.workload.namespace()+"/"+a.groupName()] = g
		}
	}
	obs := newObserver(s, gangs)
	stopWatch, err := obs.watch(ctx, cp.Client, s.namespaces())
	if err != nil {
		return nil, err
	}
	defer stopWatch()

	if s.Cluster.kubelet() {
		kubelet, err := simulator.StartKubelet(ctx, cp.Client, s.Speedup)
		if err != nil {
			return nil, err
		}
		defer kubelet.Wait()
		defer cancel()
	}

	dir, err := os.MkdirTemp("", "muster-bench")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	kubeconfig := filepath.Join(dir, "kubeconfig")
	if err := cp.WriteKubeconfig(kubeconfig); err != nil {
		return nil, err
	}
	// Workloads arriving at 0s exist before the scheduler starts, so that
	// throughput measures scheduling, not how fast the runner creates pods.
	creator, err := newCreator(s, profile, cp)
	if err != nil {
		return nil, err
	}
	arrivals := s.timeline()
	first := 0
	for first < len(arrivals) && arrivals[first].at == 0 {
		first++
	}
	if err := creator.create(ctx, arrivals[:first]); err != nil {
		return nil, fmt.Errorf("creating workloads: %w", err)
	}

	// The previous run's control plane and this run's set-up left garbage
	// behind: collect it now, not during this run's window.
	runtime.GC()
	mem := startMemorySampler(ctx)
	sched, err := startScheduler(ctx, profile, kubeconfig, cfg)
	if err != nil {
		return nil, err
	}
	defer sched.stop(time.Now()) //nolint:errcheck // a no-op once stopped below
	closeWindow := func() {}
	if opts.Window != nil {
		closeWindow = opts.Window(profile, run)
	}
	start, cpuStart := time.Now(), processCPU()
	obs.mu.Lock()
	obs.start, obs.lastProgress = start, start
	obs.mu.Unlock()

	createErr := make(chan error, 1)
	var creators sync.WaitGroup
	creators.Add(1)
	go func() {
		defer creators.Done()
		createErr <- creator.timeline(ctx, arrivals[first:], start)
	}()
	defer creators.Wait()

	end, runErr := waitForEnd(ctx, s, profile, obs, createErr, start, opts)
	cpu := processCPU() - cpuStart
	closeWindow()
	if runErr == nil {
		// Before the scheduler stops: its recorder may still be posting.
		obs.awaitVictimEvents(ctx, victimEventsWait)
	}
	out, stopErr := sched.stop(end)
	cancel()
	if runErr != nil {
		return nil, runErr
	}
	if stopErr != nil {
		return nil, stopErr
	}
	peakRSS, peakHeap := mem.stop()
	obs.mu.Lock()
	defer obs.mu.Unlock()
	r := measure(s, obs, out.rel, out.open, out.counters, start, end)
	r.Profile = profile
	r.PeakRSSBytes, r.PeakHeapBytes = peakRSS+out.peakRSS, peakHeap+out.peakHeap
	if r.BoundPods > 0 {
		r.CPUMillisPerPod = (cpu + out.cpu).Seconds() * 1000 / float64(r.BoundPods)
	}
	return r, nil
}

// waitForEnd samples the cluster until every pod is done, nothing has moved
// for the scenario's settle time after the last arrival, or the timeout.
func waitForEnd(ctx context.Context, s *Scenario, profile string, obs *observer, createErr chan error, start time.Time, opts Options) (time.Time, error) {
	total := s.PodCount()
	interval := 200 * time.Millisecond
	if d := s.timeout / 600; d > interval {
		interval = d
	}
	tick := time.NewTicker(interval)
	defer tick.Stop()
	arrived := false
	bar := progressBar{out: opts.Progress, interactive: opts.Interactive, label: s.Name + " · " + profile}
	defer bar.finish()
	for {
		select {
		case <-ctx.Done():
			return time.Time{}, ctx.Err()
		case err := <-createErr:
			if err != nil {
				return time.Time{}, fmt.Errorf("creating workloads: %w", err)
			}
			arrived = true
		case now := <-tick.C:
			obs.sampleNow()
			created, bound, done, last := obs.progress()
			bar.show(now.Sub(start), created, bound, done, total)
			switch {
			case arrived && created >= total && done >= created:
				return now, nil
			case arrived && now.Sub(last) >= s.settle:
				return now, nil
			case now.Sub(start) >= s.timeout:
				return now, nil
			}
		}
	}
}

// setUpCluster creates everything that exists before the timeline starts.
func setUpCluster(ctx context.Context, s *Scenario, profile string, cp *controlplane.ControlPlane) error {
	for _, ns := range s.namespaces() {
		if _, err := cp.Client.CoreV1().Namespaces().Create(ctx, &v1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
			return err
		}
	}
	for _, pc := range s.priorityClasses() {
		if _, err := cp.Client.SchedulingV1().PriorityClasses().Create(ctx, pc, metav1.CreateOptions{}); err != nil {
			return err
		}
	}
	for i := range s.Queues {
		if _, err := cp.Muster.SchedulingV1alpha1().Queues().Create(ctx, s.Queues[i].musterQueue(), metav1.CreateOptions{}); err != nil {
			return fmt.Errorf("queue %s: %w", s.Queues[i].Name, err)
		}
	}
	dyn, err := dynamic.NewForConfig(cp.JSONConfig())
	if err != nil {
		return err
	}
	if profile == ProfileCapacityScheduling {
		gvr := schema.GroupVersionResource{Group: "scheduling.x-k8s.io", Version: "v1alpha1", Resource: "elasticquotas"}
		for i := range s.Queues {
			q := &s.Queues[i]
			if len(q.Deserved)+len(q.Guarantee)+len(q.Capability) == 0 {
				continue
			}
			if _, err := dyn.Resource(gvr).Namespace(q.Name).Create(ctx, q.elasticQuota(), metav1.CreateOptions{}); err != nil {
				return fmt.Errorf("elastic quota %s: %w", q.Name, err)
			}
		}
	}
	if err := createNodes(ctx, s, cp); err != nil {
		return err
	}
	return applyManifests(ctx, s, cp, dyn)
}

// createNodes creates the node groups, several nodes at a time.
func createNodes(ctx context.Context, s *Scenario, cp *controlplane.ControlPlane) error {
	var nodes []*v1.Node
	for gi := range s.Cluster.Nodes {
		g := &s.Cluster.Nodes[gi]
		for i := range g.Count {
			n, err := g.node(i)
			if err != nil {
				return err
			}
			nodes = append(nodes, n)
		}
	}
	return parallel(ctx, len(nodes), 16, func(i int) error {
		_, err := simulator.CreateNode(ctx, cp.Client, nodes[i])
		return err
	})
}

// applyManifests creates the scenario's raw objects, in file order.
func applyManifests(ctx context.Context, s *Scenario, cp *controlplane.ControlPlane, dyn dynamic.Interface) error {
	if len(s.objects) == 0 {
		return nil
	}
	mapper := restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(cp.Client.Discovery()))
	for _, m := range s.objects {
		obj := &unstructured.Unstructured{}
		if err := obj.UnmarshalJSON(m.data); err != nil {
			return fmt.Errorf("manifest %s: %w", m.source, err)
		}
		gvk := obj.GroupVersionKind()
		mapping, err := mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
		if err != nil {
			return fmt.Errorf("manifest %s: %w", m.source, err)
		}
		res := dyn.Resource(mapping.Resource)
		var ri dynamic.ResourceInterface = res
		if mapping.Scope.Name() == "namespace" {
			if obj.GetNamespace() == "" {
				obj.SetNamespace(DefaultNamespace)
			}
			ri = res.Namespace(obj.GetNamespace())
		}
		if _, err := ri.Create(ctx, obj, metav1.CreateOptions{}); err != nil {
			return fmt.Errorf("manifest %s: %w", m.source, err)
		}
	}
	return nil
}

// creator creates the scenario's workloads for one profile.
type creator struct {
	s       *Scenario
	profile string
	cp      *controlplane.ControlPlane
	dyn     dynamic.Interface
}

func newCreator(s *Scenario, profile string, cp *controlplane.ControlPlane) (*creator, error) {
	dyn, err := dynamic.NewForConfig(cp.JSONConfig())
	if err != nil {
		return nil, err
	}
	return &creator{s: s, profile: profile, cp: cp, dyn: dyn}, nil
}

// timeline creates each batch of arrivals at its time after start, each
// batch on its own: one that takes long to create (a gang of thousands of
// pods) does not hold back the batches due after it.
func (c *creator) timeline(ctx context.Context, arrivals []arrival, start time.Time) error {
	logger := klog.FromContext(ctx)
	g, gctx := errgroup.WithContext(ctx)
	for len(arrivals) > 0 {
		n := 1
		for n < len(arrivals) && arrivals[n].at == arrivals[0].at {
			n++
		}
		if wait := time.Until(start.Add(arrivals[0].at)); wait > 0 {
			select {
			case <-gctx.Done():
				return awaitCreated(ctx, g)
			case <-time.After(wait):
			}
		}
		batch := arrivals[:n]
		g.Go(func() error {
			if err := c.create(gctx, batch); err != nil {
				return err
			}
			logger.V(4).Info("Workloads arrived", "at", batch[0].at, "copies", len(batch))
			return nil
		})
		arrivals = arrivals[n:]
	}
	return awaitCreated(ctx, g)
}

// awaitCreated waits for the batches being created; an error after ctx
// ended is the run's end, not a failure.
func awaitCreated(ctx context.Context, g *errgroup.Group) error {
	if err := g.Wait(); err != nil && ctx.Err() == nil {
		return err
	}
	return nil
}

// create creates arrivals at once: their groups, then all their pods.
func (c *creator) create(ctx context.Context, arrivals []arrival) error {
	var gangs []arrival
	var pods []*v1.Pod
	for _, a := range arrivals {
		if a.workload.Kind == KindGang && a.member <= 0 {
			gangs = append(gangs, a) // the group comes with its first pod
		}
		pods = append(pods, a.pods(c.profile)...)
	}
	if err := parallel(ctx, len(gangs), 8, func(i int) error { return c.createGroup(ctx, gangs[i]) }); err != nil {
		return err
	}
	return parallel(ctx, len(pods), 16, func(i int) error {
		_, err := c.cp.Client.CoreV1().Pods(pods[i].Namespace).Create(ctx, pods[i], metav1.CreateOptions{})
		return err
	})
}

// createGroup creates the gang's group object of the profile, if any.
func (c *creator) createGroup(ctx context.Context, a arrival) error {
	ns := a.workload.namespace()
	switch c.profile {
	case ProfileMuster, ProfileMusterBinpack, ProfileMusterTopology:
		_, err := c.cp.Muster.SchedulingV1alpha1().PodGroups(ns).Create(ctx, a.musterPodGroup(c.s.gangWait), metav1.CreateOptions{})
		return err
	case ProfileUpstream:
		_, err := c.cp.Client.SchedulingV1beta1().PodGroups(ns).Create(ctx, a.upstreamPodGroup(), metav1.CreateOptions{})
		return err
	case ProfileCoscheduling:
		obj, err := toUnstructured(a.coschedulingPodGroup(c.s.gangWait))
		if err != nil {
			return err
		}
		gvr := schema.GroupVersionResource{Group: "scheduling.x-k8s.io", Version: "v1alpha1", Resource: "podgroups"}
		_, err = c.dyn.Resource(gvr).Namespace(ns).Create(ctx, obj, metav1.CreateOptions{})
		return err
	}
	return nil
}

// parallel runs f(0..n-1) on up to workers goroutines; the first error wins.
func parallel(ctx context.Context, n, workers int, f func(int) error) error {
	var (
		wg    sync.WaitGroup
		mu    sync.Mutex
		first error
		next  int
	)
	for range min(workers, n) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				mu.Lock()
				i := next
				next++
				stop := first != nil || i >= n || ctx.Err() != nil
				mu.Unlock()
				if stop {
					return
				}
				if err := f(i); err != nil {
					mu.Lock()
					if first == nil {
						first = err
					}
					mu.Unlock()
				}
			}
		}()
	}
	wg.Wait()
	if first == nil && ctx.Err() != nil {
		return ctx.Err()
	}
	return first
}

package integration

import (
	"context"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	spv1alpha1 "sigs.k8s.io/scheduler-plugins/apis/scheduling/v1alpha1"
	spclient "sigs.k8s.io/scheduler-plugins/pkg/generated/clientset/versioned"
	vcv1beta1 "volcano.sh/apis/pkg/apis/scheduling/v1beta1"
	vcclient "volcano.sh/apis/pkg/client/clientset/versioned"

	"github.com/muster-sched/muster/apis/scheduling/v1alpha1"
)

// groupKind is a source of gangs whose behaviour the gang tests share:
// what defines a gang of the kind, how a pod joins it, and which profile
// schedules its pods. Muster's PodGroup spec stands for every kind's.
type groupKind struct {
	name string
	// fields is spec with only the fields a gang of the kind has; nil:
	// all of them.
	fields func(spec v1alpha1.PodGroupSpec) v1alpha1.PodGroupSpec
	// create creates the object defining the gang name of spec; nil where
	// the members' labels define it.
	create func(e *env, name string, spec v1alpha1.PodGroupSpec)
	// join makes p a member of g in role ("" for none), as the kind's own
	// tools make members.
	join func(p *v1.Pod, g kindGang, role string)
	// configFile, under config/, serves the kind's pods.
	configFile string
	// why waits until the gang says that it waits for reason (Invalid,
	// Unschedulable) with a message starting with msg, where the kind's
	// users read it; nil: in Events on its pending member pod.
	why func(g kindGang, pod, reason, msg string)
}

// groupKinds are the sources of gangs the gang tests run over: Muster's
// label-only gangs and PodGroups, Volcano's and scheduler-plugins'
// PodGroups.
func groupKinds(t *testing.T) []groupKind {
	return []groupKind{labelKind, musterKind, volcanoKind(t), schedulerPluginsKind(t)}
}

// withPodGroup are the kinds whose gangs a PodGroup defines: those of the
// tests that had a Muster PodGroup before they ran over kinds.
func withPodGroup(kinds []groupKind) []groupKind {
	var out []groupKind
	for _, k := range kinds {
		if k.create != nil {
			out = append(out, k)
		}
	}
	return out
}

var labelKind = groupKind{
	name: "labels",
	fields: func(s v1alpha1.PodGroupSpec) v1alpha1.PodGroupSpec {
		return v1alpha1.PodGroupSpec{MinMember: s.MinMember}
	},
	join: func(p *v1.Pod, g kindGang, role string) {
		setMeta(&p.Labels, v1alpha1.LabelPodGroup, g.name, v1alpha1.LabelMinAvailable, fmt.Sprint(g.spec.MinMember),
			v1alpha1.LabelRole, role)
	},
	configFile: "replace-default.yaml",
}

var musterKind = groupKind{
	name:   "muster",
	create: func(e *env, name string, spec v1alpha1.PodGroupSpec) { e.podGroup(name, spec) },
	join: func(p *v1.Pod, g kindGang, role string) {
		setMeta(&p.Labels, v1alpha1.LabelPodGroup, g.name, v1alpha1.LabelRole, role)
	},
	configFile: "replace-default.yaml",
	why: func(g kindGang, _, reason, msg string) {
		g.e.waitPodGroup(g.name, reason+": "+msg, func(s *v1alpha1.PodGroupStatus) bool {
			c := scheduledCondition(s)
			return c != nil && c.Reason == reason && strings.HasPrefix(c.Message, msg)
		})
	},
}

// volcanoKind's gangs are as Volcano's Job controller makes them: members
// name their PodGroup and task in annotations, and are scheduled by
// Muster's profile volcano. Volcano's PodGroup has no
// scheduleTimeoutSeconds.
func volcanoKind(t *testing.T) groupKind {
	vc, err := vcclient.NewForConfig(cluster.JSONConfig())
	if err != nil {
		t.Fatal(err)
	}
	return groupKind{
		name: "volcano",
		fields: func(s v1alpha1.PodGroupSpec) v1alpha1.PodGroupSpec {
			s.ScheduleTimeoutSeconds = nil
			return s
		},
		create: func(e *env, name string, spec v1alpha1.PodGroupSpec) {
			pg := &vcv1beta1.PodGroup{
				ObjectMeta: metav1.ObjectMeta{Name: name},
				Spec: vcv1beta1.PodGroupSpec{MinMember: spec.MinMember, MinTaskMember: spec.MinTaskMember,
					Queue: spec.Queue, PriorityClassName: spec.PriorityClassName},
			}
			if spec.MinResources != nil {
				pg.Spec.MinResources = (*v1.ResourceList)(&spec.MinResources)
			}
			if _, err := vc.SchedulingV1beta1().PodGroups(e.ns).Create(e.ctx, pg, metav1.CreateOptions{}); err != nil {
				e.t.Fatal(err)
			}
		},
		join: func(p *v1.Pod, g kindGang, role string) {
			setMeta(&p.Annotations, v1alpha1.VolcanoAnnotationGroupName, g.name, v1alpha1.VolcanoAnnotationTaskSpec, role)
			p.Spec.SchedulerName = "volcano"
		},
		configFile: "volcano.yaml",
		// In the condition Unschedulable, as vc-scheduler writes it.
		why: func(g kindGang, _, reason, msg string) {
			g.e.t.Helper()
			want := map[string]string{"Invalid": vcv1beta1.NotEnoughPodsReason, "Unschedulable": vcv1beta1.NotEnoughResourcesReason}[reason]
			var status vcv1beta1.PodGroupStatus
			err := wait.PollUntilContextTimeout(g.e.ctx, 50*time.Millisecond, 10*time.Second, true, func(ctx context.Context) (bool, error) {
				pg, err := vc.SchedulingV1beta1().PodGroups(g.e.ns).Get(ctx, g.name, metav1.GetOptions{})
				if err != nil {
					return false, nil
				}
				status = pg.Status
				for _, c := range status.Conditions {
					if c.Type == vcv1beta1.PodGroupUnschedulableType && c.Status == v1.ConditionTrue &&
						c.Reason == want && strings.HasPrefix(c.Message, msg) {
						return true, nil
					}
				}
				return false, nil
			})
			if err != nil {
				g.e.t.Fatalf("Volcano PodGroup %s: want %s (%s: %s); status is %+v", g.name, reason, want, msg, status)
			}
		},
	}
}

// schedulerPluginsKind's PodGroup has no minTaskMember, queue or priority
// class.
func schedulerPluginsKind(t *testing.T) groupKind {
	sp, err := spclient.NewForConfig(cluster.JSONConfig())
	if err != nil {
		t.Fatal(err)
	}
	return groupKind{
		name: "scheduler-plugins",
		fields: func(s v1alpha1.PodGroupSpec) v1alpha1.PodGroupSpec {
			return v1alpha1.PodGroupSpec{MinMember: s.MinMember, MinResources: s.MinResources, ScheduleTimeoutSeconds: s.ScheduleTimeoutSeconds}
		},
		create: func(e *env, name string, spec v1alpha1.PodGroupSpec) {
			_, err := sp.SchedulingV1alpha1().PodGroups(e.ns).Create(e.ctx, &spv1alpha1.PodGroup{
				ObjectMeta: metav1.ObjectMeta{Name: name},
				Spec: spv1alpha1.PodGroupSpec{MinMember: spec.MinMember, MinResources: spec.MinResources,
					ScheduleTimeoutSeconds: spec.ScheduleTimeoutSeconds},
			}, metav1.CreateOptions{})
			if err != nil {
				e.t.Fatal(err)
			}
		},
		join: func(p *v1.Pod, g kindGang, role string) {
			setMeta(&p.Labels, v1alpha1.SchedulerPluginsLabelPodGroup, g.name, v1alpha1.LabelRole, role)
		},
		configFile: "replace-default.yaml",
	}
}

// has says whether a gang of the kind can have spec.
func (k groupKind) has(spec v1alpha1.PodGroupSpec) bool {
	return k.fields == nil || reflect.DeepEqual(k.fields(spec), spec)
}

// config is the scheduler configuration serving the kind's pods.
func (k groupKind) config(t testing.TB) string { return readConfig(t, k.configFile) }

// kindGang is a gang of some kind defined in a case.
type kindGang struct {
	e    *env
	kind groupKind
	name string
	spec v1alpha1.PodGroupSpec
}

// gang defines the gang name of kind k with spec, which the kind must have.
func (e *env) gang(k groupKind, name string, spec v1alpha1.PodGroupSpec) kindGang {
	e.t.Helper()
	if !k.has(spec) {
		e.t.Fatalf("a %s gang cannot have %+v", k.name, spec)
	}
	if k.create != nil {
		k.create(e, name, spec)
	}
	return kindGang{e: e, kind: k, name: name, spec: spec}
}

// member builds a pod of the gang requesting cpu, in role ("" for none).
func (g kindGang) member(name, cpu, role string) *v1.Pod {
	p := g.e.member(name, cpu, nil)
	g.kind.join(p, g, role)
	return p
}

// members creates n members requesting cpu, named <gang>-<i>.
func (g kindGang) members(n int, cpu string) []string {
	names := names(g.name, n)
	for _, name := range names {
		g.e.create(g.member(name, cpu, ""))
	}
	return names
}

// waitWhy waits until the gang says that it waits for reason (Invalid,
// Unschedulable) with a message starting with msg (see groupKind.why);
// pod is the member whose Events say it where the kind has no place of its
// own.
func (g kindGang) waitWhy(pod, reason, msg string) {
	g.e.t.Helper()
	if g.kind.why != nil {
		g.kind.why(g, pod, reason, msg)
		return
	}
	// events/v1 folds repeats into a series keeping the first note: each
	// member's first Event for the gang says it.
	g.e.waitEvent(pod, "Gang"+reason, fmt.Sprintf("gang %s: %s", g.name, msg))
}

// setMeta sets the pairs of keys and values in *m, but for empty values.
func setMeta(m *map[string]string, kv ...string) {
	for i := 0; i+1 < len(kv); i += 2 {
		if kv[i+1] == "" {
			continue
		}
		if *m == nil {
			*m = map[string]string{}
		}
		(*m)[kv[i]] = kv[i+1]
	}
}

package integration

import (
	"fmt"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"

	"github.com/muster-sched/muster/apis/scheduling/v1alpha1"
	"github.com/muster-sched/muster/pkg/simulator"
)

// Gangs whose members need devices (DRA ResourceClaims) or local volumes
// (WaitForFirstConsumer PersistentVolumeClaims): the gang's plan places
// each member seeing the devices and volumes of the members planned
// before it, so a gang binds whole on distinct devices and volumes, or
// binds nothing and says why.

// unevenNodes creates a node much bigger than the others (big-0), then
// small-0 … small-(n-2), and returns their names. The scheduler's scores
// (least allocated first) send every member to big-0 while it has room:
// a plan that did not see the devices and volumes taken by the members
// planned before would put them all there.
func (e *env) unevenNodes(n int) []string {
	e.t.Helper()
	e.nodes("big", 1, simulator.NodeShape{CPU: "64", Memory: "256Gi"})
	e.nodes("small", n-1, simulator.NodeShape{CPU: "8", Memory: "32Gi"})
	return append([]string{"big-0"}, names("small", n-1)...)
}

// gangMember is a member of the PodGroup g needing a little cpu.
func (e *env) gangMember(name string) *v1.Pod {
	return e.member(name, "100m", map[string]string{v1alpha1.LabelPodGroup: "g"})
}

// waitUnschedulable waits until the PodGroup g says it cannot be placed,
// with a message containing each of whys, and checks that none of its
// members binds.
func (e *env) waitUnschedulable(members []string, whys ...string) {
	e.t.Helper()
	e.waitPodGroup("g", fmt.Sprintf("unschedulable: %q", whys), func(s *v1alpha1.PodGroupStatus) bool {
		c := scheduledCondition(s)
		if c == nil || c.Reason != "Unschedulable" {
			return false
		}
		for _, why := range whys {
			if !strings.Contains(c.Message, why) {
				return false
			}
		}
		return true
	})
	e.staysUnbound(time.Second, members...)
}

// withDevices makes the members, each with its own claim to a device.
// Every claim is created before any member: the gang is planned when its
// last member comes, and a claim the scheduler did not see yet would fail
// the plan.
func (e *env) withDevices(members []string, class string) []*v1.Pod {
	var pods []*v1.Pod
	for _, m := range members {
		pods = append(pods, e.withDevice(e.gangMember(m), class))
	}
	return pods
}

// withVolumes makes the members, each with its own volume claim, as
// withDevices does.
func (e *env) withVolumes(members []string, class string) []*v1.Pod {
	var pods []*v1.Pod
	for _, m := range members {
		pods = append(pods, e.withVolume(e.gangMember(m), class))
	}
	return pods
}

func TestGangDevices(t *testing.T) {
	t.Run("4 members, one device each, on 2 nodes of 2 devices bind whole on distinct devices", func(t *testing.T) {
		e := newEnv(t)
		nodes := e.unevenNodes(2)
		class := e.deviceClass()
		e.devices(2, nodes...)
		e.startScheduler(gangConfig(t))
		e.podGroup("g", v1alpha1.PodGroupSpec{MinMember: 4})
		members := names("g", 4)
		e.create(e.withDevices(members, class)...)
		placed := e.waitBound(members...)
		e.noFailedScheduling("cannot allocate all claims")
		e.distinctDevices(placed, members)
	})
	t.Run("5 members on 2 nodes of 2 devices bind none", func(t *testing.T) {
		e := newEnv(t)
		nodes := e.unevenNodes(2)
		class := e.deviceClass()
		e.devices(2, nodes...)
		e.startScheduler(gangConfig(t))
		e.podGroup("g", v1alpha1.PodGroupSpec{MinMember: 5})
		members := names("g", 5)
		e.create(e.withDevices(members, class)...)
		e.waitUnschedulable(members, "placeable 4/5", "cannot allocate all claims")
	})
}

// TestGangDevicesPublished: a gang refused by its plan for want of
// devices is retried as soon as devices are published, whether by a new
// ResourceSlice or in a node's slice, not at the scheduling queue's
// periodic flush of its unschedulable pods (5 minutes).
func TestGangDevicesPublished(t *testing.T) {
	for _, publish := range []struct {
		name string
		do   func(e *env, nodes []string)
	}{
		{"a third node's slice is created", func(e *env, nodes []string) { e.devices(1, nodes[2]) }},
		{"a node's slice gains a device", func(e *env, nodes []string) { e.addDevice(nodes[0]) }},
	} {
		t.Run(publish.name, func(t *testing.T) {
			e := newEnv(t)
			nodes := e.unevenNodes(3)
			class := e.deviceClass()
			e.devices(1, nodes[:2]...)
			e.startScheduler(gangConfig(t))
			e.podGroup("g", v1alpha1.PodGroupSpec{MinMember: 3})
			members := names("g", 3)
			e.create(e.withDevices(members, class)...)
			e.waitUnschedulable(members, "placeable 2/3", "cannot allocate all claims")
			publish.do(e, nodes)
			placed := e.waitBoundWithin(2*time.Second, members...)
			e.distinctDevices(placed, members)
		})
	}
}

// distinctDevices checks that each member has a device of its node's
// pool, and no two members the same device.
func (e *env) distinctDevices(placed map[string]string, members []string) {
	e.t.Helper()
	devices := map[string]string{}
	for _, m := range members {
		pool, device := e.allocatedDevice(m)
		if pool != placed[m] {
			e.t.Errorf("member %s on node %s has a device of pool %q", m, placed[m], pool)
		}
		id := pool + "/" + device
		if other, taken := devices[id]; taken {
			e.t.Errorf("members %s and %s were given the same device %s", other, m, id)
		}
		devices[id] = m
	}
}

func TestGangLocalVolumes(t *testing.T) {
	for _, extra := range []int{0, 1} {
		t.Run(fmt.Sprintf("3 members on 3 nodes of one volume, %d more", extra), func(t *testing.T) {
			e := newEnv(t)
			nodes := e.unevenNodes(3)
			e.startPVController()
			class := e.localStorage(nodes...)
			e.startScheduler(gangConfig(t))
			e.podGroup("g", v1alpha1.PodGroupSpec{MinMember: int32(3 + extra)})
			members := names("g", 3+extra)
			e.create(e.withVolumes(members, class)...)
			if extra > 0 {
				e.waitUnschedulable(members, "placeable 3/4", "didn't find available persistent volumes to bind")
				return
			}
			placed := e.waitBound(members...)
			e.noFailedScheduling("didn't find available persistent volumes")
			if nodes := distinctNodes(placed); len(nodes) != 3 {
				t.Errorf("members share nodes: %v", placed)
			}
			for _, m := range members {
				if pv, want := e.boundVolume(m), e.ns+"-"+placed[m]; pv != want {
					t.Errorf("member %s on %s: its claim is bound to %q, want %q", m, placed[m], pv, want)
				}
			}
		})
	}
}

// TestGangVolumeCreated: a gang refused by its plan for want of local
// volumes is retried as soon as a volume is created, not at the
// scheduling queue's periodic flush: within 2 s its members have their
// volumes chosen (the scheduler binds them in PreBind, once the whole
// gang is placed). Binding the pods then waits for the PV controller and
// VolumeBinding's PreBind, which checks the claims once a second.
func TestGangVolumeCreated(t *testing.T) {
	e := newEnv(t)
	nodes := e.unevenNodes(3)
	e.startPVController()
	class := e.localStorage(nodes[:2]...)
	e.startScheduler(gangConfig(t))
	e.podGroup("g", v1alpha1.PodGroupSpec{MinMember: 3})
	members := names("g", 3)
	e.create(e.withVolumes(members, class)...)
	e.waitUnschedulable(members, "placeable 2/3", "didn't find available persistent volumes to bind")
	e.localVolume(class, nodes[2])
	e.waitVolumesChosen(2*time.Second, members...)
	placed := e.waitBound(members...)
	for _, m := range members {
		if pv, want := e.boundVolume(m), e.ns+"-"+placed[m]; pv != want {
			t.Errorf("member %s on %s: its claim is bound to %q, want %q", m, placed[m], pv, want)
		}
	}
}

// TestGangDevicesAndVolumes: one gang, two members needing a device and
// two a local volume, on two nodes of one device and one volume each.
func TestGangDevicesAndVolumes(t *testing.T) {
	e := newEnv(t)
	nodes := e.unevenNodes(2)
	e.startPVController()
	class := e.deviceClass()
	e.devices(1, nodes...)
	storage := e.localStorage(nodes...)
	e.startScheduler(gangConfig(t))
	e.podGroup("g", v1alpha1.PodGroupSpec{MinMember: 4})
	e.create(
		e.withDevice(e.gangMember("gpu-0"), class), e.withVolume(e.gangMember("disk-0"), storage),
		e.withDevice(e.gangMember("gpu-1"), class), e.withVolume(e.gangMember("disk-1"), storage),
	)
	placed := e.waitBound("gpu-0", "gpu-1", "disk-0", "disk-1")
	e.noFailedScheduling("cannot allocate all claims")
	e.noFailedScheduling("didn't find available persistent volumes")
	if placed["gpu-0"] == placed["gpu-1"] || placed["disk-0"] == placed["disk-1"] {
		t.Errorf("two members share a node's only device or volume: %v", placed)
	}
	for _, m := range []string{"gpu-0", "gpu-1"} {
		if pool, _ := e.allocatedDevice(m); pool != placed[m] {
			t.Errorf("member %s on node %s has a device of pool %q", m, placed[m], pool)
		}
	}
	for _, m := range []string{"disk-0", "disk-1"} {
		if pv, want := e.boundVolume(m), e.ns+"-"+placed[m]; pv != want {
			t.Errorf("member %s on %s: its claim is bound to %q, want %q", m, placed[m], pv, want)
		}
	}
}

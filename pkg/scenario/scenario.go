// Package scenario reads scenario files (a cluster, queues, a timeline of
// workloads and the scheduler profiles to compare), runs each scenario once
// per profile on a fresh in-process control plane, measures what users of a
// batch scheduler ask about — deadlock, starvation, fairness, packing — and
// writes the results side by side.
package scenario

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"gopkg.in/yaml.v3"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

// Scenario is one scenario file, parsed and validated. Field names are the
// file's; docs/scenarios.md is the reference.
type Scenario struct {
	Name        string `yaml:"name"`
	Description string `yaml:"description"`
	// Speedup divides simulated run times (default 1).
	Speedup float64 `yaml:"speedup"`
	// Timeout bounds each profile's run (default 2m).
	Timeout string `yaml:"timeout"`
	// Settle ends a run that has made no progress for this long (default 15s).
	Settle string `yaml:"settle"`
	// GangTimeout is how long placed gang members may wait for the rest
	// (Muster's scheduleTimeoutSeconds, Coscheduling's
	// permitWaitingTimeSeconds); default 10s.
	GangTimeout string `yaml:"gangTimeout"`
	// FairShareTolerance is how far, as a dominant share, a queue may be
	// from its fair share and count as at it, for the time to fair share
	// after a burst (default 0.05).
	FairShareTolerance *float64 `yaml:"fairShareTolerance"`
	// Runs is how many times each profile runs, the profiles taking turns;
	// every figure reported is then the median over the runs (default 1).
	// Throughput on a shared machine moves ±20 % from run to run.
	Runs int `yaml:"runs"`
	// Profiles to compare; default: stock and muster, plus coscheduling
	// when the scenario has gangs and capacityscheduling when queues have
	// quotas.
	Profiles  []string      `yaml:"profiles"`
	Cluster   Cluster       `yaml:"cluster"`
	Queues    []Queue       `yaml:"queues"`
	Workloads []Workload    `yaml:"workloads"`
	Manifests []yaml.Node   `yaml:"manifests"`
	Expect    []Expectation `yaml:"expect"`

	// Filled in by Parse.
	file      string
	dir       string
	root      *yaml.Node
	timeout   time.Duration
	settle    time.Duration
	gangWait  time.Duration
	objects   []manifestObject
	resources map[v1.ResourceName]bool
}

// Cluster is the simulated nodes, in groups of one shape.
type Cluster struct {
	Nodes []NodeGroup `yaml:"nodes"`
	// Kubelet says whether the simulated kubelet runs the bound pods
	// (default true). false leaves them bound and Pending, as
	// kube-scheduler's scheduler_perf does: for throughput, where the
	// kubelet's status writes would share the process's cores with the
	// scheduler. Without it nothing completes and nothing being deleted
	// goes away, so no workload may have a run time.
	Kubelet *bool `yaml:"kubelet"`
}

// kubelet reports whether the simulated kubelet runs.
func (c Cluster) kubelet() bool { return c.Kubelet == nil || *c.Kubelet }

// NodeGroup is count nodes of one shape, named <name>-0, <name>-1, …
type NodeGroup struct {
	Name     string            `yaml:"name"`
	Count    int               `yaml:"count"`
	CPU      string            `yaml:"cpu"`
	Memory   string            `yaml:"memory"`
	Pods     int               `yaml:"pods"`
	GPUs     int               `yaml:"gpus"`
	Extended map[string]string `yaml:"extended"`
	Labels   map[string]string `yaml:"labels"`
	Taints   []Taint           `yaml:"taints"`
	// Topology spreads the group's nodes over racks and blocks.
	Topology *NodeTopology `yaml:"topology"`
}

// NodeTopology puts a node group's nodes, in name order, into racks of
// NodesPerRack nodes and the racks into blocks of RacksPerBlock racks,
// labelled topology.muster.dev/rack: <group>-rack-<r> and
// topology.muster.dev/block: <group>-block-<b>.
type NodeTopology struct {
	NodesPerRack int `yaml:"nodesPerRack"`
	// RacksPerBlock is optional: without it the nodes have no block.
	RacksPerBlock int `yaml:"racksPerBlock"`
}

// Taint is a node taint.
type Taint struct {
	Key    string `yaml:"key"`
	Value  string `yaml:"value"`
	Effect string `yaml:"effect"`
}

// Queue is a Muster Queue; every profile gets the same workloads, and the
// capacityscheduling profile gets an ElasticQuota per queue namespace.
type Queue struct {
	Name       string            `yaml:"name"`
	Weight     int32             `yaml:"weight"`
	Priority   int32             `yaml:"priority"`
	Deserved   map[string]string `yaml:"deserved"`
	Guarantee  map[string]string `yaml:"guarantee"`
	Capability map[string]string `yaml:"capability"`
}

// Workload is a gang or a set of plain pods arriving on the timeline.
type Workload struct {
	Name string `yaml:"name"`
	// Kind is gang or pods.
	Kind string `yaml:"kind"`
	// Arrival is when the first copy arrives, after the run starts.
	Arrival string `yaml:"arrival"`
	// Repeat is how many copies arrive (default 1), Every apart.
	Repeat int    `yaml:"repeat"`
	Every  string `yaml:"every"`
	// MemberEvery spreads the pods of a copy: they are created one by one,
	// this far apart, as a controller creates a job's pods (default: all
	// at once).
	MemberEvery string `yaml:"memberEvery"`
	// Members is the number of pods (of a gang, or plain pods).
	Members int `yaml:"members"`
	// MinMember is the gang's minimum (default: Members).
	MinMember int `yaml:"minMember"`
	// Roles split a gang's members, each with its own minimum and requests.
	Roles    []Role            `yaml:"roles"`
	Queue    string            `yaml:"queue"`
	Priority int32             `yaml:"priority"`
	Requests map[string]string `yaml:"requests"`
	// RunTime is how long each pod runs once bound (default: forever).
	RunTime      string            `yaml:"runTime"`
	NodeSelector map[string]string `yaml:"nodeSelector"`
	Tolerations  []Toleration      `yaml:"tolerations"`
	// Topology constrains where a gang's members go.
	Topology *GangTopology `yaml:"topology"`

	runTime     time.Duration
	arrival     time.Duration
	every       time.Duration
	memberEvery time.Duration
}

// Role is a part of a gang: Members pods, at least Min of which the gang
// needs (Muster's minTaskMember).
type Role struct {
	Name     string            `yaml:"name"`
	Members  int               `yaml:"members"`
	Min      int               `yaml:"min"`
	Requests map[string]string `yaml:"requests"`
}

// GangTopology is a gang's topology constraint, by node label keys:
// Required keeps every member in one domain of its key; Preferred asks for
// the tightest level, from its key up, where the gang fits.
type GangTopology struct {
	Required  string `yaml:"required"`
	Preferred string `yaml:"preferred"`
}

// Toleration tolerates a node taint.
type Toleration struct {
	Key      string `yaml:"key"`
	Operator string `yaml:"operator"`
	Value    string `yaml:"value"`
	Effect   string `yaml:"effect"`
}

// Expectation bounds metrics of one profile (or every profile when
// Profile is empty). A nil bound is not checked.
type Expectation struct {
	Profile string `yaml:"profile"`
	// Absolute bounds.
	PartialGangs       *int           `yaml:"partialGangs"`
	MaxShareDeviation  *float64       `yaml:"maxShareDeviation"`
	MinJainIndex       *float64       `yaml:"minJainIndex"`
	MaxAttemptsPerPod  *float64       `yaml:"attemptsPerPod"`
	MaxUnscheduledPods *int           `yaml:"unscheduledPods"`
	MaxEvictions       *int           `yaml:"evictions"`
	MaxGangsBroken     *int           `yaml:"gangsBrokenByEviction"`
	MinFreeNodes       map[string]int `yaml:"minFreeNodes"`
	// MaxPodLatencyP99 bounds, in seconds, podLatencyP99: pods in no gang
	// keep their scheduling latency while gangs are placed.
	MaxPodLatencyP99 *float64 `yaml:"podLatencyP99"`
	// MaxTimeToFairShare bounds, in seconds, the time to fair share after
	// every burst; a burst after which the queues never got there fails.
	MaxTimeToFairShare *float64 `yaml:"maxTimeToFairShare"`
	// MinRequiredPlacement and MinPreferredPlacement bound, as a fraction
	// from 0 to 1, the share of placed gangs with a required (preferred)
	// topology whose members all run in one domain of its key; with no
	// such gang placed the bound fails.
	MinRequiredPlacement  *float64 `yaml:"minRequiredPlacement"`
	MinPreferredPlacement *float64 `yaml:"minPreferredPlacement"`
	// MinWholeFreeNodes bounds the mean number of GPU nodes with every GPU
	// free while work remained (meanWholeFreeNodes).
	MinWholeFreeNodes *float64 `yaml:"minWholeFreeNodes"`
	// Bounds relative to another profile of the same scenario.
	Relative []RelativeBound `yaml:"relative"`
}

// RelativeBound bounds metric(this profile) / metric(Of); Of "others"
// bounds the ratio to every other profile of the scenario (for min, the
// best of them where more is better; for max, the best where less is).
type RelativeBound struct {
	Metric string   `yaml:"metric"`
	Of     string   `yaml:"of"`
	Max    *float64 `yaml:"max"`
	Min    *float64 `yaml:"min"`
}

// manifestObject is a raw Kubernetes object of the scenario.
type manifestObject struct {
	data   []byte // JSON
	source string
}

// Load reads and validates a scenario file.
func Load(file string) (*Scenario, error) {
	data, err := os.ReadFile(file)
	if err != nil {
		return nil, err
	}
	return Parse(file, data)
}

// Parse decodes and validates a scenario. Errors name the file, the line
// and the field: "contention.yaml: line 12: workloads[0].members: must be
// at least 1".
func Parse(file string, data []byte) (*Scenario, error) {
	s := &Scenario{file: file, dir: filepath.Dir(file)}
	var root yaml.Node
	if err := yaml.Unmarshal(data, &root); err != nil {
		return nil, fmt.Errorf("%s: %s", file, strings.TrimPrefix(err.Error(), "yaml: "))
	}
	s.root = &root
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	if err := dec.Decode(s); err != nil {
		if errors.Is(err, io.EOF) {
			return nil, fmt.Errorf("%s: empty scenario", file)
		}
		var typeErr *yaml.TypeError
		if errors.As(err, &typeErr) {
			msgs := make([]string, len(typeErr.Errors))
			for i, m := range typeErr.Errors {
				msgs[i] = file + ": " + explainDecodeError(&root, m)
			}
			return nil, errors.New(strings.Join(msgs, "\n"))
		}
		return nil, fmt.Errorf("%s: %s", file, strings.TrimPrefix(err.Error(), "yaml: "))
	}
	var extra yaml.Node
	if err := dec.Decode(&extra); err == nil {
		return nil, fmt.Errorf("%s: line %d: a scenario file holds one YAML document", file, extra.Line)
	}
	if errs := s.validate(); len(errs) > 0 {
		msgs := make([]string, len(errs))
		for i, e := range errs {
			msgs[i] = file + ": " + e.Error()
		}
		return nil, errors.New(strings.Join(msgs, "\n"))
	}
	return s, nil
}

// File is the file the scenario was read from.
func (s *Scenario) File() string { return s.file }

// HasGangs says whether any workload is a gang.
func (s *Scenario) HasGangs() bool {
	for _, w := range s.Workloads {
		if w.Kind == KindGang {
			return true
		}
	}
	return false
}

// HasQuotas says whether any queue sets deserved, guarantee or capability.
func (s *Scenario) HasQuotas() bool {
	for _, q := range s.Queues {
		if len(q.Deserved)+len(q.Guarantee)+len(q.Capability) > 0 {
			return true
		}
	}
	return false
}

// PodCount is the number of pods the scenario creates (raw manifests aside).
func (s *Scenario) PodCount() int {
	n := 0
	for _, w := range s.Workloads {
		n += w.repeat() * w.size()
	}
	return n
}

// defaultFairShareTolerance is the tolerance when the file sets none.
const defaultFairShareTolerance = 0.05

// fairShareTolerance is the scenario's tolerance for being at a fair share.
func (s *Scenario) fairShareTolerance() float64 {
	if s.FairShareTolerance == nil {
		return defaultFairShareTolerance
	}
	return *s.FairShareTolerance
}

// bursts are the workloads of a queue that arrive after the start: each
// is timed until the queues are at their fair shares.
func (s *Scenario) bursts() []*Workload {
	var out []*Workload
	for i := range s.Workloads {
		if w := &s.Workloads[i]; w.Queue != "" && w.arrival > 0 {
			out = append(out, w)
		}
	}
	return out
}

// Workload kinds.
const (
	KindGang = "gang"
	KindPods = "pods"
)

func (w *Workload) repeat() int {
	if w.Repeat == 0 {
		return 1
	}
	return w.Repeat
}

// size is the number of pods of one copy.
func (w *Workload) size() int {
	if len(w.Roles) == 0 {
		return w.Members
	}
	n := 0
	for _, r := range w.Roles {
		n += r.Members
	}
	return n
}

// firstArrivalPods is how many pods of w arrive at its arrival time: every
// copy's (all copies arrive then when every is 0), one per copy when pods
// arrive one by one.
func (w *Workload) firstArrivalPods() int {
	copies := 1
	if w.every == 0 {
		copies = w.repeat()
	}
	if w.memberEvery > 0 {
		return copies
	}
	return copies * w.size()
}

// minMember is the gang's minimum.
func (w *Workload) minMember() int {
	if w.MinMember > 0 {
		return w.MinMember
	}
	if len(w.Roles) == 0 {
		return w.Members
	}
	n := 0
	for _, r := range w.Roles {
		n += r.roleMin()
	}
	return n
}

func (r *Role) roleMin() int {
	if r.Min > 0 {
		return r.Min
	}
	return r.Members
}

// resourceList parses requests already validated.
func resourceList(m map[string]string) v1.ResourceList {
	out := v1.ResourceList{}
	for k, v := range m {
		out[v1.ResourceName(k)] = resource.MustParse(v)
	}
	return out
}

package scenario

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"time"

	"gopkg.in/yaml.v3"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	sigsyaml "sigs.k8s.io/yaml"
)

// fieldError is a validation error at a place in the file.
type fieldError struct {
	line  int
	field string
	msg   string
}

func (e fieldError) Error() string {
	if e.line > 0 {
		return fmt.Sprintf("line %d: %s: %s", e.line, e.field, e.msg)
	}
	return fmt.Sprintf("%s: %s", e.field, e.msg)
}

// validator collects errors and finds their lines in the YAML tree.
type validator struct {
	root *yaml.Node
	errs []fieldError
}

// path is a field's place: map keys (string) and list indices (int).
type path []any

func (p path) String() string {
	var b strings.Builder
	for _, seg := range p {
		switch v := seg.(type) {
		case int:
			fmt.Fprintf(&b, "[%d]", v)
		default:
			if b.Len() > 0 {
				b.WriteByte('.')
			}
			b.WriteString(fmt.Sprint(v))
		}
	}
	return b.String()
}

func (p path) with(segs ...any) path {
	return append(append(path{}, p...), segs...)
}

func (v *validator) errorf(p path, format string, args ...any) {
	v.errs = append(v.errs, fieldError{line: lineOf(v.root, p), field: p.String(), msg: fmt.Sprintf(format, args...)})
}

// lineOf is the line of the node at p, or of its deepest ancestor present.
func lineOf(root *yaml.Node, p path) int {
	if root == nil {
		return 0
	}
	n := root
	if n.Kind == yaml.DocumentNode && len(n.Content) > 0 {
		n = n.Content[0]
	}
	line := n.Line
	for _, seg := range p {
		switch key := seg.(type) {
		case int:
			if n.Kind != yaml.SequenceNode || key >= len(n.Content) {
				return line
			}
			n = n.Content[key]
			line = n.Line
		case string:
			if n.Kind != yaml.MappingNode {
				return line
			}
			found := false
			for i := 0; i+1 < len(n.Content); i += 2 {
				if n.Content[i].Value == key {
					line = n.Content[i].Line
					n = n.Content[i+1]
					found = true
					break
				}
			}
			if !found {
				return line
			}
		}
	}
	return line
}

// lineRE and unknownFieldRE match yaml.v3's decoding errors.
var (
	lineRE         = regexp.MustCompile(`^line (\d+): (.*)$`)
	unknownFieldRE = regexp.MustCompile(`^field (\S+) not found in type \S+$`)
)

// explainDecodeError rewrites a yaml.v3 decoding error ("line 11: field gpu
// not found in type scenario.NodeGroup") to name the field's place:
// "line 11: cluster.nodes[0].gpu: unknown field".
func explainDecodeError(root *yaml.Node, msg string) string {
	m := lineRE.FindStringSubmatch(msg)
	if m == nil {
		return msg
	}
	line, _ := strconv.Atoi(m[1])
	if f := unknownFieldRE.FindStringSubmatch(m[2]); f != nil {
		if p := pathAtLine(root, line, f[1]); p != nil {
			return fmt.Sprintf("line %d: %s: unknown field", line, p)
		}
	}
	if p := pathAtLine(root, line, ""); p != nil {
		return fmt.Sprintf("line %d: %s: %s", line, p, m[2])
	}
	return msg
}

// pathAtLine is the path of the first map key on line (named key, unless
// key is empty) or list item on line; nil when there is none.
func pathAtLine(root *yaml.Node, line int, key string) path {
	var walk func(n *yaml.Node, p path) path
	walk = func(n *yaml.Node, p path) path {
		switch n.Kind {
		case yaml.DocumentNode:
			for _, c := range n.Content {
				if found := walk(c, p); found != nil {
					return found
				}
			}
		case yaml.MappingNode:
			for i := 0; i+1 < len(n.Content); i += 2 {
				k, v := n.Content[i], n.Content[i+1]
				if k.Line == line && (key == "" || k.Value == key) {
					return p.with(k.Value)
				}
				if found := walk(v, p.with(k.Value)); found != nil {
					return found
				}
			}
		case yaml.SequenceNode:
			for i, c := range n.Content {
				if c.Kind == yaml.ScalarNode && c.Line == line && key == "" {
					return p.with(i)
				}
				if found := walk(c, p.with(i)); found != nil {
					return found
				}
			}
		}
		return nil
	}
	return walk(root, nil)
}

// Known profile names.
const (
	ProfileStock = "stock"
	// ProfileUpstream is kube-scheduler with Kubernetes' own gang API on
	// (GenericWorkload: its PodGroup cycle and GangScheduling plugin).
	ProfileUpstream           = "upstream"
	ProfileCoscheduling       = "coscheduling"
	ProfileCapacityScheduling = "capacityscheduling"
	ProfileMuster             = "muster"
	ProfileMusterBinpack      = "muster-binpack"
	// ProfileStockBinpack is kube-scheduler's default profile scoring
	// with NodeResourcesFit's MostAllocated: stock plugins' bin packing.
	ProfileStockBinpack = "stock-binpack"
	// ProfileMusterTopology is muster-binpack with the Binpack plugin's
	// domainLevels on racks and blocks (config/topology.yaml).
	ProfileMusterTopology = "muster-topology"
)

// Profiles lists every profile the runner knows, in report order.
var Profiles = []string{ProfileStock, ProfileStockBinpack, ProfileUpstream, ProfileCoscheduling, ProfileCapacityScheduling, ProfileMuster, ProfileMusterBinpack, ProfileMusterTopology}

// musterProfile says whether the profile runs Muster's plugins, whose
// gangs are Muster PodGroups.
func musterProfile(profile string) bool {
	switch profile {
	case ProfileMuster, ProfileMusterBinpack, ProfileMusterTopology:
		return true
	}
	return false
}

// ofOthers, as a relative bound's profile, bounds the ratio to every other
// profile the scenario runs.
const ofOthers = "others"

// relativeMetrics are the metrics a relative bound may compare.
var relativeMetrics = map[string]bool{
	"makespan": true, "podsPerSecond": true, "attemptsPerPod": true,
	"gangLatencyP50": true, "gangLatencyP99": true, "podLatencyP99": true, "wastedReservation": true,
	"algorithmMicrosPerPod": true, "preFilterMicrosPerPod": true,
	"reserveMicrosPerPod": true, "permitMicrosPerPod": true,
	"gpuUtilization": true, "requiredPlacement": true, "preferredPlacement": true,
	"wholeFreeNodes": true, "wholeFreeNodeGPUs": true, "rackWholeFreeNodes": true, "rackFreeGPUs": true,
}

var nameOK = func(s string) bool {
	if s == "" || len(s) > 40 {
		return false
	}
	for i, r := range s {
		if !(r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r == '-' && i > 0 && i < len(s)-1) {
			return false
		}
	}
	return true
}

func (s *Scenario) validate() []fieldError {
	v := &validator{root: s.root}
	if !nameOK(s.Name) {
		v.errorf(path{"name"}, "must be a lowercase name of letters, digits and '-' (got %q)", s.Name)
	}
	if s.Speedup == 0 {
		s.Speedup = 1
	} else if s.Speedup < 1 {
		v.errorf(path{"speedup"}, "must be at least 1 (got %v)", s.Speedup)
	}
	if s.Runs == 0 {
		s.Runs = 1
	} else if s.Runs < 0 || s.Runs > 25 {
		v.errorf(path{"runs"}, "must be between 1 and 25 (got %d)", s.Runs)
	}
	if t := s.FairShareTolerance; t != nil && !(*t > 0 && *t < 1) {
		v.errorf(path{"fairShareTolerance"}, "must be a dominant share between 0 and 1, both excluded, such as 0.05 (got %v)", *t)
	}
	s.timeout = v.duration(path{"timeout"}, s.Timeout, 2*time.Minute)
	s.settle = v.duration(path{"settle"}, s.Settle, 15*time.Second)
	s.gangWait = v.duration(path{"gangTimeout"}, s.GangTimeout, 10*time.Second)
	if s.gangWait > 0 && s.gangWait < time.Second {
		v.errorf(path{"gangTimeout"}, "must be at least 1s")
	}

	s.resources = map[v1.ResourceName]bool{v1.ResourceCPU: true, v1.ResourceMemory: true, v1.ResourceEphemeralStorage: true, "nvidia.com/gpu": true}
	if len(s.Cluster.Nodes) == 0 {
		v.errorf(path{"cluster", "nodes"}, "at least one node group is required")
	}
	groups := map[string]bool{}
	for i, g := range s.Cluster.Nodes {
		p := path{"cluster", "nodes", i}
		if !nameOK(g.Name) {
			v.errorf(p.with("name"), "must be a lowercase name (got %q)", g.Name)
		} else if groups[g.Name] {
			v.errorf(p.with("name"), "duplicate node group %q", g.Name)
		}
		groups[g.Name] = true
		if g.Count < 1 {
			v.errorf(p.with("count"), "must be at least 1 (got %d)", g.Count)
		}
		v.quantity(p.with("cpu"), g.CPU, true)
		v.quantity(p.with("memory"), g.Memory, true)
		if g.Pods < 0 {
			v.errorf(p.with("pods"), "must not be negative (got %d)", g.Pods)
		}
		if g.GPUs < 0 {
			v.errorf(p.with("gpus"), "must not be negative (got %d)", g.GPUs)
		}
		v.validateNodeTopology(p, &s.Cluster.Nodes[i])
		for _, name := range sortedKeys(g.Extended) {
			if !strings.Contains(name, "/") {
				v.errorf(p.with("extended", name), "an extended resource name has a domain, e.g. example.com/fpga")
			}
			v.quantity(p.with("extended", name), g.Extended[name], true)
			s.resources[v1.ResourceName(name)] = true
		}
		for j, t := range g.Taints {
			switch v1.TaintEffect(t.Effect) {
			case v1.TaintEffectNoSchedule, v1.TaintEffectPreferNoSchedule, v1.TaintEffectNoExecute:
			default:
				v.errorf(p.with("taints", j, "effect"), "must be NoSchedule, PreferNoSchedule or NoExecute (got %q)", t.Effect)
			}
			if t.Key == "" {
				v.errorf(p.with("taints", j, "key"), "is required")
			}
		}
	}

	queues := map[string]bool{}
	for i, q := range s.Queues {
		p := path{"queues", i}
		if !nameOK(q.Name) {
			v.errorf(p.with("name"), "must be a lowercase name (got %q)", q.Name)
		} else if queues[q.Name] {
			v.errorf(p.with("name"), "duplicate queue %q", q.Name)
		}
		queues[q.Name] = true
		if q.Weight < 0 {
			v.errorf(p.with("weight"), "must be at least 1 (got %d)", q.Weight)
		} else if q.Weight == 0 {
			s.Queues[i].Weight = 1
		}
		v.requests(p.with("deserved"), q.Deserved, s.resources)
		v.requests(p.with("guarantee"), q.Guarantee, s.resources)
		v.requests(p.with("capability"), q.Capability, s.resources)
	}

	names := map[string]bool{}
	nodeKeys := s.nodeLabelKeys()
	for i := range s.Workloads {
		s.validateWorkload(v, i, queues, names)
		s.validateGangTopology(v, path{"workloads", i}, &s.Workloads[i], nodeKeys)
	}

	for i, n := range s.Manifests {
		s.readManifest(v, path{"manifests", i}, &n)
	}

	known := map[string]bool{}
	for _, p := range Profiles {
		known[p] = true
	}
	seen := map[string]bool{}
	for i, p := range s.Profiles {
		if !known[p] {
			v.errorf(path{"profiles", i}, "unknown profile %q (known: %s)", p, strings.Join(Profiles, ", "))
		} else if seen[p] {
			v.errorf(path{"profiles", i}, "duplicate profile %q", p)
		}
		seen[p] = true
	}
	if len(s.Profiles) == 0 {
		s.Profiles = s.defaultProfiles()
		for _, p := range s.Profiles {
			seen[p] = true
		}
	}
	for i, e := range s.Expect {
		p := path{"expect", i}
		if e.Profile != "" && !seen[e.Profile] {
			v.errorf(p.with("profile"), "profile %q is not run by this scenario", e.Profile)
		}
		for g := range e.MinFreeNodes {
			if !groups[g] {
				v.errorf(p.with("minFreeNodes", g), "no node group %q", g)
			}
		}
		for j, r := range e.Relative {
			rp := p.with("relative", j)
			if !relativeMetrics[r.Metric] {
				v.errorf(rp.with("metric"), "unknown metric %q (known: %s)", r.Metric, strings.Join(sortedKeys(relativeMetrics), ", "))
			}
			if !seen[r.Of] && r.Of != ofOthers {
				v.errorf(rp.with("of"), "profile %q is not run by this scenario (or %q: every other profile)", r.Of, ofOthers)
			}
			if r.Max == nil && r.Min == nil {
				v.errorf(rp, "needs max or min")
			}
		}
		s.validateTopologyBounds(v, p, &e)
		if e.MaxShareDeviation != nil && *e.MaxShareDeviation < 0 {
			v.errorf(p.with("maxShareDeviation"), "must not be negative")
		}
		if b := e.MaxTimeToFairShare; b != nil && *b < 0 {
			v.errorf(p.with("maxTimeToFairShare"), "must be a non-negative number of seconds (got %v)", *b)
		} else if b != nil && len(s.bursts()) == 0 {
			v.errorf(p.with("maxTimeToFairShare"), "no burst to time: no workload of a queue arrives after the start")
		}
	}
	sort.SliceStable(v.errs, func(i, j int) bool { return v.errs[i].line < v.errs[j].line })
	return v.errs
}

func (s *Scenario) defaultProfiles() []string {
	out := []string{ProfileStock}
	if s.HasGangs() {
		out = append(out, ProfileUpstream, ProfileCoscheduling)
	}
	if s.HasQuotas() {
		out = append(out, ProfileCapacityScheduling)
	}
	return append(out, ProfileMuster)
}

func (s *Scenario) validateWorkload(v *validator, i int, queues, names map[string]bool) {
	w := &s.Workloads[i]
	p := path{"workloads", i}
	if !nameOK(w.Name) {
		v.errorf(p.with("name"), "must be a lowercase name (got %q)", w.Name)
	} else if names[w.Name] {
		v.errorf(p.with("name"), "duplicate workload %q", w.Name)
	}
	names[w.Name] = true
	switch w.Kind {
	case KindGang, KindPods:
	case "":
		v.errorf(p.with("kind"), "is required: gang or pods")
	default:
		v.errorf(p.with("kind"), "must be gang or pods (got %q)", w.Kind)
	}
	w.arrival = v.duration(p.with("arrival"), w.Arrival, 0)
	w.every = v.duration(p.with("every"), w.Every, 0)
	w.memberEvery = v.duration(p.with("memberEvery"), w.MemberEvery, 0)
	w.runTime = v.duration(p.with("runTime"), w.RunTime, 0)
	if w.RunTime != "" && !s.Cluster.kubelet() {
		v.errorf(p.with("runTime"), "needs the simulated kubelet, which cluster.kubelet turns off")
	}
	if w.Repeat < 0 {
		v.errorf(p.with("repeat"), "must not be negative (got %d)", w.Repeat)
	}
	if w.Queue != "" && !queues[w.Queue] {
		v.errorf(p.with("queue"), "no queue %q among queues", w.Queue)
	}
	if len(w.Roles) > 0 {
		if w.Kind != KindGang {
			v.errorf(p.with("roles"), "only a gang has roles")
		}
		if w.Members != 0 {
			v.errorf(p.with("members"), "a gang with roles counts its members per role")
		}
		roles := map[string]bool{}
		for j, r := range w.Roles {
			rp := p.with("roles", j)
			if !nameOK(r.Name) || roles[r.Name] {
				v.errorf(rp.with("name"), "must be a unique lowercase name (got %q)", r.Name)
			}
			roles[r.Name] = true
			if r.Members < 1 {
				v.errorf(rp.with("members"), "must be at least 1 (got %d)", r.Members)
			}
			if r.Min < 0 || r.Min > r.Members {
				v.errorf(rp.with("min"), "must be between 0 and members (%d) (got %d)", r.Members, r.Min)
			}
			reqs := r.Requests
			if reqs == nil {
				reqs = w.Requests
			}
			if len(reqs) == 0 {
				v.errorf(rp.with("requests"), "requests are required (here or on the workload)")
			}
			v.requests(rp.with("requests"), r.Requests, s.resources)
		}
	} else if w.Members < 1 {
		v.errorf(p.with("members"), "must be at least 1 (got %d)", w.Members)
	} else if len(w.Requests) == 0 {
		v.errorf(p.with("requests"), "requests are required")
	}
	v.requests(p.with("requests"), w.Requests, s.resources)
	if w.MinMember < 0 {
		v.errorf(p.with("minMember"), "must not be negative (got %d)", w.MinMember)
	} else if w.MinMember > 0 && w.Kind != KindGang {
		v.errorf(p.with("minMember"), "only a gang has a minMember")
	} else if w.MinMember > w.size() && w.size() > 0 {
		v.errorf(p.with("minMember"), "must not exceed the gang's %d members (got %d)", w.size(), w.MinMember)
	}
	for j, t := range w.Tolerations {
		switch v1.TolerationOperator(t.Operator) {
		case "", v1.TolerationOpEqual, v1.TolerationOpExists:
		default:
			v.errorf(p.with("tolerations", j, "operator"), "must be Equal or Exists (got %q)", t.Operator)
		}
	}
}

func (v *validator) duration(p path, s string, def time.Duration) time.Duration {
	if s == "" {
		return def
	}
	d, err := time.ParseDuration(s)
	if err != nil || d < 0 {
		v.errorf(p, "must be a non-negative duration such as 30s or 2m (got %q)", s)
		return def
	}
	return d
}

func (v *validator) quantity(p path, s string, required bool) {
	if s == "" {
		if required {
			v.errorf(p, "is required")
		}
		return
	}
	q, err := resource.ParseQuantity(s)
	if err != nil {
		v.errorf(p, "must be a quantity such as 8, 500m or 32Gi (got %q)", s)
		return
	}
	if q.Sign() < 0 {
		v.errorf(p, "must not be negative (got %q)", s)
	}
}

func (v *validator) requests(p path, m map[string]string, known map[v1.ResourceName]bool) {
	for _, name := range sortedKeys(m) {
		if !known[v1.ResourceName(name)] {
			v.errorf(p.with(name), "unknown resource %q (the cluster has %s)", name, strings.Join(resourceNames(known), ", "))
			continue
		}
		v.quantity(p.with(name), m[name], true)
	}
}

// readManifest takes a raw object written inline, or a file (relative to
// the scenario) of YAML documents.
func (s *Scenario) readManifest(v *validator, p path, n *yaml.Node) {
	switch n.Kind {
	case yaml.ScalarNode:
		file := n.Value
		if !filepath.IsAbs(file) {
			file = filepath.Join(s.dir, file)
		}
		data, err := os.ReadFile(file)
		if err != nil {
			v.errorf(p, "%v", err)
			return
		}
		docs := utilyaml.NewDocumentDecoder(nopCloser{strings.NewReader(string(data))})
		defer docs.Close()
		for k := 0; ; k++ {
			buf := make([]byte, len(data)+1)
			m, err := docs.Read(buf)
			if err != nil {
				break
			}
			doc := strings.TrimSpace(string(buf[:m]))
			if doc == "" || doc == "---" {
				continue
			}
			s.addObject(v, p, []byte(doc), n.Value+" document "+strconv.Itoa(k+1))
		}
	case yaml.MappingNode:
		data, err := yaml.Marshal(n)
		if err != nil {
			v.errorf(p, "%v", err)
			return
		}
		s.addObject(v, p, data, fmt.Sprintf("line %d", n.Line))
	default:
		v.errorf(p, "must be a file name or a Kubernetes object")
	}
}

func (s *Scenario) addObject(v *validator, p path, data []byte, source string) {
	js, err := sigsyaml.YAMLToJSON(data)
	if err != nil {
		v.errorf(p, "%s: %v", source, err)
		return
	}
	var meta struct {
		APIVersion string `json:"apiVersion"`
		Kind       string `json:"kind"`
		Metadata   struct {
			Name string `json:"name"`
		} `json:"metadata"`
	}
	if err := sigsyaml.Unmarshal(js, &meta); err != nil || meta.APIVersion == "" || meta.Kind == "" || meta.Metadata.Name == "" {
		v.errorf(p, "%s: a manifest needs apiVersion, kind and metadata.name", source)
		return
	}
	s.objects = append(s.objects, manifestObject{data: js, source: source})
}

func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

func resourceNames(m map[v1.ResourceName]bool) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, string(k))
	}
	sort.Strings(out)
	return out
}

type nopCloser struct{ *strings.Reader }

func (nopCloser) Close() error { return nil }

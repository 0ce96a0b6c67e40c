package metrics

import (
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/component-base/metrics"
	"k8s.io/component-base/metrics/legacyregistry"
	schedulermetrics "k8s.io/kubernetes/pkg/scheduler/metrics"
)

// dashboardFile is the chart's Grafana dashboard.
var dashboardFile = filepath.Join("..", "..", "manifests", "charts", "muster", "dashboards", "muster.json")

// dashboard is what the test reads of a Grafana dashboard.
type dashboard struct {
	Title      string  `json:"title"`
	UID        string  `json:"uid"`
	Panels     []panel `json:"panels"`
	Templating struct {
		List []struct {
			Name  string `json:"name"`
			Query any    `json:"query"`
		} `json:"list"`
	} `json:"templating"`
}

type panel struct {
	Title   string `json:"title"`
	Type    string `json:"type"`
	Targets []struct {
		Expr string `json:"expr"`
	} `json:"targets"`
}

// TestDashboard: the chart's dashboard parses, every panel queries, and
// every metric its queries and variables name is one this binary serves:
// Muster's, or kube-scheduler's (scheduler_).
func TestDashboard(t *testing.T) {
	data, err := os.ReadFile(dashboardFile)
	if err != nil {
		t.Fatal(err)
	}
	var d dashboard
	if err := json.Unmarshal(data, &d); err != nil {
		t.Fatalf("%s does not parse: %v", dashboardFile, err)
	}
	if d.Title == "" || d.UID == "" || len(d.Panels) == 0 {
		t.Fatalf("%s has no title, uid or panels", dashboardFile)
	}
	served := servedMetrics(t)
	check := func(where, expr string) {
		names := metricNames(expr)
		if len(names) == 0 {
			t.Errorf("%s: %q names no metric", where, expr)
		}
		for _, n := range names {
			if !served[n] {
				t.Errorf("%s: %q names %s, which is not served", where, expr, n)
			}
		}
	}
	for _, p := range d.Panels {
		if p.Type == "row" {
			continue
		}
		if len(p.Targets) == 0 {
			t.Errorf("panel %q has no query", p.Title)
		}
		for _, target := range p.Targets {
			check("panel "+p.Title, target.Expr)
		}
	}
	for _, v := range d.Templating.List {
		q, ok := v.Query.(map[string]any)
		if !ok {
			continue // a data source variable
		}
		expr, _ := q["query"].(string)
		m := labelValues.FindStringSubmatch(expr)
		if m == nil {
			t.Errorf("variable %s: %q is not label_values(metric, label)", v.Name, expr)
			continue
		}
		check("variable "+v.Name, m[1])
	}
}

var labelValues = regexp.MustCompile(`^label_values\(([^,]+),\s*\w+\)$`)

// servedMetrics are the names of the series Muster's and kube-scheduler's
// metrics serve (a histogram's as _bucket, _sum and _count). Vectors
// serve no series until observed, so those are named by their
// registerables: all of Muster's, and kube-scheduler's plugin timing.
func servedMetrics(t *testing.T) map[string]bool {
	t.Helper()
	Register()
	schedulermetrics.Register()
	served := map[string]bool{}
	for _, r := range append(registerables(), schedulermetrics.PluginExecutionDuration) {
		served[r.FQName()] = true
		switch r.(type) {
		case *metrics.Histogram, *metrics.HistogramVec:
			for _, s := range []string{"_bucket", "_sum", "_count"} {
				served[r.FQName()+s] = true
			}
		}
	}
	// The gauges, from a source with a queue that has every figure.
	figures := map[string]float64{"cpu": 1}
	src := &fakeSource{
		queues: []QueueFigures{{Name: "q", Allocated: figures, Deserved: figures, Capability: figures, Guarantee: figures, Inqueue: figures}},
	}
	SetSource(src)
	defer ClearSource(src)
	families, err := legacyregistry.DefaultGatherer.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range families {
		served[f.GetName()] = true
	}
	return served
}

// metricName matches a metric name where PromQL may name one: before a
// selector, a range or the end of an argument.
var metricName = regexp.MustCompile(`\b([a-zA-Z_:][a-zA-Z0-9_:]*)\s*(\{|\[|\)|,|$)`)

// metricNames are the metrics an expression names: identifiers before a
// selector or range, or alone as an argument, that are not labels or
// Grafana variables.
func metricNames(expr string) []string {
	var out []string
	for _, m := range metricName.FindAllStringSubmatchIndex(expr, -1) {
		name := expr[m[2]:m[3]]
		if m[2] > 0 && expr[m[2]-1] == '$' || labelName(expr, m[2]) {
			continue
		}
		out = append(out, name)
	}
	sort.Strings(out)
	return out
}

// labelName reports whether the identifier at i is inside a selector's
// braces or the list of labels of by, without, on, ignoring or group_*: a
// label, not a metric.
func labelName(expr string, i int) bool {
	before := expr[:i]
	if strings.LastIndex(before, "{") > strings.LastIndex(before, "}") {
		return true
	}
	open := strings.LastIndex(before, "(")
	if open < 0 || strings.LastIndex(before, ")") > open {
		return false
	}
	return labelClause.MatchString(before[:open])
}

// labelClause ends where a list of labels opens.
var labelClause = regexp.MustCompile(`(^|\W)(by|without|on|ignoring|group_left|group_right)\s*$`)

func TestMetricNames(t *testing.T) {
	tests := []struct {
		expr string
		want []string
	}{
		{`muster_queue_share{queue=~"$queue"}`, []string{"muster_queue_share"}},
		{`sum(muster_reclaim_gangs_broken_total)`, []string{"muster_reclaim_gangs_broken_total"}},
		{`histogram_quantile(0.9, sum by (le, queue) (rate(muster_gang_scheduling_duration_seconds_bucket{queue=~"$queue"}[$__rate_interval])))`,
			[]string{"muster_gang_scheduling_duration_seconds_bucket"}},
		{`max by (queue) (a_metric) / on (queue) b_metric`, []string{"a_metric", "b_metric"}},
		{`muster_typo_total[5m]`, []string{"muster_typo_total"}},
	}
	for _, tc := range tests {
		if diff := cmp.Diff(tc.want, metricNames(tc.expr)); diff != "" {
			t.Errorf("metricNames(%q) (-want +got):\n%s", tc.expr, diff)
		}
	}
}

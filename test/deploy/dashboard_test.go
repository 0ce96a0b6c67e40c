package deploy

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestChartDashboard: metrics.dashboard.enabled renders the dashboard
// file, unchanged, into a ConfigMap Grafana's sidecar picks up (its
// label), in the namespace asked for; off, nothing.
func TestChartDashboard(t *testing.T) {
	want, err := os.ReadFile(filepath.Join(chartDir, "dashboards", "muster.json"))
	if err != nil {
		t.Fatal(err)
	}
	off := renderChart(t, "muster", "muster-system")
	for _, cm := range off.ofKind("ConfigMap") {
		if strings.HasSuffix(cm.GetName(), "-dashboard") {
			t.Errorf("the dashboard ConfigMap %s renders with metrics.dashboard.enabled false", cm.GetName())
		}
	}
	r := renderChart(t, "muster", "muster-system", "--set", "metrics.dashboard.enabled=true,metrics.dashboard.namespace=monitoring")
	cm := r.object(t, "ConfigMap", "muster-dashboard")
	if got := cm.GetLabels()["grafana_dashboard"]; got != "1" {
		t.Errorf("label grafana_dashboard = %q, want \"1\"", got)
	}
	if cm.GetNamespace() != "monitoring" {
		t.Errorf("namespace %q, want monitoring", cm.GetNamespace())
	}
	data, _ := cm.Object["data"].(map[string]any)
	if got, _ := data["muster.json"].(string); got != strings.TrimRight(string(want), "\n") {
		t.Errorf("the ConfigMap's muster.json differs from dashboards/muster.json (%d bytes, want %d)", len(got), len(want))
	}
}

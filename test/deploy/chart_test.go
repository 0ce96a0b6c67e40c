package deploy

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	rbacv1 "k8s.io/api/rbac/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apiextensionsclient "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/klog/v2/ktesting"
	"sigs.k8s.io/yaml"

	"github.com/muster-sched/muster/apis/scheduling/v1alpha1"
)

// valueSets are the chart's configurations under test, by name.
var valueSets = []struct {
	name  string
	flags []string
}{
	{"defaults", nil},
	{"replace-default", []string{"--set", "mode=replace-default"}},
	{"ci-second-scheduler", []string{"-f", filepath.Join(chartDir, "ci", "second-scheduler-values.yaml")}},
	{"ci-replace-default", []string{"-f", filepath.Join(chartDir, "ci", "replace-default-values.yaml")}},
	{"single-replica-no-election", []string{"--set", "replicas=1,leaderElection.enabled=false"}},
	{"volcano-profile", []string{"--set", "volcanoProfile=true"}},
	{"dashboard", []string{"--set", "metrics.dashboard.enabled=true"}},
	{"everything-on", []string{
		"--set", "plugins.binpack.enabled=true,metrics.serviceMonitor.enabled=true,metrics.dashboard.enabled=true,schedulerPlugins.installPodGroupCRD=true",
		"--set", "additionalProfiles[0].schedulerName=team-a",
		"--set", "image.digest=sha256:" + strings.Repeat("ab", 32),
	}},
}

func TestChartLint(t *testing.T) {
	for _, vs := range valueSets {
		t.Run(vs.name, func(t *testing.T) {
			args := append([]string{"lint", "--strict", chartDir, "--kube-version", kubeVersion}, vs.flags...)
			if out, err := runHelm(args...); err != nil {
				t.Fatalf("%v\n%s", err, out)
			}
		})
	}
}

// TestChartRejectsBadValues: a typo or a wrong value fails rendering (hence
// `helm install`) with a message naming it.
func TestChartRejectsBadValues(t *testing.T) {
	for _, tt := range []struct {
		name    string
		set     string
		wantErr string
	}{
		{"typo at the top", "replica=3", "additional properties 'replica' not allowed"},
		{"typo inside", "leaderElection.leaseDuraton=20s", "additional properties 'leaseDuraton' not allowed"},
		{"unknown mode", "mode=replace", "at '/mode': value must be one of 'second-scheduler', 'replace-default'"},
		{"duration without unit", "leaderElection.leaseDuration=15", "at '/leaderElection/leaseDuration'"},
		{"duration not a duration", "leaderElection.retryPeriod=soon", "at '/leaderElection/retryPeriod'"},
		{"queue policy in lower case", "plugins.queue.policy=proportion", "at '/plugins/queue/policy': value must be one of"},
		{"replicas not a number", "replicas=two", "at '/replicas': got string, want integer"},
		{"no replicas", "replicas=0", "at '/replicas'"},
		{"binpack weight out of range", "plugins.binpack.resources[0].name=cpu,plugins.binpack.resources[0].weight=500", "at '/plugins/binpack/resources/0/weight': maximum"},
		{"overcommit below 1", "plugins.queue.overcommitFactor=0.5", "at '/plugins/queue/overcommitFactor'"},
		{"drfPreemption not a boolean", "plugins.queue.drfPreemption=yes", "at '/plugins/queue/drfPreemption': got string, want boolean"},
		{"audit interval negative", "plugins.queue.auditIntervalSeconds=-1", "at '/plugins/queue/auditIntervalSeconds'"},
		{"topology level twice", "plugins.gang.topologyLevels={a,a}", "at '/plugins/gang/topologyLevels': items at 0 and 1 are equal"},
		{"extra arg not a flag", "extraArgs[0]=v=4", "at '/extraArgs/0'"},
		{"bad digest", "image.digest=latest", "at '/image/digest'"},
		{"scheduler name in replace-default", "mode=replace-default,schedulerName=batch", `schedulerName "batch": in mode replace-default the profile is always default-scheduler`},
		{"default-scheduler as a second scheduler", "schedulerName=default-scheduler", "schedulerName default-scheduler is mode replace-default"},
		{"queues without gangs", "plugins.gang.enabled=false", "plugins.queue.policy Proportion needs plugins.gang.enabled"},
		{"replicas without leader election", "leaderElection.enabled=false", "replicas 2 with leaderElection.enabled false"},
		{"no Muster plugin", "plugins.gang.enabled=false,plugins.queue.policy=None", "no Muster plugin is enabled"},
		{"additional profile named like the chart's", "additionalProfiles[0].schedulerName=muster-scheduler", `additionalProfiles: schedulerName "muster-scheduler" is the chart's own profile`},
		{"service monitor without service", "metrics.serviceMonitor.enabled=true,metrics.service.enabled=false", "metrics.serviceMonitor.enabled needs metrics.service.enabled"},
		{"volcanoProfile not a boolean", "volcanoProfile=yes", "at '/volcanoProfile': got string, want boolean"},
		{"volcano profile named twice", "volcanoProfile=true,schedulerName=volcano", "schedulerName volcano with volcanoProfile true"},
		{"additional profile named volcano", "volcanoProfile=true,additionalProfiles[0].schedulerName=volcano", `additionalProfiles: schedulerName "volcano" is the chart's volcano profile`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, err := runHelm("template", "bad", chartDir, "--kube-version", kubeVersion, "--set", tt.set)
			if err == nil {
				t.Fatalf("--set %s rendered; want an error containing %q", tt.set, tt.wantErr)
			}
			if !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("--set %s: error does not contain %q:\n%v", tt.set, tt.wantErr, err)
			}
		})
	}
}

// TestChartAppliesToAPIServer renders each value set and applies every
// object to the apiserver with a server-side dry run: schema validation,
// defaulting and admission of the real kube-apiserver, nothing stored.
func TestChartAppliesToAPIServer(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	installServiceMonitorCRD(t, ctx)
	a := newApplier(t)
	for _, vs := range valueSets {
		t.Run(vs.name, func(t *testing.T) {
			ns := "dry-" + vs.name
			createNamespace(t, ctx, ns)
			r := renderChart(t, "dry", ns, vs.flags...)
			if err := a.apply(ctx, r.objects, true); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// installServiceMonitorCRD installs a stand-in for prometheus-operator's
// ServiceMonitor CRD (its kind and group, no schema), so that the chart's
// optional ServiceMonitor can be applied.
func installServiceMonitorCRD(t *testing.T, ctx context.Context) {
	t.Helper()
	client, err := apiextensionsclient.NewForConfig(cluster.Config)
	if err != nil {
		t.Fatal(err)
	}
	preserve := true
	crd := &apiextensionsv1.CustomResourceDefinition{
		ObjectMeta: metav1.ObjectMeta{Name: "servicemonitors.monitoring.coreos.com"},
		Spec: apiextensionsv1.CustomResourceDefinitionSpec{
			Group: "monitoring.coreos.com",
			Names: apiextensionsv1.CustomResourceDefinitionNames{Plural: "servicemonitors", Singular: "servicemonitor", Kind: "ServiceMonitor", ListKind: "ServiceMonitorList"},
			Scope: apiextensionsv1.NamespaceScoped,
			Versions: []apiextensionsv1.CustomResourceDefinitionVersion{{
				Name: "v1", Served: true, Storage: true,
				Schema: &apiextensionsv1.CustomResourceValidation{OpenAPIV3Schema: &apiextensionsv1.JSONSchemaProps{
					Type: "object", XPreserveUnknownFields: &preserve,
				}},
			}},
		},
	}
	if _, err := client.ApiextensionsV1().CustomResourceDefinitions().Create(ctx, crd, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	u, err := toUnstructured(crd)
	if err != nil {
		t.Fatal(err)
	}
	if err := waitCRDsServed(ctx, []*unstructured.Unstructured{u}); err != nil {
		t.Fatal(err)
	}
}

// TestChartRBAC checks the rendered roles against the chart's promises: no
// wildcards, no writes to CRDs, Leases renewed only by name, and the rules
// kubeadm's extra ClusterRole grants are a subset of the chart's.
func TestChartRBAC(t *testing.T) {
	for _, tt := range []struct {
		name  string
		flags []string
		// wantLeases: namespace → the Leases the scheduler may get and renew.
		wantLeases map[string][]string
	}{
		{"second-scheduler", nil, map[string][]string{"muster-system": {"muster-scheduler"}}},
		{"second-scheduler named", []string{"--set", "schedulerName=batch"}, map[string][]string{"muster-system": {"batch"}}},
		{"replace-default", []string{"--set", "mode=replace-default"}, map[string][]string{"kube-system": {"kube-scheduler"}}},
		{"lease elsewhere", []string{"--set", "leaderElection.resourceNamespace=ops,leaderElection.resourceName=muster"}, map[string][]string{"ops": {"muster"}}},
		{"no leader election", []string{"--set", "replicas=1,leaderElection.enabled=false"}, map[string][]string{}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			r := renderChart(t, "muster", "muster-system", tt.flags...)
			var roles []*unstructured.Unstructured
			roles = append(roles, r.ofKind("ClusterRole")...)
			roles = append(roles, r.ofKind("Role")...)
			gotLeases := map[string][]string{}
			for _, o := range roles {
				rules := policyRules(t, o)
				for _, rule := range rules {
					checkRule(t, o, rule)
					if slices.Contains(rule.Resources, "leases") {
						if o.GetKind() == "ClusterRole" {
							t.Errorf("ClusterRole %s grants leases cluster-wide: %+v", o.GetName(), rule)
						}
						if !slices.Equal(rule.Verbs, []string{"create"}) {
							gotLeases[o.GetNamespace()] = append(gotLeases[o.GetNamespace()], rule.ResourceNames...)
						}
					}
				}
			}
			for ns := range gotLeases {
				slices.Sort(gotLeases[ns])
			}
			if diff := cmp.Diff(tt.wantLeases, gotLeases); diff != "" {
				t.Errorf("Leases the scheduler may renew, by namespace (-want,+got):\n%s", diff)
			}
			// Every binding points at the chart's ServiceAccount only.
			for _, kind := range []string{"ClusterRoleBinding", "RoleBinding"} {
				for _, o := range r.ofKind(kind) {
					var b rbacv1.RoleBinding
					if err := fromUnstructured(o.Object, &b); err != nil {
						t.Fatal(err)
					}
					want := []rbacv1.Subject{{Kind: "ServiceAccount", Name: r.fullname(), Namespace: "muster-system"}}
					if diff := cmp.Diff(want, b.Subjects); diff != "" {
						t.Errorf("%s %s subjects (-want,+got):\n%s", kind, o.GetName(), diff)
					}
				}
			}
		})
	}

	t.Run("kubeadm extras within the chart's ClusterRole", func(t *testing.T) {
		chart := policyRules(t, renderChart(t, "muster", "muster-system").object(t, "ClusterRole", "muster"))
		data, err := os.ReadFile(filepath.Join(repoRoot, "manifests", "kubeadm", "rbac.yaml"))
		if err != nil {
			t.Fatal(err)
		}
		objs, err := decodeObjects(data)
		if err != nil {
			t.Fatal(err)
		}
		for _, o := range objs {
			if o.GetKind() != "ClusterRole" && o.GetKind() != "Role" {
				continue
			}
			for _, rule := range policyRules(t, o) {
				checkRule(t, o, rule)
				if slices.Contains(rule.Resources, "leases") {
					continue // kubeadm's lease lives in kube-system, granted by name
				}
				if !covered(rule, chart) {
					t.Errorf("kubeadm's %s %s grants %+v, which the chart's ClusterRole does not", o.GetKind(), o.GetName(), rule)
				}
			}
		}
	})
}

func policyRules(t *testing.T, o *unstructured.Unstructured) []rbacv1.PolicyRule {
	t.Helper()
	var role rbacv1.ClusterRole
	if err := fromUnstructured(o.Object, &role); err != nil {
		t.Fatal(err)
	}
	return role.Rules
}

// checkRule fails the test for a wildcard, a write to CRDs or a Lease
// renewed by anything but name.
func checkRule(t *testing.T, o *unstructured.Unstructured, rule rbacv1.PolicyRule) {
	t.Helper()
	for _, list := range [][]string{rule.Verbs, rule.APIGroups, rule.Resources, rule.ResourceNames, rule.NonResourceURLs} {
		for _, s := range list {
			if strings.Contains(s, "*") {
				t.Errorf("%s %s has a wildcard: %+v", o.GetKind(), o.GetName(), rule)
			}
		}
	}
	if slices.Contains(rule.APIGroups, "apiextensions.k8s.io") {
		t.Errorf("%s %s grants access to CRDs: %+v", o.GetKind(), o.GetName(), rule)
	}
	if slices.Contains(rule.Resources, "leases") && len(rule.ResourceNames) == 0 && !slices.Equal(rule.Verbs, []string{"create"}) {
		t.Errorf("%s %s may %v any Lease; only create cannot be limited by name", o.GetKind(), o.GetName(), rule.Verbs)
	}
}

// covered reports whether rules grant everything rule does.
func covered(rule rbacv1.PolicyRule, rules []rbacv1.PolicyRule) bool {
	for _, g := range rule.APIGroups {
		for _, res := range rule.Resources {
			for _, v := range rule.Verbs {
				ok := slices.ContainsFunc(rules, func(r rbacv1.PolicyRule) bool {
					return slices.Contains(r.APIGroups, g) && slices.Contains(r.Resources, res) && slices.Contains(r.Verbs, v) && len(r.ResourceNames) == 0
				})
				if !ok {
					return false
				}
			}
		}
	}
	return true
}

// TestChartConfigMatchesShippedConfigs: with the matching values, the
// chart's scheduler profile is the one in config/ (and the kubeadm
// static-pod configuration's): one definition of each mode.
func TestChartConfigMatchesShippedConfigs(t *testing.T) {
	// --set replaces a list whole.
	binpackGPU := "plugins.binpack.resources[0].name=cpu,plugins.binpack.resources[0].weight=1," +
		"plugins.binpack.resources[1].name=memory,plugins.binpack.resources[1].weight=1," +
		"plugins.binpack.resources[2].name=nvidia.com/gpu,plugins.binpack.resources[2].weight=5"
	for _, tt := range []struct {
		file  string
		flags []string
	}{
		{"config/second-scheduler.yaml", nil},
		{"config/replace-default.yaml", []string{"--set", "mode=replace-default"}},
		{"config/capacity.yaml", []string{"--set", "mode=replace-default,plugins.queue.policy=Capacity"}},
		{"config/binpack.yaml", []string{"--set", "mode=replace-default,plugins.binpack.enabled=true", "--set", binpackGPU}},
		{"config/topology.yaml", []string{"--set", "mode=replace-default,plugins.binpack.enabled=true", "--set", binpackGPU,
			"--set", "plugins.binpack.domainLevels={topology.muster.dev/rack,topology.muster.dev/block}"}},
		{"config/volcano.yaml", []string{"--set", "mode=replace-default,volcanoProfile=true"}},
		{"manifests/kubeadm/muster-scheduler-config.yaml", []string{"--set", "mode=replace-default"}},
	} {
		t.Run(tt.file, func(t *testing.T) {
			data, err := os.ReadFile(filepath.Join(repoRoot, tt.file))
			if err != nil {
				t.Fatal(err)
			}
			want := profilesOf(t, data)
			got := profilesOf(t, renderChart(t, "muster", "muster-system", tt.flags...).schedulerConfig(t))
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("profiles differ (-%s,+chart):\n%s", tt.file, diff)
			}
		})
	}
}

// TestChartVolcanoProfile: volcanoProfile adds the profile volcano, in
// either mode, with the plugins and args of the chart's own profile (as
// rendered from the values); off, the chart's profile is the only one.
func TestChartVolcanoProfile(t *testing.T) {
	for _, tt := range []struct {
		name      string
		flags     []string
		wantNames []string
	}{
		{"second-scheduler off", nil, []string{"muster-scheduler"}},
		{"second-scheduler on", []string{"--set", "volcanoProfile=true"}, []string{"muster-scheduler", "volcano"}},
		{"replace-default off", []string{"--set", "mode=replace-default"}, []string{"default-scheduler"}},
		{"replace-default on", []string{"--set", "mode=replace-default,volcanoProfile=true"}, []string{"default-scheduler", "volcano"}},
		{"on with binpack and Capacity", []string{"--set", "volcanoProfile=true,plugins.binpack.enabled=true,plugins.queue.policy=Capacity,plugins.gang.defaultScheduleTimeoutSeconds=30"},
			[]string{"muster-scheduler", "volcano"}},
		{"on beside an additional profile", []string{"--set", "volcanoProfile=true,additionalProfiles[0].schedulerName=team-a"},
			[]string{"muster-scheduler", "volcano", "team-a"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			var cfg struct {
				Profiles []map[string]any `json:"profiles"`
			}
			if err := yaml.Unmarshal(renderChart(t, "muster", "muster-system", tt.flags...).schedulerConfig(t), &cfg); err != nil {
				t.Fatal(err)
			}
			var names []string
			for _, p := range cfg.Profiles {
				name, _ := p["schedulerName"].(string)
				names = append(names, name)
			}
			if diff := cmp.Diff(tt.wantNames, names); diff != "" {
				t.Fatalf("profiles (-want,+got):\n%s", diff)
			}
			if len(names) < 2 || names[1] != "volcano" {
				return
			}
			own, volcano := cfg.Profiles[0], cfg.Profiles[1]
			for _, field := range []string{"plugins", "pluginConfig"} {
				if diff := cmp.Diff(own[field], volcano[field]); diff != "" {
					t.Errorf("the volcano profile's %s differ from %s's (-%s,+volcano):\n%s", field, names[0], names[0], diff)
				}
			}
		})
	}
}

// profilesOf returns each profile's name, plugins and the args of the plugins
// whose args the file sets (the chart also spells out the defaults).
func profilesOf(t *testing.T, config []byte) []map[string]any {
	t.Helper()
	var cfg struct {
		Profiles []map[string]any `json:"profiles"`
	}
	if err := yaml.Unmarshal(config, &cfg); err != nil {
		t.Fatal(err)
	}
	var out []map[string]any
	for _, p := range cfg.Profiles {
		q := map[string]any{"schedulerName": p["schedulerName"], "plugins": p["plugins"]}
		for _, pc := range asSlice(p["pluginConfig"]) {
			if m, ok := pc.(map[string]any); ok && m["name"] == "Binpack" {
				q["binpackArgs"] = m["args"]
			}
		}
		out = append(out, q)
	}
	return out
}

func asSlice(v any) []any {
	s, _ := v.([]any)
	return s
}

// TestChartInstallUpgradeUninstall follows a release's life with helm
// against the apiserver: an install with a typo fails and creates nothing;
// an upgrade that changes the configuration changes the pod template (so the
// replicas roll) and one that does not, does not; an uninstall removes every
// object of the release but keeps the CRDs and the objects they hold.
func TestChartInstallUpgradeUninstall(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	kubeconfig := helmKubeconfig(t)
	const ns, name = "muster-lifecycle", "life"
	helmIn := func(args ...string) (string, error) {
		return runHelm(append(args, "--namespace", ns, "--kubeconfig", kubeconfig)...)
	}

	_, err := helmIn("install", "typo", chartDir, "--create-namespace", "--set", "replica=3")
	if err == nil || !strings.Contains(err.Error(), "additional properties 'replica' not allowed") {
		t.Errorf("helm install with a typo: %v, want the schema's refusal", err)
	}
	if _, err := cluster.Client.RbacV1().ClusterRoles().Get(ctx, "typo-muster", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("the refused install left its ClusterRole behind: %v", err)
	}

	if _, err := helmIn("install", name, chartDir, "--create-namespace"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _, _ = helmIn("uninstall", name) }) // if the test stops early
	checksum := func() string {
		t.Helper()
		d, err := cluster.Client.AppsV1().Deployments(ns).Get(ctx, name+"-muster", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return d.Spec.Template.Annotations["checksum/config"]
	}
	installed := checksum()
	if _, err := helmIn("upgrade", name, chartDir, "--reuse-values", "--set", "plugins.binpack.enabled=true"); err != nil {
		t.Fatal(err)
	}
	cm, err := cluster.Client.CoreV1().ConfigMaps(ns).Get(ctx, name+"-muster", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(cm.Data["config.yaml"], "name: Binpack") {
		t.Errorf("after the upgrade the configuration has no Binpack:\n%s", cm.Data["config.yaml"])
	}
	upgraded := checksum()
	if upgraded == installed {
		t.Errorf("a changed configuration left the pod template as it was: the replicas would not restart")
	}
	if _, err := helmIn("upgrade", name, chartDir, "--reuse-values", "--set", "replicas=3"); err != nil {
		t.Fatal(err)
	}
	if checksum() != upgraded {
		t.Errorf("scaling changed the configuration's checksum")
	}

	pg := &v1alpha1.PodGroup{ObjectMeta: metav1.ObjectMeta{Name: "survivor", Namespace: ns}, Spec: v1alpha1.PodGroupSpec{MinMember: 1}}
	if _, err := cluster.Muster.SchedulingV1alpha1().PodGroups(ns).Create(ctx, pg, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cluster.Muster.SchedulingV1alpha1().PodGroups(ns).Delete(context.Background(), pg.Name, metav1.DeleteOptions{})
	})
	if _, err := helmIn("uninstall", name); err != nil {
		t.Fatal(err)
	}
	gone := []struct {
		kind string
		get  func() error
	}{
		{"ClusterRole", func() error {
			_, err := cluster.Client.RbacV1().ClusterRoles().Get(ctx, name+"-muster", metav1.GetOptions{})
			return err
		}},
		{"ClusterRoleBinding", func() error {
			_, err := cluster.Client.RbacV1().ClusterRoleBindings().Get(ctx, name+"-muster", metav1.GetOptions{})
			return err
		}},
		{"RoleBinding in kube-system", func() error {
			_, err := cluster.Client.RbacV1().RoleBindings("kube-system").Get(ctx, name+"-muster-authentication-reader", metav1.GetOptions{})
			return err
		}},
		{"Deployment", func() error {
			_, err := cluster.Client.AppsV1().Deployments(ns).Get(ctx, name+"-muster", metav1.GetOptions{})
			return err
		}},
	}
	for _, g := range gone {
		err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 10*time.Second, true, func(context.Context) (bool, error) {
			return apierrors.IsNotFound(g.get()), nil
		})
		if err != nil {
			t.Errorf("the %s outlived helm uninstall", g.kind)
		}
	}
	if _, err := cluster.Muster.SchedulingV1alpha1().PodGroups(ns).Get(ctx, "survivor", metav1.GetOptions{}); err != nil {
		t.Errorf("a PodGroup did not survive helm uninstall: %v", err)
	}
}

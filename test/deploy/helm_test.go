package deploy

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apiextensionsclient "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/restmapper"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

var chartDir = filepath.Join(repoRoot, "manifests", "charts", "muster")

// kubeVersion is what helm renders and lints for: the Kubernetes release
// this module builds on, the in-process apiserver's, whatever helm's
// default. TestMain sets it.
var kubeVersion string

// kubernetesRelease is the version of k8s.io/kubernetes the module
// requires, without the "v".
func kubernetesRelease() (string, error) {
	cmd := exec.Command("go", "list", "-m", "-f", "{{.Version}}", "k8s.io/kubernetes")
	cmd.Dir = repoRoot
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("go list -m k8s.io/kubernetes: %w", err)
	}
	return strings.TrimPrefix(strings.TrimSpace(string(out)), "v"), nil
}

// runHelm runs helm and returns its standard output; a failure carries its
// standard error.
func runHelm(args ...string) (string, error) {
	cmd := exec.Command(helmBin, args...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return stdout.String(), fmt.Errorf("helm %s: %w\n%s", strings.Join(args, " "), err, stderr.String())
	}
	return stdout.String(), nil
}

// release is the chart rendered as one Helm release.
type release struct {
	name, namespace string
	objects         []*unstructured.Unstructured
}

// renderChart runs `helm template` for a release, CRDs included, with extra
// flags (--set, -f), and decodes every object.
func renderChart(t *testing.T, name, namespace string, flags ...string) *release {
	t.Helper()
	args := append([]string{"template", name, chartDir, "--namespace", namespace,
		"--kube-version", kubeVersion, "--include-crds"}, flags...)
	out, err := runHelm(args...)
	if err != nil {
		t.Fatal(err)
	}
	objs, err := decodeObjects([]byte(out))
	if err != nil {
		t.Fatalf("decoding the rendered chart: %v", err)
	}
	return &release{name: name, namespace: namespace, objects: objs}
}

// helmKubeconfig is a kubeconfig for helm: the control plane's superuser,
// through versionProxy.
func helmKubeconfig(t *testing.T) string {
	t.Helper()
	proxy := versionProxy(t)
	return writeKubeconfig(t, "helm.kubeconfig", func(c *clientcmdapi.Config) {
		for _, cl := range c.Clusters {
			*cl = clientcmdapi.Cluster{Server: proxy}
		}
		for name := range c.AuthInfos {
			c.AuthInfos[name] = &clientcmdapi.AuthInfo{}
		}
	})
}

// versionProxy serves the apiserver's API on a local address, as the
// superuser, except that /version reports kubeVersion where the in-process
// apiserver, built without version stamping, reports v0.0.0-master: helm
// checks the chart's kubeVersion against that string.
func versionProxy(t *testing.T) string {
	t.Helper()
	target, err := url.Parse(cluster.Config.Host)
	if err != nil {
		t.Fatal(err)
	}
	transport, err := rest.TransportFor(cluster.Config)
	if err != nil {
		t.Fatal(err)
	}
	proxy := httputil.NewSingleHostReverseProxy(target)
	proxy.Transport = transport
	mux := http.NewServeMux()
	mux.Handle("/", proxy)
	mux.HandleFunc("/version", func(w http.ResponseWriter, r *http.Request) {
		info, err := cluster.Client.Discovery().ServerVersion()
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadGateway)
			return
		}
		info.GitVersion = "v" + kubeVersion
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(info)
	})
	server := httptest.NewServer(mux)
	t.Cleanup(server.Close)
	return server.URL
}

// installChart installs the chart with `helm install --create-namespace`
// (CRDs, schema check, OpenAPI validation by the apiserver) and returns the
// release's objects, from `helm get manifest`. The test's cleanup
// uninstalls it.
func installChart(t *testing.T, ctx context.Context, name, namespace string, flags ...string) *release {
	t.Helper()
	kubeconfig := helmKubeconfig(t)
	args := append([]string{"install", name, chartDir, "--namespace", namespace, "--create-namespace", "--kubeconfig", kubeconfig}, flags...)
	if _, err := runHelm(args...); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if _, err := runHelm("uninstall", name, "--namespace", namespace, "--kubeconfig", kubeconfig); err != nil {
			t.Error(err)
		}
		deleteLeases(namespace)
	})
	out, err := runHelm("get", "manifest", name, "--namespace", namespace, "--kubeconfig", kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	objs, err := decodeObjects([]byte(out))
	if err != nil {
		t.Fatalf("decoding the release's manifest: %v", err)
	}
	r := &release{name: name, namespace: namespace, objects: objs}
	// CRDs among the templates (scheduler-plugins' PodGroup) must be served
	// before a scheduler starts: it looks for them once.
	if crds := r.ofKind("CustomResourceDefinition"); len(crds) > 0 {
		if err := waitCRDsServed(ctx, crds); err != nil {
			t.Fatal(err)
		}
	}
	return r
}

// decodeObjects decodes a stream of YAML documents, skipping empty ones.
func decodeObjects(data []byte) ([]*unstructured.Unstructured, error) {
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(data), 4096)
	var objs []*unstructured.Unstructured
	for {
		var m map[string]any
		if err := dec.Decode(&m); err != nil {
			if errors.Is(err, io.EOF) {
				return objs, nil
			}
			return nil, err
		}
		if len(m) == 0 {
			continue
		}
		objs = append(objs, &unstructured.Unstructured{Object: m})
	}
}

// object returns the release's object of a kind and name, failing the test
// if there is none.
func (r *release) object(t *testing.T, kind, name string) *unstructured.Unstructured {
	t.Helper()
	for _, o := range r.objects {
		if o.GetKind() == kind && o.GetName() == name {
			return o
		}
	}
	t.Fatalf("release %s renders no %s %q", r.name, kind, name)
	return nil
}

func (r *release) ofKind(kind string) []*unstructured.Unstructured {
	var out []*unstructured.Unstructured
	for _, o := range r.objects {
		if o.GetKind() == kind {
			out = append(out, o)
		}
	}
	return out
}

// fullname is the name the chart gives the release's objects.
func (r *release) fullname() string {
	if strings.Contains(r.name, "muster") {
		return r.name
	}
	return r.name + "-muster"
}

// schedulerConfig is the KubeSchedulerConfiguration in the release's
// ConfigMap.
func (r *release) schedulerConfig(t *testing.T) []byte {
	t.Helper()
	cm := r.object(t, "ConfigMap", r.fullname())
	data, _, _ := unstructured.NestedString(cm.Object, "data", "config.yaml")
	if data == "" {
		t.Fatalf("ConfigMap %s has no config.yaml", cm.GetName())
	}
	return []byte(data)
}

// container is the scheduler container of the release's Deployment.
func (r *release) container(t *testing.T) v1.Container {
	t.Helper()
	d := r.object(t, "Deployment", r.fullname())
	containers, _, _ := unstructured.NestedSlice(d.Object, "spec", "template", "spec", "containers")
	if len(containers) != 1 {
		t.Fatalf("Deployment %s has %d containers, want 1", d.GetName(), len(containers))
	}
	var c v1.Container
	if err := fromUnstructured(containers[0].(map[string]any), &c); err != nil {
		t.Fatal(err)
	}
	return c
}

func toUnstructured(obj any) (*unstructured.Unstructured, error) {
	m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(obj)
	if err != nil {
		return nil, err
	}
	return &unstructured.Unstructured{Object: m}, nil
}

// applier applies objects to the control plane with server-side apply, as
// `kubectl apply --server-side` does, mapping kinds through discovery.
type applier struct {
	dyn    dynamic.Interface
	mapper *restmapper.DeferredDiscoveryRESTMapper
}

func newApplier(t *testing.T) *applier {
	t.Helper()
	dc, err := discovery.NewDiscoveryClientForConfig(cluster.Config)
	if err != nil {
		t.Fatal(err)
	}
	dyn, err := dynamic.NewForConfig(cluster.JSONConfig())
	if err != nil {
		t.Fatal(err)
	}
	return &applier{dyn: dyn, mapper: restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(dc))}
}

// apply applies every object, CustomResourceDefinitions first (waiting until
// they are served); with dryRun the apiserver validates, defaults and admits
// each object but stores nothing.
func (a *applier) apply(ctx context.Context, objs []*unstructured.Unstructured, dryRun bool) error {
	var crds, rest []*unstructured.Unstructured
	for _, o := range objs {
		if o.GetKind() == "CustomResourceDefinition" {
			crds = append(crds, o)
		} else {
			rest = append(rest, o)
		}
	}
	for _, o := range crds {
		if err := a.applyOne(ctx, o, dryRun); err != nil {
			return err
		}
	}
	if len(crds) > 0 && !dryRun {
		if err := waitCRDsServed(ctx, crds); err != nil {
			return err
		}
		a.mapper.Reset()
	}
	for _, o := range rest {
		if err := a.applyOne(ctx, o, dryRun); err != nil {
			return err
		}
	}
	return nil
}

func (a *applier) applyOne(ctx context.Context, o *unstructured.Unstructured, dryRun bool) error {
	gvk := o.GroupVersionKind()
	mapping, err := a.mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
	if meta.IsNoMatchError(err) {
		a.mapper.Reset()
		mapping, err = a.mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
	}
	if err != nil {
		return fmt.Errorf("%s %s: %w", gvk.Kind, o.GetName(), err)
	}
	var client dynamic.ResourceInterface = a.dyn.Resource(mapping.Resource)
	if mapping.Scope.Name() == meta.RESTScopeNameNamespace {
		if o.GetNamespace() == "" {
			return fmt.Errorf("%s %s: namespaced, but rendered without a namespace", gvk.Kind, o.GetName())
		}
		client = a.dyn.Resource(mapping.Resource).Namespace(o.GetNamespace())
	}
	opts := metav1.ApplyOptions{FieldManager: "muster-deploy-test", Force: true}
	if dryRun {
		opts.DryRun = []string{metav1.DryRunAll}
	}
	if _, err := client.Apply(ctx, o.GetName(), o, opts); err != nil {
		return fmt.Errorf("applying %s %s/%s: %w", gvk.Kind, o.GetNamespace(), o.GetName(), err)
	}
	return nil
}

func waitCRDsServed(ctx context.Context, crds []*unstructured.Unstructured) error {
	client, err := apiextensionsclient.NewForConfig(cluster.Config)
	if err != nil {
		return err
	}
	for _, o := range crds {
		err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
			crd, err := client.ApiextensionsV1().CustomResourceDefinitions().Get(ctx, o.GetName(), metav1.GetOptions{})
			if err != nil {
				return false, nil
			}
			for _, c := range crd.Status.Conditions {
				if c.Type == apiextensionsv1.Established && c.Status == apiextensionsv1.ConditionTrue {
					return true, nil
				}
			}
			return false, nil
		})
		if err != nil {
			return fmt.Errorf("CRD %s not established: %w", o.GetName(), err)
		}
	}
	return nil
}

// createNamespace creates a namespace, as `helm install --create-namespace`
// does; an existing one is fine.
func createNamespace(t *testing.T, ctx context.Context, name string) {
	t.Helper()
	_, err := cluster.Client.CoreV1().Namespaces().Create(ctx, &v1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
}

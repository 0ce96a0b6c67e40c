package deploy

import (
	"bytes"
	"context"
	"crypto/tls"
	"debug/buildinfo"
	"encoding/json"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apiextensionsclient "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/yaml"
)

// trainingOperator is Kubeflow's training-operator as `make
// training-operator` installs it: a module of its own, built on another
// Kubernetes release, so never a dependency of this one.
type trainingOperator struct {
	bin string
	// src is its module's source in the module cache: its CRDs and
	// ClusterRole, of the version the binary was built from.
	src string
}

// trainingOperatorName names the operator's ServiceAccount, ClusterRole
// and binding, as its manifests do.
const trainingOperatorName = "training-operator"

// findTrainingOperator returns the pinned operator: $TRAINING_OPERATOR (set
// by the Makefile), else bin/training-operator. Its module and version come
// from the binary's build information, so the CRDs match the binary.
func findTrainingOperator(t *testing.T) trainingOperator {
	t.Helper()
	path := os.Getenv("TRAINING_OPERATOR")
	if path == "" {
		path = filepath.Join(repoRoot, "bin", "training-operator")
	}
	bin, err := filepath.Abs(path)
	if err != nil {
		t.Fatal(err)
	}
	info, err := buildinfo.ReadFile(bin)
	if err != nil {
		t.Fatalf("training-operator not found at %s (%v): run `make training-operator` (make test installs it) or set TRAINING_OPERATOR", bin, err)
	}
	// go mod download finds (or fetches) the module's source. It runs
	// outside this module, whose go.mod and go.sum it must not touch.
	mod := info.Main.Path + "@" + info.Main.Version
	cmd := exec.Command("go", "mod", "download", "-json", mod)
	cmd.Dir = workDir
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	var dl struct{ Dir, Error string }
	if jsonErr := json.Unmarshal(out, &dl); err != nil || jsonErr != nil || dl.Dir == "" {
		t.Fatalf("go mod download %s: %v %v %s %s", mod, err, jsonErr, dl.Error, stderr.String())
	}
	return trainingOperator{bin: bin, src: dl.Dir}
}

// crdFile is one CRD file of the operator's module.
func (op trainingOperator) crdFile(t *testing.T, name string) fs.FS {
	t.Helper()
	sub, err := fs.Sub(os.DirFS(op.src), "manifests/base/crds")
	if err != nil {
		t.Fatal(err)
	}
	return singleFile{sub, name}
}

// singleFile is the file system of one file of fsys.
type singleFile struct {
	fsys fs.FS
	name string
}

func (s singleFile) Open(name string) (fs.File, error) {
	if name != "." && name != s.name {
		return nil, &fs.PathError{Op: "open", Path: name, Err: fs.ErrNotExist}
	}
	return s.fsys.Open(name)
}

func (s singleFile) Glob(pattern string) ([]string, error) {
	if ok, err := filepath.Match(pattern, s.name); !ok || err != nil {
		return nil, err
	}
	return []string{s.name}, nil
}

// installCRDs installs the CustomResourceDefinitions in the YAML files of
// fsys and waits until they are served. Those the control plane did not
// have are deleted when the test ends, once gone: a scheduler started by
// a later case must not find them.
func installCRDs(t *testing.T, ctx context.Context, fsys fs.FS) {
	t.Helper()
	client, err := apiextensionsclient.NewForConfig(cluster.Config)
	if err != nil {
		t.Fatal(err)
	}
	files, err := fs.Glob(fsys, "*.yaml")
	if err != nil || len(files) == 0 {
		t.Fatalf("no CRD files (%v)", err)
	}
	var added []string
	for _, f := range files {
		data, err := fs.ReadFile(fsys, f)
		if err != nil {
			t.Fatal(err)
		}
		var crd apiextensionsv1.CustomResourceDefinition
		if err := yaml.Unmarshal(data, &crd); err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		_, err = client.ApiextensionsV1().CustomResourceDefinitions().Get(ctx, crd.Name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			added = append(added, crd.Name)
		} else if err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() {
		ctx := context.Background()
		crds := client.ApiextensionsV1().CustomResourceDefinitions()
		for _, name := range added {
			if err := crds.Delete(ctx, name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
				t.Errorf("deleting CRD %s: %v", name, err)
				continue
			}
			err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
				_, err := crds.Get(ctx, name, metav1.GetOptions{})
				return apierrors.IsNotFound(err), nil
			})
			if err != nil {
				t.Errorf("CRD %s still there a minute after its deletion", name)
			}
		}
	})
	if err := cluster.InstallCRDs(ctx, fsys); err != nil {
		t.Fatal(err)
	}
}

// startTrainingOperator runs the operator as its Deployment in namespace
// would, in volcano mode with PyTorchJob only: as its ServiceAccount with
// its own ClusterRole (manifests/base/rbac), metrics and probes on free
// local ports, and waits until it is ready. Volcano's PodGroup CRD and
// the operator's CRDs must be served: it checks for the PodGroup once, at
// start.
//
// v1.9.3 reconciles nothing until its cert rotator has filled the webhook
// Secret, found the certificate mounted and injected the CA into its
// ValidatingWebhookConfiguration. The test creates the Secret, as the
// operator's manifests do, and mounts it (mountWebhookCert). It creates no
// ValidatingWebhookConfiguration: the in-process apiserver could not reach
// the webhook's Service, and a missing configuration counts as injected.
// PyTorchJobs are therefore not validated, only defaulted by the
// controller, as without the webhook.
func startTrainingOperator(t *testing.T, ctx context.Context, op trainingOperator, namespace string) *schedulerProcess {
	t.Helper()
	createNamespace(t, ctx, namespace)
	grantTrainingOperator(t, ctx, op, namespace)
	secrets := cluster.Client.CoreV1().Secrets(namespace)
	secret := &v1.Secret{ObjectMeta: metav1.ObjectMeta{Name: webhookSecretName}}
	if _, err := secrets.Create(ctx, secret, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	token := serviceAccountToken(t, ctx, namespace, trainingOperatorName)
	kubeconfig := tokenKubeconfig(t, namespace+"-"+trainingOperatorName+".kubeconfig", token)
	ports := make([]int, 3)
	for i := range ports {
		var err error
		if ports[i], err = freePort(); err != nil {
			t.Fatal(err)
		}
	}
	metricsPort, probePort, webhookPort := ports[0], ports[1], ports[2]
	p := startProcess(t, trainingOperatorName, op.bin, []string{
		"--gang-scheduler-name=volcano",
		"--enable-scheme=pytorchjob",
		fmt.Sprintf("--metrics-bind-address=127.0.0.1:%d", metricsPort),
		fmt.Sprintf("--health-probe-bind-address=127.0.0.1:%d", probePort),
		fmt.Sprintf("--webhook-server-port=%d", webhookPort),
	}, []string{
		"KUBECONFIG=" + kubeconfig,
		"MY_POD_NAMESPACE=" + namespace,
		// The webhook server reads its certificate under TMPDIR; the
		// rotator looks for it under /tmp whatever TMPDIR says.
		"TMPDIR=/tmp",
	})
	if err := mountWebhookCert(ctx, namespace); err != nil {
		t.Fatalf("%v; the operator's last lines:\n%s", err, p.tail(20))
	}
	readyz := fmt.Sprintf("http://127.0.0.1:%d/readyz", probePort)
	client := &http.Client{Timeout: 5 * time.Second}
	var last string
	err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		select {
		case <-p.exited:
			return false, fmt.Errorf("%s exited: %v", p.name, p.exitErr)
		default:
		}
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, readyz, nil)
		if err != nil {
			return false, err
		}
		resp, err := client.Do(req)
		if err != nil {
			last = err.Error()
			return false, nil
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		last = fmt.Sprintf("%d %q", resp.StatusCode, body)
		return resp.StatusCode == http.StatusOK, nil
	})
	if err != nil {
		t.Fatalf("the training-operator is not ready: %v; last answer of %s: %s", err, readyz, last)
	}
	return p
}

// grantTrainingOperator creates the operator's ServiceAccount and binds
// it to the ClusterRole of the operator's manifests, for the test.
func grantTrainingOperator(t *testing.T, ctx context.Context, op trainingOperator, namespace string) {
	t.Helper()
	sa := &v1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: trainingOperatorName}}
	if _, err := cluster.Client.CoreV1().ServiceAccounts(namespace).Create(ctx, sa, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	data, err := os.ReadFile(filepath.Join(op.src, "manifests", "base", "rbac", "role.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var role rbacv1.ClusterRole
	if err := yaml.UnmarshalStrict(data, &role); err != nil || role.Name != trainingOperatorName {
		t.Fatalf("the operator's ClusterRole: %v (name %q)", err, role.Name)
	}
	rbac := cluster.Client.RbacV1()
	if _, err := rbac.ClusterRoles().Create(ctx, &role, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	binding := &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: trainingOperatorName},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: trainingOperatorName},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: namespace, Name: trainingOperatorName}},
	}
	if _, err := rbac.ClusterRoleBindings().Create(ctx, binding, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx := context.Background()
		_ = rbac.ClusterRoleBindings().Delete(ctx, trainingOperatorName, metav1.DeleteOptions{})
		_ = rbac.ClusterRoles().Delete(ctx, trainingOperatorName, metav1.DeleteOptions{})
	})
}

// webhookSecretName is the operator's default --webhook-secret-name.
const webhookSecretName = "training-operator-webhook-cert"

// webhookCertDir is where v1.9.3's cert rotator looks for the mounted
// Secret: a constant, so one directory for every process of the machine.
const webhookCertDir = "/tmp/k8s-webhook-server/serving-certs"

// mountWebhookCert plays the kubelet's part for the Secret the operator's
// Deployment mounts at webhookCertDir: it waits until the rotator has
// written the Secret and puts its certificate and key there. A pair already
// there that loads is kept, whoever wrote it (nothing calls the webhook);
// a new one is moved in as one directory, so that runs in parallel never
// mix the certificate of one with the key of another.
func mountWebhookCert(ctx context.Context, namespace string) error {
	var secret *v1.Secret
	err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		var err error
		secret, err = cluster.Client.CoreV1().Secrets(namespace).Get(ctx, webhookSecretName, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		return len(secret.Data[v1.TLSCertKey]) > 0 && len(secret.Data[v1.TLSPrivateKeyKey]) > 0, nil
	})
	if err != nil {
		return fmt.Errorf("the operator did not write its certificate into Secret %s/%s: %w", namespace, webhookSecretName, err)
	}
	if certPairLoads(webhookCertDir) {
		return nil
	}
	parent := filepath.Dir(webhookCertDir)
	if err := os.MkdirAll(parent, 0o755); err != nil {
		return err
	}
	tmp, err := os.MkdirTemp(parent, "serving-certs-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	for _, key := range []string{v1.TLSCertKey, v1.TLSPrivateKeyKey} {
		if err := os.WriteFile(filepath.Join(tmp, key), secret.Data[key], 0o600); err != nil {
			return err
		}
	}
	// rename(2) replaces an empty directory and fails on a full one.
	if err := os.Rename(tmp, webhookCertDir); err != nil {
		if certPairLoads(webhookCertDir) {
			return nil
		}
		if err := os.RemoveAll(webhookCertDir); err != nil {
			return err
		}
		return os.Rename(tmp, webhookCertDir)
	}
	return nil
}

func certPairLoads(dir string) bool {
	_, err := tls.LoadX509KeyPair(filepath.Join(dir, v1.TLSCertKey), filepath.Join(dir, v1.TLSPrivateKeyKey))
	return err == nil
}

// startProcess runs bin as a process of its own with args and env added
// to the test's environment, its log kept as a scheduler process's is; the
// test's cleanup kills it and, if the test failed, prints its last lines.
func startProcess(t *testing.T, name, bin string, args, env []string) *schedulerProcess {
	t.Helper()
	dir := filepath.Join(workDir, t.Name(), name)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	p := &schedulerProcess{t: t, name: name, changed: make(chan struct{}), exited: make(chan struct{})}
	p.cmd = exec.Command(bin, args...)
	p.cmd.Env = append(os.Environ(), env...)
	dieWithParent(p.cmd)
	logFile, err := os.Create(filepath.Join(dir, "log"))
	if err != nil {
		t.Fatal(err)
	}
	out, err := p.cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	p.cmd.Stderr = p.cmd.Stdout
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go p.read(io.TeeReader(out, logFile), logFile)
	t.Cleanup(func() {
		p.kill()
		if t.Failed() {
			t.Logf("%s: log in %s; last lines:\n%s", name, logFile.Name(), p.tail(40))
		}
	})
	return p
}

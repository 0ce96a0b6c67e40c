package deploy

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// volcanoControllers is Volcano's vc-controller-manager as `make
// volcano-controllers` builds it: from its own module, on another
// Kubernetes release, so never a dependency of this one.
type volcanoControllers struct {
	bin string
	// src is its module's source in the module cache, of the version the
	// binary reports: its CRDs and its ClusterRole.
	src string
}

// volcanoControllersName names the ServiceAccount and ClusterRole of the
// controllers, as Volcano's installer does.
const volcanoControllersName = "volcano-controllers"

// findVolcanoControllers returns the pinned vc-controller-manager:
// $VOLCANO_CONTROLLERS (set by the Makefile), else
// bin/volcano-controller-manager; the test is skipped when neither is
// there. Its version is what the binary prints with --version, which the
// Makefile stamps, so that the CRDs match the binary.
func findVolcanoControllers(t *testing.T) volcanoControllers {
	t.Helper()
	path := os.Getenv("VOLCANO_CONTROLLERS")
	if path == "" {
		path = filepath.Join(repoRoot, "bin", "volcano-controller-manager")
		if _, err := os.Stat(path); err != nil {
			t.Skip("Volcano's vc-controller-manager is not built: VOLCANO_CONTROLLERS is unset and bin/volcano-controller-manager is missing; " +
				"run `make volcano-controllers` (make test builds it) or set VOLCANO_CONTROLLERS")
		}
	}
	bin, err := filepath.Abs(path)
	if err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(bin, "--version").Output()
	if err != nil {
		t.Fatalf("%s --version: %v", bin, err)
	}
	var version string
	for line := range strings.Lines(string(out)) {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), "Version: "); ok {
			version = v
		}
	}
	if !strings.HasPrefix(version, "v") {
		t.Fatalf("%s reports version %q: build it with `make volcano-controllers`, which stamps it", bin, version)
	}
	return volcanoControllers{bin: bin, src: moduleSource(t, "volcano.sh/volcano@"+version)}
}

// moduleSource finds (or fetches) the source of mod (path@version) with go
// mod download, outside this module, whose go.mod and go.sum it must not
// touch.
func moduleSource(t *testing.T, mod string) string {
	t.Helper()
	cmd := exec.Command("go", "mod", "download", "-json", mod)
	cmd.Dir = workDir
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	var dl struct{ Dir, Error string }
	if jsonErr := json.Unmarshal(out, &dl); err != nil || jsonErr != nil || dl.Dir == "" {
		t.Fatalf("go mod download %s: %v %v %s %s", mod, err, jsonErr, dl.Error, stderr.String())
	}
	return dl.Dir
}

// crdFile is one CRD file of Volcano's module.
func (vc volcanoControllers) crdFile(name string) singleFile {
	return singleFile{os.DirFS(filepath.Join(vc.src, "config", "crd", "volcano", "bases")), name}
}

// startVolcanoControllers runs vc-controller-manager as Volcano's
// Deployment would (--leader-elect=false), with its Job, PodGroup and Queue
// controllers: as its ServiceAccount in namespace, with the ClusterRole of
// Volcano's installer, and waits until the Job controller runs. The
// Volcano CRDs it watches must be served: Jobs, Commands, PodGroups and
// Queues.
func startVolcanoControllers(t *testing.T, ctx context.Context, vc volcanoControllers, namespace string) *schedulerProcess {
	t.Helper()
	createNamespace(t, ctx, namespace)
	grantVolcanoControllers(t, ctx, vc, namespace)
	token := serviceAccountToken(t, ctx, namespace, volcanoControllersName)
	p := startProcess(t, "vc-controller-manager", vc.bin, []string{
		"--kubeconfig=" + tokenKubeconfig(t, namespace+"-"+volcanoControllersName+".kubeconfig", token),
		"--leader-elect=false",
		"--controllers=+job-controller,+pg-controller,+queue-controller",
		"--scheduler-name=volcano",
		"--logtostderr",
		"-v=3",
	}, nil)
	for _, running := range []string{"JobController is running", "PodgroupController is running"} {
		if _, err := p.waitLog(ctx, running, time.Minute); err != nil {
			t.Fatal(err)
		}
	}
	return p
}

// grantVolcanoControllers creates the controllers' ServiceAccount and binds
// it to the ClusterRole of Volcano's installer (installer/volcano-
// development.yaml, rendered from its Helm chart), for the test.
func grantVolcanoControllers(t *testing.T, ctx context.Context, vc volcanoControllers, namespace string) {
	t.Helper()
	sa := &v1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: volcanoControllersName}}
	if _, err := cluster.Client.CoreV1().ServiceAccounts(namespace).Create(ctx, sa, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	role := volcanoControllersRole(t, vc)
	rbac := cluster.Client.RbacV1()
	if _, err := rbac.ClusterRoles().Create(ctx, role, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	binding := &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: volcanoControllersName},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: volcanoControllersName},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: namespace, Name: volcanoControllersName}},
	}
	if _, err := rbac.ClusterRoleBindings().Create(ctx, binding, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx := context.Background()
		_ = rbac.ClusterRoleBindings().Delete(ctx, volcanoControllersName, metav1.DeleteOptions{})
		_ = rbac.ClusterRoles().Delete(ctx, volcanoControllersName, metav1.DeleteOptions{})
	})
}

// volcanoControllersRole is the controllers' ClusterRole in Volcano's
// installer.
func volcanoControllersRole(t *testing.T, vc volcanoControllers) *rbacv1.ClusterRole {
	t.Helper()
	file := filepath.Join(vc.src, "installer", "volcano-development.yaml")
	data, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	objs, err := decodeObjects(data)
	if err != nil {
		t.Fatalf("%s: %v", file, err)
	}
	for _, o := range objs {
		if o.GetKind() != "ClusterRole" || o.GetName() != volcanoControllersName {
			continue
		}
		var role rbacv1.ClusterRole
		if err := fromUnstructured(o.Object, &role); err != nil {
			t.Fatalf("%s: ClusterRole %s: %v", file, volcanoControllersName, err)
		}
		return &role
	}
	t.Fatalf("%s has no ClusterRole %s", file, volcanoControllersName)
	return nil
}

package deploy

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"

	authenticationv1 "k8s.io/api/authentication/v1"
	v1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// serviceAccountToken returns a token of the ServiceAccount, as the kubelet
// projects into a pod: the scheduler authenticates with it, and RBAC grants
// it exactly the chart's roles.
func serviceAccountToken(t *testing.T, ctx context.Context, namespace, name string) string {
	t.Helper()
	expiry := int64(3600)
	tr, err := cluster.Client.CoreV1().ServiceAccounts(namespace).CreateToken(ctx, name, &authenticationv1.TokenRequest{
		Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: &expiry},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("token for ServiceAccount %s/%s: %v", namespace, name, err)
	}
	return tr.Status.Token
}

// writeKubeconfig writes a kubeconfig of the control plane's superuser under
// file (in workDir), changed by edit.
func writeKubeconfig(t *testing.T, file string, edit func(*clientcmdapi.Config)) string {
	t.Helper()
	path := filepath.Join(workDir, file)
	if err := cluster.WriteKubeconfig(path); err != nil {
		t.Fatal(err)
	}
	cfg, err := clientcmd.LoadFromFile(path)
	if err != nil {
		t.Fatal(err)
	}
	edit(cfg)
	if err := clientcmd.WriteToFile(*cfg, path); err != nil {
		t.Fatal(err)
	}
	return path
}

// tokenKubeconfig is a kubeconfig that authenticates with token only.
func tokenKubeconfig(t *testing.T, file, token string) string {
	return writeKubeconfig(t, file, func(c *clientcmdapi.Config) {
		for _, a := range c.AuthInfos {
			*a = clientcmdapi.AuthInfo{Token: token}
		}
	})
}

// impersonatingKubeconfig is a kubeconfig of the superuser acting as user:
// requests are authorized as that user alone.
func impersonatingKubeconfig(t *testing.T, file, user string) string {
	return writeKubeconfig(t, file, func(c *clientcmdapi.Config) {
		for _, a := range c.AuthInfos {
			a.Impersonate = user
		}
	})
}

// metricsScraper creates a ServiceAccount in namespace bound to the
// ClusterRole, as a Prometheus would be, and returns its token.
func metricsScraper(t *testing.T, ctx context.Context, namespace, clusterRole string) string {
	t.Helper()
	const name = "scraper"
	_, err := cluster.Client.CoreV1().ServiceAccounts(namespace).Create(ctx, &v1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	_, err = cluster.Client.RbacV1().ClusterRoleBindings().Create(ctx, &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("%s-%s", clusterRole, namespace)},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: clusterRole},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: namespace, Name: name}},
	}, metav1.CreateOptions{})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	return serviceAccountToken(t, ctx, namespace, name)
}

func fromUnstructured(m map[string]any, into any) error {
	return runtime.DefaultUnstructuredConverter.FromUnstructured(m, into)
}

// Package controlplane runs a real kube-apiserver, backed by an embedded
// etcd, inside the current process, with Muster's CRDs installed. Tests,
// the sandbox and the benchmarks all stand on it: there is no fake API.
package controlplane

import (
	"context"
	"fmt"
	"io/fs"
	"net"
	"net/url"
	"os"
	"path"
	"strconv"
	"time"

	"github.com/google/uuid"
	"go.etcd.io/etcd/server/v3/embed"
	"go.uber.org/zap"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apiextensionsclient "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apiserver/pkg/storage/storagebackend"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	apiservertesting "k8s.io/kubernetes/cmd/kube-apiserver/app/testing"
	"sigs.k8s.io/yaml"

	"github.com/muster-sched/muster/manifests/crds"
	musterclient "github.com/muster-sched/muster/pkg/generated/clientset/versioned"
)

// apiserverFlags make a control plane with no kubelets or controllers work:
// no endpoint reconciler, and no admission that needs a service-account
// controller or taints kubelet-less nodes.
var apiserverFlags = []string{
	"--endpoint-reconciler-type=none",
	"--disable-admission-plugins=ServiceAccount,TaintNodesByCondition",
}

// ControlPlane is a running etcd + kube-apiserver with Muster's CRDs.
type ControlPlane struct {
	// Config is the apiserver's loopback client configuration (superuser).
	Config *rest.Config
	// Client is a clientset for the built-in APIs.
	Client kubernetes.Interface
	// Muster is a clientset for Muster's CRDs.
	Muster musterclient.Interface

	runner *runner
}

// Options shape a control plane beyond the defaults of Start.
type Options struct {
	// CRDs are files of CustomResourceDefinitions (e.g. scheduler-plugins'
	// PodGroup) installed after Muster's own.
	CRDs []fs.FS
	// RBAC turns on the RBAC authorizer. By default the apiserver allows
	// every authenticated request; with RBAC, a client other than the
	// superuser (Config) may do only what its roles grant, as in a cluster.
	RBAC bool
	// GangAPI serves Kubernetes' own gang API, as a 1.37 cluster that turned
	// it on: feature gates GenericWorkload, WorkloadWithJob and
	// TopologyAwareWorkloadScheduling (PodGroups' topology), and the
	// beta API scheduling.k8s.io/v1beta1 (Workload, PodGroup). Feature
	// gates are process-wide: a scheduler in this process sees them too,
	// until the next control plane of the process sets them again.
	GangAPI bool
	// AuditLog, when set, is the file the apiserver writes an audit event
	// to (JSON lines, Metadata level) for every request that may change
	// something: not get, list or watch. Tests count a client's writes
	// with it.
	AuditLog string
}

// auditPolicy logs what may change state, at Metadata level.
const auditPolicy = `apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: [RequestReceived]
rules:
- level: None
  verbs: [get, list, watch]
- level: Metadata
`

// Start brings up etcd and kube-apiserver, installs the CRDs in extraCRDs
// (files of CustomResourceDefinitions, e.g. scheduler-plugins' PodGroup)
// after Muster's own, and waits until they are served. Stop releases
// everything.
func Start(ctx context.Context, extraCRDs ...fs.FS) (*ControlPlane, error) {
	return StartWithOptions(ctx, Options{CRDs: extraCRDs})
}

// StartWithOptions is Start with Options.
func StartWithOptions(ctx context.Context, o Options) (*ControlPlane, error) {
	flags := append([]string(nil), apiserverFlags...)
	// Set either way: feature gates are process-wide, and a control plane
	// started before this one in the process may have turned them on.
	// The peer proxy serves mixed-version apiservers; this one has no
	// peers, and the proxy's transport outlives the apiserver until it is
	// collected, with its certificate-reload goroutines.
	flags = append(flags, fmt.Sprintf("--feature-gates=GenericWorkload=%t,WorkloadWithJob=%t,TopologyAwareWorkloadScheduling=%t,UnknownVersionInteroperabilityProxy=false", o.GangAPI, o.GangAPI, o.GangAPI))
	if o.GangAPI {
		flags = append(flags, "--runtime-config=scheduling.k8s.io/v1beta1=true")
	}
	if o.RBAC {
		flags = append(flags, "--authorization-mode=RBAC")
	}
	if o.AuditLog != "" {
		policy := o.AuditLog + ".policy.yaml"
		if err := os.WriteFile(policy, []byte(auditPolicy), 0o600); err != nil {
			return nil, err
		}
		flags = append(flags, "--audit-policy-file="+policy, "--audit-log-path="+o.AuditLog, "--audit-log-mode=blocking")
	}
	r := &runner{name: "controlplane"}
	cp := &ControlPlane{runner: r}
	err := r.run(func() {
		etcdURL, err := startEtcd(r)
		if err != nil {
			r.Fatal(err)
		}
		storage := storagebackend.NewDefaultConfig(path.Join(uuid.New().String(), "registry"), nil)
		storage.Transport.ServerList = []string{etcdURL}
		opts := apiservertesting.NewDefaultTestServerOptions()
		server, err := apiservertesting.StartTestServer(r, opts, flags, storage)
		if err != nil {
			r.Fatal(err)
		}
		r.Cleanup(server.TearDownFn)
		cp.Config = rest.CopyConfig(server.ClientConfig)
		cp.Config.QPS, cp.Config.Burst = 5000, 5000
	})
	if err != nil {
		r.cleanup()
		return nil, err
	}
	if cp.Client, err = kubernetes.NewForConfig(cp.Config); err != nil {
		cp.Stop()
		return nil, err
	}
	if cp.Muster, err = musterclient.NewForConfig(cp.JSONConfig()); err != nil {
		cp.Stop()
		return nil, err
	}
	if err := cp.InstallCRDs(ctx, append([]fs.FS{crds.FS}, o.CRDs...)...); err != nil {
		cp.Stop()
		return nil, err
	}
	return cp, nil
}

// Stop shuts the apiserver and etcd down and removes their files.
func (cp *ControlPlane) Stop() {
	cp.runner.cleanup()
}

// JSONConfig is a copy of Config that speaks JSON, as clients of custom
// resources must (the loopback config negotiates protobuf).
func (cp *ControlPlane) JSONConfig() *rest.Config {
	c := rest.CopyConfig(cp.Config)
	c.ContentType = "application/json"
	c.AcceptContentTypes = "application/json"
	return c
}

// WriteKubeconfig writes a kubeconfig for the control plane's superuser to
// file, for kubectl or a scheduler process.
func (cp *ControlPlane) WriteKubeconfig(file string) error {
	caData := cp.Config.TLSClientConfig.CAData
	if len(caData) == 0 && cp.Config.TLSClientConfig.CAFile != "" {
		var err error
		if caData, err = os.ReadFile(cp.Config.TLSClientConfig.CAFile); err != nil {
			return err
		}
	}
	const name = "muster-sandbox"
	cfg := clientcmdapi.Config{
		Clusters: map[string]*clientcmdapi.Cluster{name: {
			Server:                   cp.Config.Host,
			CertificateAuthorityData: caData,
			// The loopback certificate is issued for this name, not the address.
			TLSServerName:         cp.Config.TLSClientConfig.ServerName,
			InsecureSkipTLSVerify: len(caData) == 0 && cp.Config.TLSClientConfig.Insecure,
		}},
		AuthInfos: map[string]*clientcmdapi.AuthInfo{name: {
			Token:                 cp.Config.BearerToken,
			ClientCertificateData: cp.Config.TLSClientConfig.CertData,
			ClientKeyData:         cp.Config.TLSClientConfig.KeyData,
		}},
		Contexts:       map[string]*clientcmdapi.Context{name: {Cluster: name, AuthInfo: name}},
		CurrentContext: name,
	}
	return clientcmd.WriteToFile(cfg, file)
}

// InstallCRDs creates every CustomResourceDefinition found in the YAML files
// of each file system and waits until all are established and served.
func (cp *ControlPlane) InstallCRDs(ctx context.Context, fsyss ...fs.FS) error {
	client, err := apiextensionsclient.NewForConfig(cp.Config)
	if err != nil {
		return err
	}
	var names []string
	for _, fsys := range fsyss {
		files, err := fs.Glob(fsys, "*.yaml")
		if err != nil {
			return err
		}
		for _, f := range files {
			data, err := fs.ReadFile(fsys, f)
			if err != nil {
				return err
			}
			crd := &apiextensionsv1.CustomResourceDefinition{}
			if err := yaml.UnmarshalStrict(data, crd); err != nil {
				return fmt.Errorf("decoding %s: %w", f, err)
			}
			if _, err := client.ApiextensionsV1().CustomResourceDefinitions().Create(ctx, crd, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
				return fmt.Errorf("creating CRD %s: %w", crd.Name, err)
			}
			names = append(names, crd.Name)
		}
	}
	for _, name := range names {
		if err := waitEstablished(ctx, client, name); err != nil {
			return err
		}
	}
	return nil
}

func waitEstablished(ctx context.Context, client apiextensionsclient.Interface, name string) error {
	err := wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		crd, err := client.ApiextensionsV1().CustomResourceDefinitions().Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, nil
		}
		for _, c := range crd.Status.Conditions {
			if c.Type == apiextensionsv1.Established && c.Status == apiextensionsv1.ConditionTrue {
				// Discovery must serve the version too, or informers fail to start.
				gv := crd.Spec.Group + "/" + crd.Spec.Versions[0].Name
				resources, err := client.Discovery().ServerResourcesForGroupVersion(gv)
				if err != nil {
					return false, nil
				}
				for _, r := range resources.APIResources {
					if r.Name == crd.Spec.Names.Plural {
						// And the whole handler chain must serve it: the
						// apiserver's peer proxy keeps its own discovery
						// cache and answers 503 (retry later) until that
						// cache has the resource.
						err := client.Discovery().RESTClient().Get().AbsPath("/apis", gv, crd.Spec.Names.Plural).
							Param("limit", "1").Do(ctx).Error()
						return err == nil, nil
					}
				}
			}
		}
		return false, nil
	})
	if err != nil {
		return fmt.Errorf("CRD %s not served: %w", name, err)
	}
	return nil
}

// startEtcd runs an embedded single-member etcd that keeps its data in a
// temporary directory, and returns its client URL.
func startEtcd(r *runner) (string, error) {
	cfg := embed.NewConfig()
	cfg.UnsafeNoFsync = true // a throw-away member: no need to survive power loss
	ports, err := freePorts(2)
	if err != nil {
		return "", err
	}
	clientURL := url.URL{Scheme: "http", Host: net.JoinHostPort("127.0.0.1", strconv.Itoa(ports[0]))}
	peerURL := url.URL{Scheme: "http", Host: net.JoinHostPort("127.0.0.1", strconv.Itoa(ports[1]))}
	cfg.ListenClientUrls, cfg.AdvertiseClientUrls = []url.URL{clientURL}, []url.URL{clientURL}
	cfg.ListenPeerUrls, cfg.AdvertisePeerUrls = []url.URL{peerURL}, []url.URL{peerURL}
	cfg.InitialCluster = cfg.InitialClusterFromName(cfg.Name)
	cfg.ZapLoggerBuilder = embed.NewZapLoggerBuilder(zap.NewNop())
	cfg.Dir = r.TempDir()

	e, err := embed.StartEtcd(cfg)
	if err != nil {
		return "", fmt.Errorf("starting etcd: %w", err)
	}
	r.Cleanup(e.Close)
	select {
	case <-e.Server.ReadyNotify():
	case <-time.After(60 * time.Second):
		return "", fmt.Errorf("etcd did not become ready in 60s")
	}
	return clientURL.String(), nil
}

func freePorts(n int) ([]int, error) {
	var ports []int
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, err
		}
		defer l.Close()
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	return ports, nil
}

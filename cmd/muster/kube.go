package main

import (
	"encoding/json"
	"fmt"
	"io"

	"github.com/spf13/cobra"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/yaml"

	"github.com/muster-sched/muster/pkg/inspect"
)

// kubeFlags are kubectl's connection flags: the kubeconfig is found as
// kubectl finds it (--kubeconfig, else $KUBECONFIG, else ~/.kube/config).
type kubeFlags struct {
	kubeconfig, context, namespace string
}

func (k *kubeFlags) bind(cmd *cobra.Command) {
	f := cmd.Flags()
	f.StringVar(&k.kubeconfig, "kubeconfig", "", "path to the kubeconfig file (default: $KUBECONFIG, else ~/.kube/config)")
	f.StringVar(&k.context, "context", "", "the kubeconfig context to use")
	f.StringVarP(&k.namespace, "namespace", "n", "", "the namespace (default: the context's)")
}

// clients connects to the cluster and returns the namespace to use.
func (k *kubeFlags) clients() (inspect.Clients, string, error) {
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	rules.ExplicitPath = k.kubeconfig
	overrides := &clientcmd.ConfigOverrides{CurrentContext: k.context}
	overrides.Context.Namespace = k.namespace
	cc := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, overrides)
	cfg, err := cc.ClientConfig()
	if err != nil {
		return inspect.Clients{}, "", err
	}
	ns, _, err := cc.Namespace()
	if err != nil {
		return inspect.Clients{}, "", err
	}
	var c inspect.Clients
	if c.Kube, err = kubernetes.NewForConfig(cfg); err != nil {
		return c, "", err
	}
	if c.Dynamic, err = dynamic.NewForConfig(cfg); err != nil {
		return c, "", err
	}
	return c, ns, nil
}

// printStructured writes v as JSON or YAML for -o json|yaml; it reports
// false for the other formats, which the caller prints itself.
func printStructured(out io.Writer, format string, v any) (bool, error) {
	switch format {
	case "json":
		data, err := json.MarshalIndent(v, "", "  ")
		if err != nil {
			return true, err
		}
		_, err = fmt.Fprintln(out, string(data))
		return true, err
	case "yaml":
		data, err := yaml.Marshal(v)
		if err != nil {
			return true, err
		}
		_, err = out.Write(data)
		return true, err
	}
	return false, nil
}

package main

import (
	"path/filepath"
	"testing"

	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// The connection flags resolve as kubectl's: $KUBECONFIG unless
// --kubeconfig, the current context unless --context, its namespace
// unless -n.
func TestKubeFlags(t *testing.T) {
	dir := t.TempDir()
	write := func(name, current string) string {
		file := filepath.Join(dir, name)
		cfg := clientcmdapi.Config{
			Clusters: map[string]*clientcmdapi.Cluster{"c": {Server: "https://" + name + ".example"}},
			Contexts: map[string]*clientcmdapi.Context{
				"a": {Cluster: "c", Namespace: "team-a"},
				"b": {Cluster: "c", Namespace: "team-b"},
			},
			CurrentContext: current,
		}
		if err := clientcmd.WriteToFile(cfg, file); err != nil {
			t.Fatal(err)
		}
		return file
	}
	env, explicit := write("env", "a"), write("explicit", "b")
	t.Setenv("KUBECONFIG", env)
	for _, tc := range []struct {
		name  string
		flags kubeFlags
		want  string
	}{
		{"KUBECONFIG and its current context", kubeFlags{}, "team-a"},
		{"--context", kubeFlags{context: "b"}, "team-b"},
		{"-n", kubeFlags{context: "b", namespace: "other"}, "other"},
		{"--kubeconfig", kubeFlags{kubeconfig: explicit}, "team-b"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, ns, err := tc.flags.clients()
			if err != nil {
				t.Fatal(err)
			}
			if ns != tc.want {
				t.Errorf("namespace = %q, want %q", ns, tc.want)
			}
		})
	}
}

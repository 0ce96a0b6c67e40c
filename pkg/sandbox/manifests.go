package sandbox

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/restmapper"
	"sigs.k8s.io/yaml"
)

// manifest is one object read from a file, with where it came from.
type manifest struct {
	obj    *unstructured.Unstructured
	source string // file and document number, for error messages
}

// readManifests reads every object of the YAML or JSON files at paths
// (files, or folders whose *.yaml, *.yml and *.json files are read in name
// order). A List is expanded into its items.
func readManifests(paths []string) ([]manifest, error) {
	var files []string
	for _, p := range paths {
		info, err := os.Stat(p)
		if err != nil {
			return nil, err
		}
		if !info.IsDir() {
			files = append(files, p)
			continue
		}
		entries, err := os.ReadDir(p)
		if err != nil {
			return nil, err
		}
		for _, e := range entries {
			switch filepath.Ext(e.Name()) {
			case ".yaml", ".yml", ".json":
				files = append(files, filepath.Join(p, e.Name()))
			}
		}
	}
	var out []manifest
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			return nil, err
		}
		objs, err := decode(data, f)
		if err != nil {
			return nil, err
		}
		out = append(out, objs...)
	}
	return out, nil
}

func decode(data []byte, file string) ([]manifest, error) {
	var out []manifest
	d := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(data), 4096)
	for doc := 1; ; doc++ {
		var raw map[string]any
		if err := d.Decode(&raw); err != nil {
			if errors.Is(err, io.EOF) {
				return out, nil
			}
			return nil, fmt.Errorf("%s, document %d: %w", file, doc, err)
		}
		if len(raw) == 0 {
			continue
		}
		obj := &unstructured.Unstructured{Object: raw}
		source := fmt.Sprintf("%s, document %d", file, doc)
		if obj.GetKind() == "" || obj.GetAPIVersion() == "" {
			return nil, fmt.Errorf("%s: apiVersion and kind are required", source)
		}
		if obj.IsList() {
			err := obj.EachListItem(func(o runtime.Object) error {
				out = append(out, manifest{obj: o.(*unstructured.Unstructured), source: source})
				return nil
			})
			if err != nil {
				return nil, fmt.Errorf("%s: %w", source, err)
			}
			continue
		}
		out = append(out, manifest{obj: obj, source: source})
	}
}

// applyOrder creates what others refer to first: namespaces, priority
// classes, queues and groups before the pods that name them.
var applyOrder = map[string]int{
	"Namespace":     0,
	"PriorityClass": 1,
	"Queue":         2,
	"PodGroup":      3,
}

func sortForApply(ms []manifest) {
	rank := func(m manifest) int {
		if r, ok := applyOrder[m.obj.GetKind()]; ok {
			return r
		}
		return len(applyOrder)
	}
	sort.SliceStable(ms, func(i, j int) bool { return rank(ms[i]) < rank(ms[j]) })
}

// splitNodes separates Node objects, which the sandbox creates as simulated
// nodes, from everything else.
func splitNodes(ms []manifest) ([]*v1.Node, []manifest, error) {
	var nodes []*v1.Node
	var rest []manifest
	for _, m := range ms {
		if m.obj.GetKind() != "Node" {
			rest = append(rest, m)
			continue
		}
		data, err := m.obj.MarshalJSON()
		if err != nil {
			return nil, nil, fmt.Errorf("%s: %w", m.source, err)
		}
		node := &v1.Node{}
		if err := yaml.UnmarshalStrict(data, node); err != nil {
			return nil, nil, fmt.Errorf("%s: %w", m.source, err)
		}
		if len(node.Status.Capacity) == 0 {
			return nil, nil, fmt.Errorf("%s: node %s has no status.capacity", m.source, node.Name)
		}
		nodes = append(nodes, node)
	}
	return nodes, rest, nil
}

// applier creates arbitrary objects through the dynamic client.
type applier struct {
	client dynamic.Interface
	mapper meta.RESTMapper
}

func newApplier(dc discovery.DiscoveryInterface, client dynamic.Interface) *applier {
	return &applier{client: client, mapper: restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(dc))}
}

func (a *applier) create(ctx context.Context, m manifest) error {
	gvk := m.obj.GroupVersionKind()
	mapping, err := a.mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
	if err != nil {
		return fmt.Errorf("%s: %s is not served: %w", m.source, gvk, err)
	}
	var ri dynamic.ResourceInterface = a.client.Resource(mapping.Resource)
	if mapping.Scope.Name() == meta.RESTScopeNameNamespace {
		ns := m.obj.GetNamespace()
		if ns == "" {
			ns = metav1.NamespaceDefault
		}
		ri = a.client.Resource(mapping.Resource).Namespace(ns)
	}
	if _, err := ri.Create(ctx, m.obj, metav1.CreateOptions{FieldValidation: "Strict"}); err != nil {
		return fmt.Errorf("%s: creating %s %s: %w", m.source, strings.ToLower(gvk.Kind), m.obj.GetName(), err)
	}
	return nil
}

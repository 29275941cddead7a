// Package manifests reads Kubernetes manifests from multi-document YAML (or JSON) files.
package manifests

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/yaml"
)

// ReadDir reads every object of the .yaml, .yml and .json files directly in dir, files in name
// order, objects in file order. Empty documents are skipped; List kinds are flattened.
func ReadDir(dir string) ([]*unstructured.Unstructured, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	var names []string
	for _, e := range entries {
		switch strings.ToLower(filepath.Ext(e.Name())) {
		case ".yaml", ".yml", ".json":
			if !e.IsDir() {
				names = append(names, e.Name())
			}
		}
	}
	sort.Strings(names)
	var out []*unstructured.Unstructured
	for _, n := range names {
		objs, err := ReadFile(filepath.Join(dir, n))
		if err != nil {
			return nil, err
		}
		out = append(out, objs...)
	}
	return out, nil
}

// ReadFile reads every object of one multi-document YAML or JSON file.
func ReadFile(path string) ([]*unstructured.Unstructured, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	objs, err := Parse(b)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return objs, nil
}

// Parse reads every object of multi-document YAML or JSON.
func Parse(b []byte) ([]*unstructured.Unstructured, error) {
	r := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(b)))
	var out []*unstructured.Unstructured
	for i := 0; ; i++ {
		doc, err := r.Read()
		if errors.Is(err, io.EOF) {
			return out, nil
		}
		if err != nil {
			return nil, fmt.Errorf("document %d: %w", i, err)
		}
		j, err := yaml.YAMLToJSON(doc)
		if err != nil {
			return nil, fmt.Errorf("document %d: %w", i, err)
		}
		if t := bytes.TrimSpace(j); len(t) == 0 || bytes.Equal(t, []byte("null")) {
			continue
		}
		u := &unstructured.Unstructured{}
		if err := u.UnmarshalJSON(j); err != nil {
			return nil, fmt.Errorf("document %d: %w", i, err)
		}
		if u.IsList() {
			list, err := u.ToList()
			if err != nil {
				return nil, fmt.Errorf("document %d: %w", i, err)
			}
			for k := range list.Items {
				out = append(out, &list.Items[k])
			}
			continue
		}
		out = append(out, u)
	}
}

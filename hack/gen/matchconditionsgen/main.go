// Command matchconditionsgen writes the webhooks' matchConditions, kept readable in
// config/webhook/matchconditions.yaml, into the webhook configurations controller-gen generated in
// config/webhook/manifests.yaml: `make manifests` runs it after controller-gen, `make verify` checks
// the result. Each webhook of the conditions file gets exactly its conditions there, found by the
// configuration's kind and name and the webhook's name; a webhook the manifests lack, or one whose
// marker already sets other matchConditions, is an error.
package main

import (
	"bufio"
	"bytes"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"reflect"
	"strings"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/yaml"
)

func main() {
	conditions := flag.String("conditions", "config/webhook/matchconditions.yaml", "The readable matchConditions.")
	manifests := flag.String("manifests", "config/webhook/manifests.yaml", "controller-gen's webhook configurations, rewritten in place.")
	flag.Parse()
	if err := run(*conditions, *manifests); err != nil {
		fmt.Fprintln(os.Stderr, "matchconditionsgen:", err)
		os.Exit(1)
	}
}

func run(conditionsFile, manifestsFile string) error {
	conds, err := os.ReadFile(conditionsFile)
	if err != nil {
		return err
	}
	manifests, err := os.ReadFile(manifestsFile)
	if err != nil {
		return err
	}
	out, err := Merge(conds, manifests)
	if err != nil {
		return fmt.Errorf("%s into %s: %w", conditionsFile, manifestsFile, err)
	}
	if bytes.Equal(out, manifests) {
		return nil
	}
	return os.WriteFile(manifestsFile, out, 0o644)
}

// configuration is one document of the conditions file: a webhook configuration with only its
// webhooks' names and matchConditions.
type configuration struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	Metadata   struct {
		Name string `json:"name"`
	} `json:"metadata"`
	Webhooks []struct {
		Name            string                                   `json:"name"`
		MatchConditions []admissionregistrationv1.MatchCondition `json:"matchConditions"`
	} `json:"webhooks"`
}

// Merge returns manifests (controller-gen's output: documents each after a `---` line) with the
// matchConditions of conds set on their webhooks, written as controller-gen writes them.
func Merge(conds, manifests []byte) ([]byte, error) {
	docs, err := documents(manifests)
	if err != nil {
		return nil, fmt.Errorf("reading the manifests: %w", err)
	}
	objs := make([]map[string]any, len(docs))
	for i, d := range docs {
		if err := yaml.Unmarshal(d, &objs[i]); err != nil {
			return nil, fmt.Errorf("reading the manifests: %w", err)
		}
	}
	configs, err := documents(conds)
	if err != nil {
		return nil, fmt.Errorf("reading the conditions: %w", err)
	}
	for _, d := range configs {
		var c configuration
		if err := yaml.UnmarshalStrict(d, &c); err != nil {
			return nil, fmt.Errorf("reading the conditions: %w", err)
		}
		if err := apply(c, objs); err != nil {
			return nil, err
		}
	}
	var out bytes.Buffer
	for _, o := range objs {
		b, err := yaml.Marshal(o)
		if err != nil {
			return nil, err
		}
		out.WriteString("---\n")
		out.Write(b)
	}
	return out.Bytes(), nil
}

// apply sets c's matchConditions on the webhooks of its configuration among objs.
func apply(c configuration, objs []map[string]any) error {
	id := c.Kind + " " + c.Metadata.Name
	var obj map[string]any
	for _, o := range objs {
		meta, _ := o["metadata"].(map[string]any)
		if o["apiVersion"] == c.APIVersion && o["kind"] == c.Kind && meta != nil && meta["name"] == c.Metadata.Name {
			obj = o
			break
		}
	}
	if obj == nil {
		return fmt.Errorf("%s (%s): not in the manifests", id, c.APIVersion)
	}
	hooks, _ := obj["webhooks"].([]any)
	seen := map[string]bool{}
	for _, w := range c.Webhooks {
		if seen[w.Name] {
			return fmt.Errorf("%s: webhook %s listed twice", id, w.Name)
		}
		seen[w.Name] = true
		var hook map[string]any
		for _, h := range hooks {
			if h, ok := h.(map[string]any); ok && h["name"] == w.Name {
				hook = h
			}
		}
		if hook == nil {
			return fmt.Errorf("%s: no webhook %s in the manifests (renamed in its marker?)", id, w.Name)
		}
		if len(w.MatchConditions) == 0 {
			return fmt.Errorf("%s: webhook %s: no matchConditions", id, w.Name)
		}
		list := make([]any, len(w.MatchConditions))
		for i, mc := range w.MatchConditions {
			if mc.Name == "" || strings.TrimSpace(mc.Expression) == "" {
				return fmt.Errorf("%s: webhook %s: a matchCondition without a name or an expression", id, w.Name)
			}
			list[i] = map[string]any{"name": mc.Name, "expression": mc.Expression}
		}
		// Set by an earlier run: the same again. Set otherwise: by a marker's patch=, which the
		// conditions file replaces.
		if old, ok := hook["matchConditions"]; ok && !reflect.DeepEqual(old, list) {
			return fmt.Errorf("%s: webhook %s: its marker sets matchConditions too; keep them in the conditions file only", id, w.Name)
		}
		hook["matchConditions"] = list
	}
	return nil
}

// documents splits a YAML stream into its non-empty documents.
func documents(b []byte) ([][]byte, error) {
	r := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(b)))
	var docs [][]byte
	for {
		d, err := r.Read()
		if errors.Is(err, io.EOF) {
			return docs, nil
		}
		if err != nil {
			return nil, err
		}
		var v any
		if err := yaml.Unmarshal(d, &v); err != nil {
			return nil, err
		}
		if v != nil { // not only comments
			docs = append(docs, d)
		}
	}
}

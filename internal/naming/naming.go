// Package naming is the one home of names: the names cos-externalizer gives what it creates (the
// object-data Secrets' names and the revision-name label value, generated.go), and the one format in
// which messages, Events, logs and reports name a Kubernetes object ("Kind namespace/name", "Kind
// name" when cluster-scoped) and count things ("1 Secret", "3 Secrets"), so that every component says
// the same thing the same way.
package naming

import (
	"fmt"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// Key names an object by its kind, namespace and name: "Deployment ns/name", or "CustomResourceDefinition
// name" for a cluster-scoped one. An empty kind reads "object"; an empty name leaves the kind alone.
func Key(kind, namespace, name string) string {
	if kind == "" {
		kind = "object"
	}
	switch {
	case name == "":
		return kind
	case namespace != "":
		return kind + " " + namespace + "/" + name
	default:
		return kind + " " + name
	}
}

// Object names an object given as decoded JSON (what unstructured.Unstructured holds), tolerating
// fields of the wrong type: it describes what a user sent, valid or not.
func Object(obj map[string]any) string {
	kind, _ := obj["kind"].(string)
	md, _ := obj["metadata"].(map[string]any)
	name, _ := md["name"].(string)
	ns, _ := md["namespace"].(string)
	return Key(kind, ns, name)
}

// Unstructured names u as Object does.
func Unstructured(u *unstructured.Unstructured) string {
	return Object(u.Object)
}

// Count is n with its noun, plural when n is not 1: "1 Secret", "0 Secrets", "3 Secrets".
func Count(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return fmt.Sprintf("%d %ss", n, noun)
}

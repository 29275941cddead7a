// Package phasesort sorts the objects of a bundle into the phases producers use for a
// ClusterObjectSet (namespaces first, admission webhooks last), splitting any phase that would hold
// more objects than the API allows. It is pure: no client, no I/O.
package phasesort

import (
	"fmt"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// Order is the producer phase order. Kinds not listed in phaseOf go to Deploy.
var Order = []string{
	"namespaces", "policies", "identity", "configuration", "storage", "crds", "roles", "bindings",
	"infrastructure", Deploy, "scaling", "publish", "admission",
}

// Deploy is the phase of every kind the table does not name.
const Deploy = "deploy"

var phaseOf = map[schema.GroupKind]string{
	{Kind: "Namespace"}: "namespaces",

	{Group: "networking.k8s.io", Kind: "NetworkPolicy"}:                             "policies",
	{Group: "policy", Kind: "PodDisruptionBudget"}:                                  "policies",
	{Group: "scheduling.k8s.io", Kind: "PriorityClass"}:                             "policies",
	{Kind: "ServiceAccount"}:                                                        "identity",
	{Kind: "Secret"}:                                                                "configuration",
	{Kind: "ConfigMap"}:                                                             "configuration",
	{Kind: "PersistentVolume"}:                                                      "storage",
	{Kind: "PersistentVolumeClaim"}:                                                 "storage",
	{Group: "storage.k8s.io", Kind: "StorageClass"}:                                 "storage",
	{Group: "apiextensions.k8s.io", Kind: "CustomResourceDefinition"}:               "crds",
	{Group: "rbac.authorization.k8s.io", Kind: "ClusterRole"}:                       "roles",
	{Group: "rbac.authorization.k8s.io", Kind: "Role"}:                              "roles",
	{Group: "rbac.authorization.k8s.io", Kind: "ClusterRoleBinding"}:                "bindings",
	{Group: "rbac.authorization.k8s.io", Kind: "RoleBinding"}:                       "bindings",
	{Kind: "Service"}:                                                               "infrastructure",
	{Group: "cert-manager.io", Kind: "Issuer"}:                                      "infrastructure",
	{Group: "cert-manager.io", Kind: "Certificate"}:                                 Deploy,
	{Group: "apps", Kind: "Deployment"}:                                             Deploy,
	{Group: "autoscaling.k8s.io", Kind: "VerticalPodAutoscaler"}:                    "scaling",
	{Group: "monitoring.coreos.com", Kind: "PrometheusRule"}:                        "publish",
	{Group: "monitoring.coreos.com", Kind: "ServiceMonitor"}:                        "publish",
	{Group: "monitoring.coreos.com", Kind: "PodMonitor"}:                            "publish",
	{Group: "networking.k8s.io", Kind: "Ingress"}:                                   "publish",
	{Group: "route.openshift.io", Kind: "Route"}:                                    "publish",
	{Group: "console.openshift.io", Kind: "ConsoleYAMLSample"}:                      "publish",
	{Group: "console.openshift.io", Kind: "ConsoleQuickStart"}:                      "publish",
	{Group: "console.openshift.io", Kind: "ConsoleCLIDownload"}:                     "publish",
	{Group: "console.openshift.io", Kind: "ConsoleLink"}:                            "publish",
	{Group: "console.openshift.io", Kind: "ConsolePlugin"}:                          "publish",
	{Group: "admissionregistration.k8s.io", Kind: "ValidatingWebhookConfiguration"}: "admission",
	{Group: "admissionregistration.k8s.io", Kind: "MutatingWebhookConfiguration"}:   "admission",
}

// PhaseOf returns the producer phase of a group and kind.
func PhaseOf(gk schema.GroupKind) string {
	if p, ok := phaseOf[gk]; ok {
		return p
	}
	return Deploy
}

// Phase is a named group of objects.
type Phase struct {
	Name    string
	Objects []*unstructured.Unstructured
}

// Sort groups objects into phases in Order, keeping the input order within a phase, and leaves out
// empty phases. A phase with more than maxPerPhase objects is split into parts named "<phase>",
// "<phase>-2", "<phase>-3", ... in order. maxPerPhase must be positive.
func Sort(objs []*unstructured.Unstructured, maxPerPhase int) ([]Phase, error) {
	if maxPerPhase <= 0 {
		return nil, fmt.Errorf("maxPerPhase must be positive, got %d", maxPerPhase)
	}
	byPhase := map[string][]*unstructured.Unstructured{}
	for _, o := range objs {
		p := PhaseOf(o.GroupVersionKind().GroupKind())
		byPhase[p] = append(byPhase[p], o)
	}
	var out []Phase
	for _, name := range Order {
		members := byPhase[name]
		for part := 1; len(members) > 0; part++ {
			n := min(len(members), maxPerPhase)
			phaseName := name
			if part > 1 {
				phaseName = fmt.Sprintf("%s-%d", name, part)
			}
			out = append(out, Phase{Name: phaseName, Objects: members[:n:n]})
			members = members[n:]
		}
	}
	return out, nil
}

// clusterScoped lists the built-in cluster-scoped kinds (and those of common add-ons) so objects can
// be placed in a namespace without asking an API server's discovery.
var clusterScoped = map[schema.GroupKind]bool{
	{Kind: "Namespace"}:        true,
	{Kind: "Node"}:             true,
	{Kind: "PersistentVolume"}: true,
	{Group: "apiextensions.k8s.io", Kind: "CustomResourceDefinition"}:                 true,
	{Group: "rbac.authorization.k8s.io", Kind: "ClusterRole"}:                         true,
	{Group: "rbac.authorization.k8s.io", Kind: "ClusterRoleBinding"}:                  true,
	{Group: "storage.k8s.io", Kind: "StorageClass"}:                                   true,
	{Group: "storage.k8s.io", Kind: "CSIDriver"}:                                      true,
	{Group: "scheduling.k8s.io", Kind: "PriorityClass"}:                               true,
	{Group: "admissionregistration.k8s.io", Kind: "ValidatingWebhookConfiguration"}:   true,
	{Group: "admissionregistration.k8s.io", Kind: "MutatingWebhookConfiguration"}:     true,
	{Group: "admissionregistration.k8s.io", Kind: "ValidatingAdmissionPolicy"}:        true,
	{Group: "admissionregistration.k8s.io", Kind: "ValidatingAdmissionPolicyBinding"}: true,
	{Group: "apiregistration.k8s.io", Kind: "APIService"}:                             true,
	{Group: "cert-manager.io", Kind: "ClusterIssuer"}:                                 true,
	{Group: "olm.operatorframework.io", Kind: "ClusterObjectSet"}:                     true,
	{Group: "console.openshift.io", Kind: "ConsoleYAMLSample"}:                        true,
	{Group: "console.openshift.io", Kind: "ConsoleQuickStart"}:                        true,
	{Group: "console.openshift.io", Kind: "ConsoleCLIDownload"}:                       true,
	{Group: "console.openshift.io", Kind: "ConsoleLink"}:                              true,
	{Group: "console.openshift.io", Kind: "ConsolePlugin"}:                            true,
}

// IsClusterScoped reports whether a group and kind is known to be cluster-scoped. Kinds it does not
// know (custom resources among them) are taken as namespaced.
func IsClusterScoped(gk schema.GroupKind) bool { return clusterScoped[gk] }

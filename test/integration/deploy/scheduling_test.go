package deploy_test

import (
	"os"
	"slices"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/cos-externalizer/cos-externalizer/test/testenv"
)

// TestOverlaysScheduleCritical: every install overlay's manager runs at a priority its namespace
// admits (a ResourceQuota scoped to that class, for API servers that limit the system classes),
// gets the Go runtime's memory limit from its container's limit (MEMORY_LIMIT, no GOMEMLIMIT), and
// has a PodDisruptionBudget over its Pods that lets a drain evict an unhealthy one.
func TestOverlaysScheduleCritical(t *testing.T) {
	forEachInstall(t, func(t *testing.T, _ overlay, objs []*unstructured.Unstructured) {
		deploy := &appsv1.Deployment{}
		convert(t, find(objs, "Deployment", deploymentName), deploy)
		pod := deploy.Spec.Template.Spec
		quota := &corev1.ResourceQuota{}
		convert(t, find(objs, "ResourceQuota", "cos-externalizer-critical-pods"), quota)
		scope := quota.Spec.ScopeSelector
		if scope == nil || len(scope.MatchExpressions) != 1 || scope.MatchExpressions[0].ScopeName != corev1.ResourceQuotaScopePriorityClass ||
			scope.MatchExpressions[0].Operator != corev1.ScopeSelectorOpIn || !slices.Contains(scope.MatchExpressions[0].Values, pod.PriorityClassName) {
			t.Errorf("quota scope %+v does not admit priorityClassName %q", scope, pod.PriorityClassName)
		}
		if pods := quota.Spec.Hard[corev1.ResourcePods]; pods.Value() < 1000 {
			t.Errorf("the quota caps pods at %s", pods.String())
		}
		env := map[string]corev1.EnvVar{}
		for _, e := range pod.Containers[0].Env {
			env[e.Name] = e
		}
		ref := env["MEMORY_LIMIT"].ValueFrom
		if _, set := env["GOMEMLIMIT"]; set || ref == nil || ref.ResourceFieldRef == nil || ref.ResourceFieldRef.Resource != "limits.memory" ||
			ref.ResourceFieldRef.ContainerName != pod.Containers[0].Name {
			t.Errorf("env %+v: want MEMORY_LIMIT from the container's limits.memory and no GOMEMLIMIT", pod.Containers[0].Env)
		}
		pdb := &policyv1.PodDisruptionBudget{}
		convert(t, find(objs, "PodDisruptionBudget", deploymentName), pdb)
		if pdb.Spec.UnhealthyPodEvictionPolicy == nil || *pdb.Spec.UnhealthyPodEvictionPolicy != policyv1.AlwaysAllow ||
			pdb.Spec.MinAvailable == nil || pdb.Spec.MinAvailable.IntValue() != 1 || pdb.Spec.Selector == nil ||
			!selects(pdb.Spec.Selector.MatchLabels, deploy.Spec.Template.Labels) {
			t.Errorf("PodDisruptionBudget %+v: want minAvailable 1 of the manager's Pods, unhealthy Pods evictable", pdb.Spec)
		}
	})
}

// TestGrafanaDashboardConfigMap: config/grafana renders one ConfigMap, labelled for Grafana's
// dashboard sidecar, holding the generated dashboard as it is in the repository.
func TestGrafanaDashboardConfigMap(t *testing.T) {
	objs := parse(t, render(t, "grafana"))
	cm := &corev1.ConfigMap{}
	convert(t, find(objs, "ConfigMap", "cos-externalizer-dashboard"), cm)
	want, err := os.ReadFile(testenv.RepoPath(t, "config", "grafana", "cos-externalizer.json"))
	if err != nil {
		t.Fatal(err)
	}
	if len(objs) != 1 || cm.Labels["grafana_dashboard"] != "1" || cm.Namespace != systemNamespace || cm.Data["cos-externalizer.json"] != string(want) {
		t.Errorf("%d objects; ConfigMap %s/%s labelled %v: want only the dashboard, labelled grafana_dashboard=1", len(objs), cm.Namespace, cm.Name, cm.Labels)
	}
}

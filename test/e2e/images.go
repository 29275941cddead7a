package e2e

import (
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	olmv1 "github.com/cos-externalizer/cos-externalizer/api/v1"
)

// RunnableImager is a Cluster whose nodes cannot pull the images a bundle's workloads name (kind on a
// machine without a registry, make test-e2e-sources): RunnableImage is an image its nodes hold, whose
// /pause runs until stopped.
type RunnableImager interface {
	RunnableImage() string
}

// workloadKinds are the kinds whose Pod template RunEverywhere rewrites.
var workloadKinds = map[string]bool{"Deployment": true, "StatefulSet": true, "DaemonSet": true}

// RunEverywhere makes the workloads of cos's inline objects run on a cluster that cannot pull their
// images, where c is a RunnableImager with an image: every container runs image's /pause (no
// command of its own, no probe, no environment or volume, which may name Secrets that the workloads'
// own Jobs would have made; never pulled; as a non-root user), and init containers and volumes go. Every
// object keeps its kind, name, namespace, labels and selectors, so the rollout, its probes of
// availability and its handover are the same; only what runs in the Pods differs.
func RunEverywhere(c Cluster, cos *olmv1.ClusterObjectSet) {
	r, ok := c.(RunnableImager)
	if !ok || r.RunnableImage() == "" {
		return
	}
	image := r.RunnableImage()
	for i := range cos.Spec.Phases {
		for j := range cos.Spec.Phases[i].Objects {
			o := &cos.Spec.Phases[i].Objects[j].Object
			if o.Object == nil || !workloadKinds[o.GetKind()] {
				continue
			}
			unstructured.RemoveNestedField(o.Object, "spec", "template", "spec", "initContainers")
			unstructured.RemoveNestedField(o.Object, "spec", "template", "spec", "volumes")
			containers, _, _ := unstructured.NestedSlice(o.Object, "spec", "template", "spec", "containers")
			for k, raw := range containers {
				ctr, ok := raw.(map[string]any)
				if !ok {
					continue
				}
				ctr["image"] = image
				ctr["imagePullPolicy"] = "Never"
				ctr["command"] = []any{"/pause"}
				for _, f := range []string{"args", "env", "envFrom", "volumeMounts", "livenessProbe", "readinessProbe", "startupProbe", "lifecycle"} {
					delete(ctr, f)
				}
				ctr["securityContext"] = map[string]any{"runAsUser": int64(65532), "runAsNonRoot": true, "allowPrivilegeEscalation": false}
				containers[k] = ctr
			}
			_ = unstructured.SetNestedSlice(o.Object, containers, "spec", "template", "spec", "containers")
		}
	}
}

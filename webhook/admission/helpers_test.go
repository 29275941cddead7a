package admission

import (
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	olmv1 "github.com/cos-externalizer/cos-externalizer/api/v1"
)

func cm(name string, data string) olmv1.ClusterObjectSetObject {
	u := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "v1", "kind": "ConfigMap",
		"metadata": map[string]any{"name": name, "namespace": "default"},
		"data":     map[string]any{"k": data},
	}}
	return olmv1.ClusterObjectSetObject{Object: *u}
}

func ref(name, ns, key string) olmv1.ClusterObjectSetObject {
	return olmv1.ClusterObjectSetObject{Ref: olmv1.ObjectSourceRef{Name: name, Namespace: ns, Key: key}}
}

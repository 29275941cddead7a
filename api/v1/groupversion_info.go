// Package v1 holds the ClusterObjectSet API, group olm.operatorframework.io, version v1.
//
// This package imports only k8s.io/apimachinery, so producers and consumers of the API can vendor it
// without pulling in a client.
//
// +kubebuilder:object:generate=true
// +groupName=olm.operatorframework.io
package v1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

var (
	// GroupVersion is the group and version of every type in this package.
	GroupVersion = schema.GroupVersion{Group: "olm.operatorframework.io", Version: "v1"}

	// SchemeBuilder collects the functions that add this package's types to a scheme.
	SchemeBuilder = runtime.NewSchemeBuilder(addKnownTypes)

	// AddToScheme adds this package's types to a scheme.
	AddToScheme = SchemeBuilder.AddToScheme
)

func addKnownTypes(s *runtime.Scheme) error {
	s.AddKnownTypes(GroupVersion, &ClusterObjectSet{}, &ClusterObjectSetList{})
	metav1.AddToGroupVersion(s, GroupVersion)
	return nil
}

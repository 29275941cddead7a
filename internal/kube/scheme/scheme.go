// Package scheme builds the runtime scheme the manager and the tests share: the built-in Kubernetes
// types, apiextensions and the ClusterObjectSet API.
package scheme

import (
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/runtime"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"

	olmv1 "github.com/cos-externalizer/cos-externalizer/api/v1"
)

// New returns a new scheme with every type the project reads or writes.
func New() *runtime.Scheme {
	s := runtime.NewScheme()
	utilruntime.Must(clientgoscheme.AddToScheme(s))
	utilruntime.Must(apiextensionsv1.AddToScheme(s))
	utilruntime.Must(olmv1.AddToScheme(s))
	return s
}

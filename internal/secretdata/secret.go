package secretdata

import (
	"fmt"
	"reflect"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	olmv1 "github.com/cos-externalizer/cos-externalizer/api/v1"
	"github.com/cos-externalizer/cos-externalizer/internal/content"
	"github.com/cos-externalizer/cos-externalizer/internal/naming"
)

// ObjectDataSecret returns the Secret to create for one planned Secret of the ClusterObjectSet
// cosName, in namespace: typed object-data, immutable, labelled with the revision name, and without
// an owner (the reconciler adds the ClusterObjectSet once it exists). Its data is the plan's, not
// copied.
func ObjectDataSecret(cosName, namespace string, s content.SecretOut) *corev1.Secret {
	return &corev1.Secret{
		TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Secret"},
		ObjectMeta: metav1.ObjectMeta{
			Name:      s.Name,
			Namespace: namespace,
			Labels:    map[string]string{olmv1.LabelRevisionName: naming.RevisionLabelValue(cosName)},
		},
		Type:      olmv1.SecretTypeObjectData,
		Immutable: ptr.To(true),
		Data:      s.Data,
	}
}

// Unusable returns why an existing Secret got cannot stand for the wanted one (ObjectDataSecret): it
// must be exactly ours, with the same type, immutable, labelled for the same ClusterObjectSet and
// holding exactly the same data. Empty means it can. The reasons never quote content.
func Unusable(got, want *corev1.Secret) []string {
	var why []string
	if got.Type != want.Type {
		why = append(why, fmt.Sprintf("its type is %q", got.Type))
	}
	if !ptr.Deref(got.Immutable, false) {
		why = append(why, "it is not immutable")
	}
	if got.Labels[olmv1.LabelRevisionName] != want.Labels[olmv1.LabelRevisionName] {
		why = append(why, "it belongs to another ClusterObjectSet")
	}
	if !reflect.DeepEqual(got.Data, want.Data) {
		why = append(why, "its data differs from the content it must hold")
	}
	return why
}

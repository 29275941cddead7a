package secretuse

import (
	"slices"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	olmv1 "github.com/cos-externalizer/cos-externalizer/api/v1"
	"github.com/cos-externalizer/cos-externalizer/internal/collision"
)

// UnusedSecrets returns the object-data Secrets among secrets that nobody uses and no existing
// ClusterObjectSet owns (Unused): the orphan sweep's candidates and the webhook's ledger of
// unreferenced Secrets are both this set, judged against the ClusterObjectSets sets.
func UnusedSecrets(secrets []corev1.Secret, sets []olmv1.ClusterObjectSet, systemNamespace string) []corev1.Secret {
	existing := map[types.UID]bool{}
	for i := range sets {
		existing[sets[i].UID] = true
	}
	users := BySecret(sets, systemNamespace)
	var out []corev1.Secret
	for _, sec := range secrets {
		if sec.Type != olmv1.SecretTypeObjectData {
			continue
		}
		owned := slices.ContainsFunc(sec.OwnerReferences, func(ref metav1.OwnerReference) bool {
			return collision.IsClusterObjectSetRef(ref) && existing[ref.UID]
		})
		if Unused(users[types.NamespacedName{Namespace: sec.Namespace, Name: sec.Name}], owned) {
			out = append(out, sec)
		}
	}
	return out
}

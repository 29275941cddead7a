package webhook

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/util/validation/field"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	olmv1 "github.com/cos-externalizer/cos-externalizer/api/v1"
)

// warningPrefix starts every warning the mutating webhook returns.
const warningPrefix = "cos-externalizer: "

// checkUserRefs warns about refs given by the user that name a Secret or key that does not exist.
func (e *Externalizer) checkUserRefs(ctx context.Context, obj *olmv1.ClusterObjectSet) []string {
	var warnings []string
	secrets := map[client.ObjectKey]*corev1.Secret{}
	for i, p := range obj.Spec.Phases {
		for j, o := range p.Objects {
			if !o.IsRef() {
				continue
			}
			key := client.ObjectKey{Namespace: o.Ref.NamespaceOr(e.Options.SystemNamespace), Name: o.Ref.Name}
			sec, seen := secrets[key]
			if !seen {
				sec = &corev1.Secret{}
				if err := e.Reader.Get(ctx, key, sec); err != nil {
					sec = nil
					if !apierrors.IsNotFound(err) {
						ctrl.LoggerFrom(ctx).Info("could not check a ref", "secret", key.String(), "error", err.Error())
						continue
					}
				}
				secrets[key] = sec
			}
			path := field.NewPath("spec", "phases").Index(i).Child("objects").Index(j).Child("ref")
			switch {
			case sec == nil:
				warnings = append(warnings, fmt.Sprintf("%s%s: Secret %s does not exist (yet)", warningPrefix, path, key))
			case sec.Data[o.Ref.Key] == nil:
				warnings = append(warnings, fmt.Sprintf("%s%s: Secret %s has no key %q", warningPrefix, path, key, o.Ref.Key))
			}
		}
	}
	return warnings
}

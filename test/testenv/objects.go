package testenv

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	olmv1 "github.com/cos-externalizer/cos-externalizer/api/v1"
	"github.com/cos-externalizer/cos-externalizer/internal/content"
	"github.com/cos-externalizer/cos-externalizer/internal/naming"
	"github.com/cos-externalizer/cos-externalizer/test/framework"
)

// The test/framework helpers, bound to the environment's client and to ClusterObjectSets by name.

// EnsureNamespace creates the namespace unless it exists.
func (e *Environment) EnsureNamespace(t testing.TB, name string) {
	t.Helper()
	framework.EnsureNamespace(context.Background(), t, e.Client, name)
}

// RemoveAfter deletes the ClusterObjectSets when the test ends and waits until they are gone (their
// Secrets may outlive them: the garbage collector takes them), so that the test can run again (-count).
func (e *Environment) RemoveAfter(t testing.TB, names ...string) {
	t.Helper()
	framework.RemoveAfter(t, e.Client, clusterObjectSets(names)...)
}

// RemoveWithSecretsAfter deletes the ClusterObjectSets when the test ends and waits until they and
// their object-data Secrets are gone (DeleteWithSecrets), for tests that run again (-count) with the
// same objects and count the Secrets they write.
func (e *Environment) RemoveWithSecretsAfter(t testing.TB, names ...string) {
	t.Cleanup(func() {
		for _, n := range names {
			e.DeleteWithSecrets(t, n)
		}
	})
}

func clusterObjectSets(names []string) []client.Object {
	objs := make([]client.Object, len(names))
	for i, n := range names {
		objs[i] = &olmv1.ClusterObjectSet{ObjectMeta: metav1.ObjectMeta{Name: n}}
	}
	return objs
}

// ObjectDataSecrets lists the object-data Secrets labelled for a ClusterObjectSet, by name.
func (e *Environment) ObjectDataSecrets(t testing.TB, cosName string) []corev1.Secret {
	t.Helper()
	list := &corev1.SecretList{}
	if err := e.Client.List(context.Background(), list, client.InNamespace(SystemNamespace),
		client.MatchingLabels{olmv1.LabelRevisionName: naming.RevisionLabelValue(cosName)}); err != nil {
		t.Fatal(err)
	}
	sort.Slice(list.Items, func(i, j int) bool { return list.Items[i].Name < list.Items[j].Name })
	return list.Items
}

// WaitOwned waits until every object-data Secret of the ClusterObjectSet is controlled by it (the
// reconciler's Secret ownership) and returns them.
func (e *Environment) WaitOwned(t testing.TB, name string) []corev1.Secret {
	t.Helper()
	var secrets []corev1.Secret
	framework.Eventually(context.Background(), t, "the Secrets of "+name+" owned by it", func(ctx context.Context) (bool, string) {
		cos := &olmv1.ClusterObjectSet{}
		if err := e.Client.Get(ctx, client.ObjectKey{Name: name}, cos); err != nil {
			return false, err.Error()
		}
		secrets = e.ObjectDataSecrets(t, name)
		if len(secrets) == 0 {
			return false, "no Secrets"
		}
		for _, s := range secrets {
			if ref := metav1.GetControllerOf(&s); ref == nil || ref.UID != cos.UID {
				return false, "Secret " + s.Name + " not owned yet"
			}
		}
		return true, ""
	})
	return secrets
}

// DeleteWithSecrets deletes a ClusterObjectSet and waits until it and its object-data Secrets are
// gone (teardown by the reconciler, then the Secrets it owned, deleted as the garbage collector
// would: collectDependents). It first waits until the reconciler
// owns the Secrets, as an admin who deletes a ClusterObjectSet minutes after applying it finds them: a
// ClusterObjectSet deleted before that leaves its Secrets to the orphan sweep, by design.
func (e *Environment) DeleteWithSecrets(t testing.TB, name string) {
	t.Helper()
	ctx := context.Background()
	cos := &olmv1.ClusterObjectSet{ObjectMeta: metav1.ObjectMeta{Name: name}}
	err := e.Client.Get(ctx, client.ObjectKeyFromObject(cos), cos)
	if client.IgnoreNotFound(err) != nil {
		t.Fatal(err)
	}
	if err == nil && len(e.ObjectDataSecrets(t, name)) > 0 {
		e.WaitOwned(t, name)
	}
	uid := cos.UID
	if err := e.Client.Delete(ctx, cos); client.IgnoreNotFound(err) != nil {
		t.Fatal(err)
	}
	framework.Eventually(ctx, t, name+" and its Secrets gone", func(ctx context.Context) (bool, string) {
		err := e.Client.Get(ctx, client.ObjectKeyFromObject(cos), &olmv1.ClusterObjectSet{})
		if err == nil {
			// Name what teardown waits for: CRDs being deleted, with their finalizers and conditions.
			crds := &apiextensionsv1.CustomResourceDefinitionList{}
			var stuck []string
			if err := e.Client.List(ctx, crds); err == nil {
				for _, crd := range crds.Items {
					if crd.DeletionTimestamp != nil {
						stuck = append(stuck, fmt.Sprintf("%s (finalizers %v, conditions %v)", crd.Name, crd.Finalizers, crd.Status.Conditions))
					}
				}
			}
			return false, fmt.Sprintf("the ClusterObjectSet exists; CRDs being deleted: %v", stuck)
		}
		if !apierrors.IsNotFound(err) {
			return false, err.Error()
		}
		if left := e.ObjectDataSecrets(t, name); len(left) > 0 {
			// Once the ClusterObjectSet is gone, delete the Secrets it alone owned, as the garbage
			// collector would: after CRDs come and go the collector pauses for its discovery resync
			// (up to 30s a time) before it gets to them. What others own, or nobody, stays: the wait
			// names it.
			e.collectDependents(ctx, left, uid)
			var names []string
			for _, s := range left {
				names = append(names, fmt.Sprintf("%s (owners %v, deleting %v)", s.Name, s.OwnerReferences, s.DeletionTimestamp != nil))
			}
			return false, fmt.Sprintf("%d Secrets left: %v", len(left), names)
		}
		return true, ""
	})
}

// collectDependents deletes, under a UID precondition, the Secrets whose every owner is the deleted
// owner's UID; errors are left to the caller's wait, which lists the Secrets until they are gone.
func (e *Environment) collectDependents(ctx context.Context, secrets []corev1.Secret, owner types.UID) {
	if owner == "" {
		return
	}
	for i := range secrets {
		s := &secrets[i]
		if s.DeletionTimestamp != nil || len(s.OwnerReferences) == 0 {
			continue
		}
		alone := true
		for _, ref := range s.OwnerReferences {
			alone = alone && ref.UID == owner
		}
		if alone {
			_ = e.Client.Delete(ctx, s, client.Preconditions{UID: &s.UID})
		}
	}
}

// ResourceVersions maps Secret names to their resourceVersions: what tests compare to show that
// nothing was written.
func ResourceVersions(secrets []corev1.Secret) map[string]string {
	out := map[string]string{}
	for _, s := range secrets {
		out[s.Name] = s.ResourceVersion
	}
	return out
}

// CheckExternalized fails t unless stored has only refs, into typed, immutable, labelled object-data
// Secrets of SystemNamespace, and every ref resolves to the object of the same place in want.
func (e *Environment) CheckExternalized(t testing.TB, want, stored *olmv1.ClusterObjectSet) {
	t.Helper()
	if len(want.Spec.Phases) != len(stored.Spec.Phases) {
		t.Fatalf("stored %d phases, want %d", len(stored.Spec.Phases), len(want.Spec.Phases))
	}
	secrets := map[string]*corev1.Secret{}
	for i, p := range stored.Spec.Phases {
		if w := want.Spec.Phases[i]; p.Name != w.Name || len(p.Objects) != len(w.Objects) {
			t.Fatalf("phase %d: %s of %d objects, want %s of %d", i, p.Name, len(p.Objects), w.Name, len(w.Objects))
		}
		for j, o := range p.Objects {
			if !o.IsRef() {
				t.Errorf("phase %s object %d is still inline", p.Name, j)
				continue
			}
			sec, ok := secrets[o.Ref.Name]
			if !ok {
				sec = &corev1.Secret{}
				key := client.ObjectKey{Namespace: o.Ref.NamespaceOr(SystemNamespace), Name: o.Ref.Name}
				if err := e.Client.Get(context.Background(), key, sec); err != nil {
					t.Fatalf("phase %s object %d: %v", p.Name, j, err)
				}
				if sec.Type != olmv1.SecretTypeObjectData || sec.Immutable == nil || !*sec.Immutable ||
					sec.Labels[olmv1.LabelRevisionName] != naming.RevisionLabelValue(stored.Name) || sec.Namespace != SystemNamespace {
					t.Errorf("Secret %s: type %q, immutable %v, labels %v, namespace %s", sec.Name, sec.Type, sec.Immutable, sec.Labels, sec.Namespace)
				}
				secrets[o.Ref.Name] = sec
			}
			got, err := content.Resolve(sec.Data[o.Ref.Key], o.Ref.Key, content.MaxDecompressedSize)
			if err != nil {
				t.Fatalf("phase %s object %d: resolving: %v", p.Name, j, err)
			}
			if diff := cmp.Diff(want.Spec.Phases[i].Objects[j].Object.Object, got); diff != "" {
				t.Errorf("phase %s object %d resolves to another object (-want +got):\n%.3000s", p.Name, j, diff)
			}
		}
	}
}

// Conditions renders the conditions of a ClusterObjectSet for failure messages.
func Conditions(cos *olmv1.ClusterObjectSet) string {
	parts := make([]string, 0, len(cos.Status.Conditions))
	for _, cond := range cos.Status.Conditions {
		parts = append(parts, fmt.Sprintf("%s=%s/%s(%s)", cond.Type, cond.Status, cond.Reason, cond.Message))
	}
	return strings.Join(parts, " ")
}

// WaitForCondition waits until the ClusterObjectSet has the condition with status, and reason unless
// it is empty, observed at its current generation, and returns the ClusterObjectSet as it was then.
func (e *Environment) WaitForCondition(t testing.TB, name, condType string, status metav1.ConditionStatus, reason string) *olmv1.ClusterObjectSet {
	t.Helper()
	var cos *olmv1.ClusterObjectSet
	framework.Eventually(context.Background(), t, fmt.Sprintf("%s %s=%s/%s", name, condType, status, reason), func(ctx context.Context) (bool, string) {
		cos = &olmv1.ClusterObjectSet{}
		if err := e.Client.Get(ctx, client.ObjectKey{Name: name}, cos); err != nil {
			return false, err.Error()
		}
		cond := apimeta.FindStatusCondition(cos.Status.Conditions, condType)
		return cond != nil && cond.Status == status && (reason == "" || cond.Reason == reason) && cond.ObservedGeneration == cos.Generation, Conditions(cos)
	})
	return cos
}

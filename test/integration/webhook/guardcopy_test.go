package webhook_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	olmv1 "github.com/cos-externalizer/cos-externalizer/api/v1"
	"github.com/cos-externalizer/cos-externalizer/internal/naming"
	"github.com/cos-externalizer/cos-externalizer/internal/secretdata"
	"github.com/cos-externalizer/cos-externalizer/test/builders"
	"github.com/cos-externalizer/cos-externalizer/test/testenv"
)

// TestSecretGuardKeepsACopy (issue 35): before the Secret guard admits the delete of an object-data
// Secret of the system namespace, by anyone not exempt (the garbage collector above all), it writes
// the Secret's quarantine copy, so that the orphan sweep's restore can undo the delete for a
// ClusterObjectSet stored later with refs to it. A dry run, a refused delete, and Secrets the sweep
// never restores (another namespace, another type) leave no copy.
func TestSecretGuardKeepsACopy(t *testing.T) {
	ctx := context.Background()
	alice := asAlice(t)
	suffix := fmt.Sprint(time.Now().UnixNano() % 1e6)
	cos := builders.COS("guard-copy-"+suffix, builders.WithAnnotations(map[string]string{"cos-externalizer.io/externalize": "always"}),
		builders.WithPhase("configuration", builders.InlineConfigMaps("default", "guard-copy-"+suffix, 1)...))
	if err := testenv.Env.Client.Create(ctx, cos); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = testenv.Env.Client.Delete(context.Background(), cos) })
	ref := cos.Spec.Phases[0].Objects[0].Ref
	label := map[string]string{olmv1.LabelRevisionName: naming.RevisionLabelValue("nobody-" + suffix)}
	data := map[string][]byte{"k": []byte(`{"apiVersion":"v1","kind":"ConfigMap"}`)}

	for name, tc := range map[string]struct {
		secret   *corev1.Secret // created first, unless it exists (referenced)
		opts     []client.DeleteOption
		deleted  bool
		wantCopy bool
	}{
		"unreferenced object data of the system namespace": {
			secret:  &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: testenv.SystemNamespace, Name: "copied-" + suffix, Labels: label}, Type: olmv1.SecretTypeObjectData, Immutable: ptr.To(true), Data: data},
			deleted: true, wantCopy: true,
		},
		"a dry run": {
			secret: &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: testenv.SystemNamespace, Name: "dry-" + suffix, Labels: label}, Type: olmv1.SecretTypeObjectData, Immutable: ptr.To(true), Data: data},
			opts:   []client.DeleteOption{client.DryRunAll},
		},
		"referenced: refused": {
			secret: &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: testenv.SystemNamespace, Name: ref.Name}},
		},
		"object data of another namespace": {
			secret:  &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "elsewhere-" + suffix, Labels: label}, Type: olmv1.SecretTypeObjectData, Immutable: ptr.To(true), Data: data},
			deleted: true,
		},
		"labelled, of another type": {
			secret:  &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: testenv.SystemNamespace, Name: "opaque-" + suffix, Labels: label}, Data: data},
			deleted: true,
		},
	} {
		t.Run(name, func(t *testing.T) {
			s := tc.secret
			if s.Type != "" || len(s.Data) > 0 {
				if err := testenv.Env.Client.Create(ctx, s); err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { _ = testenv.Env.Client.Delete(context.Background(), s) })
			}
			// The Secret as stored (its uid names the copy).
			if err := testenv.Env.Client.Get(ctx, client.ObjectKeyFromObject(s), s); err != nil {
				t.Fatal(err)
			}
			err := alice.Delete(ctx, s, tc.opts...)
			switch {
			case tc.deleted && err != nil:
				t.Fatalf("deleting: %v", err)
			case !tc.deleted && len(tc.opts) == 0 && !apierrors.IsForbidden(err):
				t.Fatalf("deleting a referenced Secret: want Forbidden, got %v", err)
			case !tc.deleted && len(tc.opts) > 0 && err != nil:
				t.Fatalf("dry run: %v", err)
			}
			q := &corev1.Secret{}
			err = testenv.Env.Client.Get(ctx, client.ObjectKey{Namespace: s.Namespace, Name: secretdata.QuarantineName(s.UID)}, q)
			if apierrors.IsNotFound(err) {
				q = nil
			} else if err != nil {
				t.Fatal(err)
			}
			if q != nil {
				t.Cleanup(func() { _ = testenv.Env.Client.Delete(context.Background(), q) })
			}
			if got := q != nil; got != tc.wantCopy {
				t.Fatalf("a quarantine copy left: %t, want %t", got, tc.wantCopy)
			}
			if q == nil {
				return
			}
			restored, err := secretdata.Restored(q)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(s.Data, restored.Data); diff != "" {
				t.Errorf("the copy holds other data")
			}
			if diff := cmp.Diff(s.Labels, restored.Labels); diff != "" {
				t.Errorf("the copy restores other labels (-deleted +restored):\n%s", diff)
			}
		})
	}
}

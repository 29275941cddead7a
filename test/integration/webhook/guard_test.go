package webhook_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	admissionv1 "k8s.io/api/admission/v1"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"
	"sigs.k8s.io/yaml"

	olmv1 "github.com/cos-externalizer/cos-externalizer/api/v1"
	"github.com/cos-externalizer/cos-externalizer/internal/content"
	"github.com/cos-externalizer/cos-externalizer/internal/naming"
	"github.com/cos-externalizer/cos-externalizer/test/builders"
	"github.com/cos-externalizer/cos-externalizer/test/controlplane"
	"github.com/cos-externalizer/cos-externalizer/test/framework"
	"github.com/cos-externalizer/cos-externalizer/test/testenv"
	"github.com/cos-externalizer/cos-externalizer/webhook"
)

// asAlice returns a client that acts as alice, another cluster admin, not exempt from the Secret
// guard.
func asAlice(t *testing.T) client.Client {
	t.Helper()
	c, err := testenv.Env.As("alice")
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func TestSecretGuard(t *testing.T) {
	ctx := context.Background()
	alice := asAlice(t)
	cos := builders.COS("guarded", builders.WithAnnotations(map[string]string{"cos-externalizer.io/externalize": "always"}),
		builders.WithPhase("configuration", builders.InlineConfigMaps("default", "guarded", 2)...))
	if err := testenv.Env.Client.Create(ctx, cos); err != nil {
		t.Fatal(err)
	}
	// Owned before anything else happens: a delete that leaves the Secrets behind (below) then
	// finds an owner reference to remove, with nothing adding one back.
	settledSecrets(t, cos)
	ref := cos.Spec.Phases[0].Objects[0].Ref
	referenced := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: testenv.SystemNamespace, Name: ref.Name}}

	err := alice.Delete(ctx, referenced)
	if err == nil || !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), "holds objects of ClusterObjectSet guarded") {
		t.Fatalf("deleting a referenced Secret: want a refusal naming the ClusterObjectSet, got %v", err)
	}
	// An unreferenced labelled object-data Secret, and a labelled Secret of another type, may go.
	for _, s := range []*corev1.Secret{
		{ObjectMeta: metav1.ObjectMeta{Namespace: testenv.SystemNamespace, Name: "unreferenced",
			Labels: map[string]string{olmv1.LabelRevisionName: naming.RevisionLabelValue("guarded")}},
			Type: olmv1.SecretTypeObjectData, Immutable: ptr.To(true), Data: map[string][]byte{"k": []byte("{}")}},
		{ObjectMeta: metav1.ObjectMeta{Namespace: testenv.SystemNamespace, Name: "opaque-labelled",
			Labels: map[string]string{olmv1.LabelRevisionName: naming.RevisionLabelValue("guarded")}},
			Data: map[string][]byte{"k": []byte("v")}},
	} {
		if err := testenv.Env.Client.Create(ctx, s); err != nil {
			t.Fatal(err)
		}
		if err := alice.Delete(ctx, s); err != nil {
			t.Errorf("deleting %s: %v", s.Name, err)
		}
	}
	// Once the ClusterObjectSet is gone, its Secret may be deleted. It is deleted leaving its
	// Secrets behind (orphan propagation), so that the Secret is still there to delete: the allow path
	// itself is exercised, whether or not the manager's cache has seen the deletion yet.
	if err := testenv.Env.Client.Delete(ctx, cos, client.PropagationPolicy(metav1.DeletePropagationOrphan)); err != nil {
		t.Fatal(err)
	}
	framework.WaitGone(ctx, t, testenv.Env.Client, cos)
	if err := alice.Delete(ctx, referenced); err != nil {
		t.Errorf("deleting the Secret of a deleted ClusterObjectSet: %v", err)
	}
}

// TestSecretGuardStaleCache: the guard's cache still lists a ClusterObjectSet that is gone; the guard
// confirms with a live read and allows the delete.
func TestSecretGuardStaleCache(t *testing.T) {
	ctx := context.Background()
	cos := builders.COS("guard-stale", builders.WithAnnotations(map[string]string{"cos-externalizer.io/externalize": "always"}),
		builders.WithPhase("configuration", builders.InlineConfigMaps("default", "guard-stale", 1)...))
	if err := testenv.Env.Client.Create(ctx, cos); err != nil {
		t.Fatal(err)
	}
	sec := &corev1.Secret{}
	if err := testenv.Env.Client.Get(ctx, client.ObjectKey{Namespace: testenv.SystemNamespace, Name: cos.Spec.Phases[0].Objects[0].Ref.Name}, sec); err != nil {
		t.Fatal(err)
	}
	stale := frozenCache{items: []olmv1.ClusterObjectSet{*cos.DeepCopy()}}
	guard := &webhook.SecretGuard{Cache: stale, APIReader: testenv.Env.Client, Metrics: webhook.NewMetrics(),
		Options: webhook.Options{SystemNamespace: testenv.SystemNamespace}}
	deleteOf := func() admission.Request {
		raw, err := json.Marshal(sec)
		if err != nil {
			t.Fatal(err)
		}
		return admission.Request{AdmissionRequest: admissionv1.AdmissionRequest{
			Operation: admissionv1.Delete, Namespace: sec.Namespace, // a DeleteCollection item: no name
			OldObject: runtime.RawExtension{Raw: raw}, UserInfo: authenticationv1.UserInfo{Username: "alice"},
		}}
	}
	if resp := guard.Handle(ctx, deleteOf()); resp.Allowed {
		t.Fatal("the guard allowed deleting a Secret a live ClusterObjectSet references")
	}
	if err := testenv.Env.Client.Delete(ctx, cos, client.PropagationPolicy(metav1.DeletePropagationOrphan)); err != nil {
		t.Fatal(err)
	}
	framework.WaitGone(ctx, t, testenv.Env.Client, cos)
	if resp := guard.Handle(ctx, deleteOf()); !resp.Allowed {
		t.Errorf("a stale cache refused: %v", resp.Result)
	}
}

// frozenCache is a cache that never sees a change: it lists the ClusterObjectSets it was given.
type frozenCache struct{ items []olmv1.ClusterObjectSet }

func (f frozenCache) Get(context.Context, client.ObjectKey, client.Object, ...client.GetOption) error {
	return errors.New("frozenCache: Get is not used by the guard")
}

func (f frozenCache) List(_ context.Context, list client.ObjectList, _ ...client.ListOption) error {
	l, ok := list.(*olmv1.ClusterObjectSetList)
	if !ok {
		return fmt.Errorf("frozenCache: cannot list %T", list)
	}
	l.Items = append([]olmv1.ClusterObjectSet(nil), f.items...)
	return nil
}

// TestSecretGuardBypasses: a bulk delete by label, and removing the label or the owner references
// first, are refused for referenced Secrets; harmless updates are not.
func TestSecretGuardBypasses(t *testing.T) {
	ctx := context.Background()
	alice := asAlice(t)
	testenv.Env.RemoveAfter(t, "guard-bypass")
	cos := builders.COS("guard-bypass", builders.WithAnnotations(map[string]string{"cos-externalizer.io/externalize": "always"}),
		builders.WithPhase("configuration", builders.InlineConfigMaps("default", "guard-bypass", 2)...))
	if err := testenv.Env.Client.Create(ctx, cos); err != nil {
		t.Fatal(err)
	}
	cos = getCOS(t, cos.Name)
	settledSecrets(t, cos)
	label := client.MatchingLabels{olmv1.LabelRevisionName: naming.RevisionLabelValue(cos.Name)}
	key := client.ObjectKey{Namespace: testenv.SystemNamespace, Name: cos.Spec.Phases[0].Objects[0].Ref.Name}

	err := alice.DeleteAllOf(ctx, &corev1.Secret{}, client.InNamespace(testenv.SystemNamespace), label)
	if err == nil || !strings.Contains(err.Error(), "holds objects of ClusterObjectSet guard-bypass") {
		t.Errorf("a bulk delete of referenced Secrets: want the guard's refusal, got %v", err)
	}
	if n := len(testenv.Env.ObjectDataSecrets(t, cos.Name)); n == 0 {
		t.Fatal("a bulk delete removed the referenced Secrets")
	}

	tests := map[string]struct {
		change func(*corev1.Secret)
		// refusal is what the guard's refusal says the update would do; "": admitted.
		refusal string
	}{
		"remove the label": {func(s *corev1.Secret) { delete(s.Labels, olmv1.LabelRevisionName) }, "cannot change its " + olmv1.LabelRevisionName + " label"},
		"change the label": {func(s *corev1.Secret) { s.Labels[olmv1.LabelRevisionName] = "someone-else" }, "cannot change its " + olmv1.LabelRevisionName + " label"},
		"drop the owner":   {func(s *corev1.Secret) { s.OwnerReferences = nil }, "cannot remove its owner reference to ClusterObjectSet guard-bypass"},
		"point the owner elsewhere": {func(s *corev1.Secret) {
			// The ClusterObjectSet's reference: other owners may come first (an earlier run's "add an
			// owner", kept on the reused Secret until the collector drops it).
			for i := range s.OwnerReferences {
				if s.OwnerReferences[i].UID == cos.UID {
					s.OwnerReferences[i].UID = "00000000-0000-0000-0000-000000000000"
				}
			}
		}, "cannot remove its owner reference to ClusterObjectSet guard-bypass"},
		"add an annotation": {func(s *corev1.Secret) { metav1.SetMetaDataAnnotation(&s.ObjectMeta, "example.com/note", "hi") }, ""},
		"add an owner": {func(s *corev1.Secret) {
			s.OwnerReferences = append(s.OwnerReferences, metav1.OwnerReference{APIVersion: "v1", Kind: "ConfigMap", Name: "keeper", UID: "00000000-0000-0000-0000-000000000001"})
		}, ""},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			sec := &corev1.Secret{}
			if err := testenv.Env.Client.Get(ctx, key, sec); err != nil {
				t.Fatal(err)
			}
			patch := client.MergeFrom(sec.DeepCopy())
			tc.change(sec)
			err := alice.Patch(ctx, sec, patch)
			switch {
			case tc.refusal != "" && (err == nil || !strings.Contains(err.Error(), tc.refusal)):
				t.Errorf("want the guard's refusal %q, got %v", tc.refusal, err)
			case tc.refusal == "" && err != nil:
				t.Errorf("refused: %v", err)
			}
		})
	}
	got := &corev1.Secret{}
	if err := testenv.Env.Client.Get(ctx, key, got); err != nil {
		t.Fatal(err)
	}
	if got.Labels[olmv1.LabelRevisionName] != naming.RevisionLabelValue(cos.Name) || metav1.GetControllerOf(got) == nil || metav1.GetControllerOf(got).UID != cos.UID {
		t.Errorf("the referenced Secret changed: labels %v, owners %v", got.Labels, got.OwnerReferences)
	}
}

// TestDeletingANamespaceOfReferencedSecretsDoesNotWedge: kube-controller-manager's namespace
// controller, under its own service account, empties a namespace whose Secrets a live
// ClusterObjectSet references: it is exempt, so the namespace goes away.
func TestDeletingANamespaceOfReferencedSecretsDoesNotWedge(t *testing.T) {
	ctx := context.Background()
	testenv.Env.RemoveAfter(t, "guard-namespace")
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "guard-namespace"}}
	if err := testenv.Env.Client.Create(ctx, ns); err != nil {
		t.Fatal(err)
	}
	cm := builders.ConfigMap("default", "in-guarded-namespace", map[string]string{"a": "b"})
	data, err := content.Canonical(cm.Object)
	if err != nil {
		t.Fatal(err)
	}
	cos := builders.COS("guard-namespace", builders.WithPhase("configuration", builders.Ref("data", ns.Name, content.Key(data))))
	sec := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns.Name, Name: "data",
		Labels: map[string]string{olmv1.LabelRevisionName: naming.RevisionLabelValue(cos.Name)}},
		Type: olmv1.SecretTypeObjectData, Immutable: ptr.To(true), Data: map[string][]byte{content.Key(data): data}}
	if err := testenv.Env.Client.Create(ctx, sec); err != nil {
		t.Fatal(err)
	}
	if err := testenv.Env.Client.Create(ctx, cos); err != nil {
		t.Fatal(err)
	}
	if err := asAlice(t).Delete(ctx, sec); err == nil || !apierrors.IsForbidden(err) {
		t.Fatalf("deleting a Secret that a live ClusterObjectSet references in another namespace: %v", err)
	}
	// The manager gone (its Pods are deleted first when its own namespace goes, or OLM is uninstalled
	// beside webhook-only): a second copy of the generated guard, for this namespace only, that
	// nobody answers. The exemption is in its matchConditions, so the namespace controller never
	// reaches it.
	deadGuard(t, ns.Name) // returns once it is in effect (its probe fails to call it)
	// Both guards refuse alice (the API server calls them in parallel and reports either answer).
	if err := asAlice(t).Delete(ctx, sec); err == nil {
		t.Fatal("deleting a referenced Secret with an unanswered guard was admitted")
	}
	if err := testenv.Env.Client.Delete(ctx, ns); err != nil {
		t.Fatal(err)
	}
	framework.WaitGone(ctx, t, testenv.Env.Client, ns)
}

// deadGuard installs, until the test ends, a copy of the generated secret guard (its rules,
// objectSelector and matchConditions) that calls an address nobody answers, for the namespace ns
// only: the guard of a manager that is gone.
func deadGuard(t *testing.T, ns string) {
	t.Helper()
	ctx := context.Background()
	file, err := controlplane.WebhookManifests()
	if err != nil {
		t.Fatal(err)
	}
	raw, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	var guard *admissionregistrationv1.ValidatingWebhook
	for _, doc := range strings.Split(string(raw), "\n---\n") {
		wc := &admissionregistrationv1.ValidatingWebhookConfiguration{}
		if err := yaml.Unmarshal([]byte(doc), wc); err != nil || wc.Kind != "ValidatingWebhookConfiguration" {
			continue
		}
		for i := range wc.Webhooks {
			if wc.Webhooks[i].Name == webhook.SecretGuardName {
				guard = &wc.Webhooks[i]
			}
		}
	}
	if guard == nil {
		t.Fatal("no secret guard in the generated webhook configuration")
	}
	url := "https://127.0.0.1:1" + webhook.SecretGuardPath
	guard.ClientConfig = admissionregistrationv1.WebhookClientConfig{URL: &url}
	guard.NamespaceSelector = &metav1.LabelSelector{MatchLabels: map[string]string{"kubernetes.io/metadata.name": ns}}
	guard.TimeoutSeconds = ptr.To[int32](2)
	dead := &admissionregistrationv1.ValidatingWebhookConfiguration{ObjectMeta: metav1.ObjectMeta{Name: "dead-guard-" + ns},
		Webhooks: []admissionregistrationv1.ValidatingWebhook{*guard}}
	if err := testenv.Env.Client.Create(ctx, dead); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := testenv.Env.Client.Delete(context.Background(), dead); client.IgnoreNotFound(err) != nil {
			t.Error(err)
		}
	})
	// The API server's webhook configuration is watched: wait until the dead guard answers for it.
	probe := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "dead-guard-probe",
		Labels: map[string]string{olmv1.LabelRevisionName: "nobody"}}, Type: olmv1.SecretTypeObjectData}
	if err := testenv.Env.Client.Create(ctx, probe); err != nil {
		t.Fatal(err)
	}
	framework.Eventually(ctx, t, "the dead guard to take effect", func(ctx context.Context) (bool, string) {
		p := probe.DeepCopy()
		p.Annotations = map[string]string{"probe": time.Now().String()}
		p.Labels = map[string]string{olmv1.LabelRevisionName: "changed"}
		err := asAlice(t).Update(ctx, p)
		return err != nil && strings.Contains(err.Error(), "failed calling webhook"), fmt.Sprintf("update: %v", err)
	})
}

func TestWarningsForMissingUserRefs(t *testing.T) {
	cos := builders.COS("user-refs", builders.WithPhase("configuration", builders.Ref("does-not-exist", "", "k")))
	testenv.Env.RemoveAfter(t, cos.Name)
	_, stderr := mustKubectl(t, nil, "create", "-f", writeJSON(t, cos))
	if !strings.Contains(stderr, "spec.phases[0].objects[0].ref: Secret "+testenv.SystemNamespace+"/does-not-exist does not exist") {
		t.Errorf("no warning about the missing Secret; stderr: %s", stderr)
	}
}

func TestMetricsExposed(t *testing.T) {
	body, err := testenv.ScrapeMetrics(context.Background(), manager.MetricsURL)
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range []string{
		"cos_externalizer_objects_externalized_total", "cos_externalizer_externalized_inline_bytes_total",
		"cos_externalizer_externalized_stored_bytes_total", "cos_externalizer_secrets_written_total",
		"cos_externalizer_dry_runs_total", "cos_externalizer_admission_refusals_total",
		"cos_externalizer_admission_duration_seconds_bucket",
	} {
		if !strings.Contains(body, m) {
			t.Errorf("metric %s not exposed", m)
		}
	}
}

// TestPreCreatedSecretIsNotTrusted: a Secret that already exists under a name the webhook needs is
// used only when it is exactly what the webhook would write.
func TestPreCreatedSecretIsNotTrusted(t *testing.T) {
	ctx := context.Background()
	cos := builders.COS("squatted", builders.WithAnnotations(map[string]string{"cos-externalizer.io/externalize": "always"}),
		builders.WithPhase("configuration", builders.InlineConfigMaps("default", "squatted", 2)...))
	plan, err := testenv.PlannedSecrets(cos)
	if err != nil {
		t.Fatal(err)
	}
	planned := plan.Secrets[0]
	// What an earlier run (-count) left: the ClusterObjectSet with its Secrets, or the squatter.
	testenv.Env.Fresh(t, cos.Name)
	framework.Delete(ctx, t, testenv.Env.Client, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: testenv.SystemNamespace, Name: planned.Name}})
	squatter := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: testenv.SystemNamespace, Name: planned.Name,
			Labels: map[string]string{olmv1.LabelRevisionName: naming.RevisionLabelValue(cos.Name)}},
		Type: olmv1.SecretTypeObjectData, Immutable: ptr.To(true),
		Data: map[string][]byte{"other": []byte(`{"kind":"Secret"}`)},
	}
	if err := testenv.Env.Client.Create(ctx, squatter); err != nil {
		t.Fatal(err)
	}
	err = testenv.Env.Client.Create(ctx, cos.DeepCopy())
	if err == nil || !strings.Contains(err.Error(), "already exists and cannot be used") || !strings.Contains(err.Error(), "its data differs") {
		t.Fatalf("a squatted Secret name was not refused clearly: %v", err)
	}
	if strings.Contains(err.Error(), `"kind":"Secret"`) {
		t.Errorf("the refusal quotes the squatter's content: %v", err)
	}
	// The same content, exactly as the webhook would write it, is accepted.
	if err := testenv.Env.Client.Delete(ctx, squatter); err != nil {
		t.Fatal(err)
	}
	exact := squatter.DeepCopy()
	exact.ResourceVersion, exact.UID, exact.Data = "", "", planned.Data
	if err := testenv.Env.Client.Create(ctx, exact); err != nil {
		t.Fatal(err)
	}
	if err := testenv.Env.Client.Create(ctx, cos.DeepCopy()); err != nil {
		t.Fatalf("a Secret with exactly the planned content was not accepted: %v", err)
	}
}

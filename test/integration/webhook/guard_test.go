package webhook_test

import (
	"context"
	"io"
	"net/http"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	olmv1 "github.com/cos-externalizer/cos-externalizer/api/v1"
	"github.com/cos-externalizer/cos-externalizer/internal/content"
	"github.com/cos-externalizer/cos-externalizer/internal/scheme"
	"github.com/cos-externalizer/cos-externalizer/test/builders"
	"github.com/cos-externalizer/cos-externalizer/test/testenv"
)

// asUser returns a client that acts as another cluster admin, not exempt from the Secret guard.
func asUser(t *testing.T, name string) client.Client {
	t.Helper()
	cfg := rest.CopyConfig(testenv.Env.Config)
	cfg.Impersonate = rest.ImpersonationConfig{UserName: name, Groups: []string{"system:masters"}}
	c, err := client.New(cfg, client.Options{Scheme: scheme.New()})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func TestSecretGuard(t *testing.T) {
	ctx := context.Background()
	alice := asUser(t, "alice")
	cos := builders.COS("guarded", builders.WithAnnotations(map[string]string{"cos-externalizer.io/externalize": "always"}),
		builders.WithPhase("configuration", builders.InlineConfigMaps("default", "guarded", 2)...))
	if err := testenv.Env.Client.Create(ctx, cos); err != nil {
		t.Fatal(err)
	}
	ref := cos.Spec.Phases[0].Objects[0].Ref
	referenced := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: testenv.SystemNamespace, Name: ref.Name}}

	err := alice.Delete(ctx, referenced)
	if err == nil || !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), "holds objects of ClusterObjectSet guarded") {
		t.Fatalf("deleting a referenced Secret: want a refusal naming the ClusterObjectSet, got %v", err)
	}
	// An unreferenced labelled object-data Secret, and a labelled Secret of another type, may go.
	for _, s := range []*corev1.Secret{
		{ObjectMeta: metav1.ObjectMeta{Namespace: testenv.SystemNamespace, Name: "unreferenced",
			Labels: map[string]string{olmv1.LabelRevisionName: content.RevisionLabelValue("guarded")}},
			Type: olmv1.SecretTypeObjectData, Immutable: ptr.To(true), Data: map[string][]byte{"k": []byte("{}")}},
		{ObjectMeta: metav1.ObjectMeta{Namespace: testenv.SystemNamespace, Name: "opaque-labelled",
			Labels: map[string]string{olmv1.LabelRevisionName: content.RevisionLabelValue("guarded")}},
			Data: map[string][]byte{"k": []byte("v")}},
	} {
		if err := testenv.Env.Client.Create(ctx, s); err != nil {
			t.Fatal(err)
		}
		if err := alice.Delete(ctx, s); err != nil {
			t.Errorf("deleting %s: %v", s.Name, err)
		}
	}
	// Once the ClusterObjectSet is gone, its Secret may be deleted.
	if err := testenv.Env.Client.Delete(ctx, cos); err != nil {
		t.Fatal(err)
	}
	if err := alice.Delete(ctx, referenced); err != nil && !apierrors.IsNotFound(err) {
		t.Errorf("deleting the Secret of a deleted ClusterObjectSet: %v", err)
	}
}

func TestWarningsForMissingUserRefs(t *testing.T) {
	cos := builders.COS("user-refs", builders.WithPhase("configuration", builders.Ref("does-not-exist", "", "k")))
	_, stderr := mustKubectl(t, nil, "create", "-f", writeJSON(t, cos))
	if !strings.Contains(stderr, "spec.phases[0].objects[0].ref: Secret "+testenv.SystemNamespace+"/does-not-exist does not exist") {
		t.Errorf("no warning about the missing Secret; stderr: %s", stderr)
	}
}

func TestMetricsExposed(t *testing.T) {
	resp, err := http.Get(manager.MetricsURL) //nolint:noctx // loopback test
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	for _, m := range []string{
		"cos_externalizer_objects_externalized_total", "cos_externalizer_externalized_inline_bytes_total",
		"cos_externalizer_externalized_stored_bytes_total", "cos_externalizer_secrets_written_total",
		"cos_externalizer_dry_runs_total", "cos_externalizer_admission_refusals_total",
		"cos_externalizer_admission_duration_seconds_bucket",
	} {
		if !strings.Contains(string(body), m) {
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
	in := content.Input{Phases: []content.PhaseInput{{Name: "configuration"}}}
	for _, o := range cos.Spec.Phases[0].Objects {
		in.Phases[0].Objects = append(in.Phases[0].Objects, content.ObjectInput{Object: o.Object.Object})
	}
	plan, err := content.PlanFor(cos.Name, in, content.Options{})
	if err != nil {
		t.Fatal(err)
	}
	planned := plan.Secrets[0]
	squatter := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: testenv.SystemNamespace, Name: planned.Name,
			Labels: map[string]string{olmv1.LabelRevisionName: content.RevisionLabelValue(cos.Name)}},
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

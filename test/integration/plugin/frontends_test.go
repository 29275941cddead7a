package plugin_test

import (
	"context"
	"errors"
	"fmt"
	"hash/crc32"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	olmv1 "github.com/cos-externalizer/cos-externalizer/api/v1"
	"github.com/cos-externalizer/cos-externalizer/test/builders"
	"github.com/cos-externalizer/cos-externalizer/test/corpus"
	"github.com/cos-externalizer/cos-externalizer/test/testenv"
	"github.com/cos-externalizer/cos-externalizer/webhook/admission"
)

// frontEndOutcome is what one front end made of a ClusterObjectSet: what both must agree on.
type frontEndOutcome struct {
	// Causes are the field errors of an Invalid refusal, sorted; Refusal is any other refusal's
	// reason as the pipeline words it.
	Causes  []string
	Refusal string
	// Warnings are the pipeline's (admission.WarningPrefix), but for the webhook's summary of what it
	// externalized, which the plugin prints as its own line.
	Warnings []string
	// Spec is the stored spec after the request; Secrets the ClusterObjectSet's object-data Secrets.
	Spec    *olmv1.ClusterObjectSetSpec
	Secrets []frontEndSecret
}

// frontEndSecret is an object-data Secret but for what the API server and the reconciler set.
type frontEndSecret struct {
	Name      string
	Labels    map[string]string
	Type      corev1.SecretType
	Immutable bool
	Data      map[string][]byte
}

// frontEndCase is one input: stored (created through the API server first, nil: none) and secrets
// (created first) are what the request finds; submitted is created, or updates stored.
type frontEndCase struct {
	stored    *olmv1.ClusterObjectSet
	secrets   []*corev1.Secret
	submitted *olmv1.ClusterObjectSet
	// refused: the request must be refused; warnings and hasSecrets: it must give that many warnings
	// and leave Secrets (or none), unless warnings is -1 (the corpus).
	refused    bool
	warnings   int
	hasSecrets bool
}

// TestFrontEndsAgree sends the same inputs through the webhook (a create or update through the API
// server) and through kubectl cos apply, under the same name one after the other, and compares the
// refusals, warnings, stored specs and Secrets: both run webhook/admission, and the differences
// between their translations must not show. Refusals: the invalid creates and updates of the corpus
// (phases immutable among them) and a Secret that is not ours; warnings: refs to missing Secrets and
// the heal of a stored ClusterObjectSet whose Secrets are gone.
func TestFrontEndsAgree(t *testing.T) {
	ns := "frontends"
	testenv.Env.EnsureNamespace(t, ns)
	always := builders.WithAnnotations(map[string]string{admission.Annotation: string(admission.ModeAlways)})
	// Archived at creation: the reconciler does not roll the objects out, so the two front ends'
	// ClusterObjectSets never contend for them.
	archived := builders.WithLifecycleState(olmv1.LifecycleStateArchived)
	inline := func(name string, opts ...builders.Option) *olmv1.ClusterObjectSet {
		return builders.COS(name, append([]builders.Option{archived, builders.WithPhase("configuration", builders.InlineConfigMaps(ns, "cm", 3)...)}, opts...)...)
	}
	userSecret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "given"}, Type: olmv1.SecretTypeObjectData,
		Immutable: ptr.To(true), Data: map[string][]byte{"k": []byte(`{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"given","namespace":"frontends"}}`)}}
	if err := c().Create(ctx, userSecret); client.IgnoreAlreadyExists(err) != nil {
		t.Fatal(err)
	}
	restored := func(name string) *olmv1.ClusterObjectSet {
		s, _, err := testenv.StoredForm(inline(name, always))
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	notOurs := func(name string) *corev1.Secret {
		plan, err := testenv.PlannedSecrets(inline(name, always))
		if err != nil {
			t.Fatal(err)
		}
		return &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: testenv.SystemNamespace, Name: plan.Secrets[0].Name},
			Type: olmv1.SecretTypeObjectData, Immutable: ptr.To(true), Data: map[string][]byte{"other": []byte("{}")}}
	}

	cases := map[string]func(name string) frontEndCase{
		"externalized, with a given ref": func(name string) frontEndCase {
			// The given ref is outside the system namespace: not read, and said so.
			return frontEndCase{submitted: inline(name, always, builders.WithPhase("given", builders.Ref("given", ns, "k"))), hasSecrets: true, warnings: 1}
		},
		"small, stays inline": func(name string) frontEndCase { return frontEndCase{submitted: inline(name)} },
		"refs only, to missing Secrets and keys": func(name string) frontEndCase {
			return frontEndCase{submitted: builders.COS(name, archived, builders.WithPhase("p",
				builders.Ref("absent-"+name, "", "k"), builders.Ref("given", ns, "nokey"), builders.Ref("given", ns, "k"))), warnings: 2}
		},
		"re-applied: the stored refs stand": func(name string) frontEndCase {
			return frontEndCase{stored: inline(name, always), submitted: inline(name, always, builders.WithLabels(map[string]string{"again": "yes"})), hasSecrets: true}
		},
		"heals the missing Secrets of the stored refs": func(name string) frontEndCase {
			return frontEndCase{stored: restored(name), submitted: inline(name, always), warnings: 1, hasSecrets: true}
		},
		"an invalid update of a healable one writes nothing": func(name string) frontEndCase {
			return frontEndCase{stored: restored(name), submitted: inline(name, always, builders.WithProgressDeadline(5)), refused: true}
		},
		"other objects are refused: phases are immutable": func(name string) frontEndCase {
			return frontEndCase{stored: inline(name, always), submitted: builders.COS(name, archived, always,
				builders.WithPhase("configuration", builders.InlineConfigMaps(ns, "other", 3)...)), refused: true, hasSecrets: true}
		},
		"a Secret that is not ours is refused": func(name string) frontEndCase {
			return frontEndCase{secrets: []*corev1.Secret{notOurs(name)}, submitted: inline(name, always), refused: true}
		},
	}
	for key, tc := range corpus.Cases() {
		if len(tc.Want) == 0 {
			continue
		}
		cases["corpus: "+key] = func(name string) frontEndCase {
			c := frontEndCase{submitted: withName(tc.New, name, always), refused: true, warnings: -1}
			if tc.Old != nil {
				c.stored = withName(tc.Old, name, always)
			}
			return c
		}
	}

	for key, build := range cases {
		t.Run(key, func(t *testing.T) {
			name := fmt.Sprintf("fe-%08x", crc32.ChecksumIEEE([]byte(key)))
			testenv.Env.RemoveWithSecretsAfter(t, name)
			tc := build(name)
			byWebhook := throughFrontEnd(t, tc, name, viaWebhook)
			testenv.Env.DeleteWithSecrets(t, name)
			byPlugin := throughFrontEnd(t, tc, name, viaPlugin)
			if diff := cmp.Diff(byWebhook, byPlugin); diff != "" {
				t.Errorf("the front ends differ (-webhook +plugin):\n%.4000s", diff)
			}
			if refused := byWebhook.Causes != nil || byWebhook.Refusal != ""; refused != tc.refused {
				t.Errorf("refused: %v, want %v", refused, tc.refused)
			}
			if tc.warnings >= 0 && (len(byWebhook.Warnings) != tc.warnings || (len(byWebhook.Secrets) > 0) != tc.hasSecrets) {
				t.Errorf("%d warnings and %d Secrets, want %d warnings and Secrets %v: %q", len(byWebhook.Warnings), len(byWebhook.Secrets), tc.warnings, tc.hasSecrets, byWebhook.Warnings)
			}
		})
	}
}

// throughFrontEnd prepares what tc's request finds, sends it with send and returns the outcome.
func throughFrontEnd(t *testing.T, tc frontEndCase, name string, send func(*testing.T, frontEndCase, string) (warnings []string, err error)) frontEndOutcome {
	t.Helper()
	for _, s := range tc.secrets {
		s := s.DeepCopy()
		if err := c().Create(ctx, s); client.IgnoreAlreadyExists(err) != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = c().Delete(context.Background(), s) })
	}
	var before []frontEndSecret
	if tc.stored != nil {
		if err := c().Create(ctx, tc.stored.DeepCopy()); err != nil {
			t.Fatalf("creating the stored ClusterObjectSet: %v", err)
		}
		before = secretsOf(t, name)
	}
	warnings, err := send(t, tc, name)
	var out frontEndOutcome
	for _, w := range warnings {
		if strings.HasPrefix(w, admission.WarningPrefix) && !strings.HasPrefix(w, admission.WarningPrefix+"externalized ") {
			out.Warnings = append(out.Warnings, w)
		}
	}
	if err != nil {
		var status apierrors.APIStatus
		if errors.As(err, &status) && status.Status().Reason == metav1.StatusReasonInvalid && status.Status().Details != nil {
			out.Causes = []string{}
			for _, c := range status.Status().Details.Causes {
				out.Causes = append(out.Causes, c.Field+": "+c.Message)
			}
			slices.Sort(out.Causes)
		} else {
			out.Refusal = conflictText.FindString(err.Error())
			if out.Refusal == "" {
				t.Fatalf("neither Invalid nor a Secret conflict: %v", err)
			}
		}
		if after := secretsOf(t, name); !cmp.Equal(before, after) {
			t.Errorf("the refused request changed the Secrets (-before +after):\n%s", cmp.Diff(before, after))
		}
	}
	stored := &olmv1.ClusterObjectSet{}
	switch err := c().Get(ctx, client.ObjectKey{Name: name}, stored); {
	case err == nil:
		out.Spec = &stored.Spec
	case !apierrors.IsNotFound(err):
		t.Fatal(err)
	}
	out.Secrets = secretsOf(t, name)
	return out
}

// conflictText is the pipeline's refusal of a Secret that is not ours, as both front ends quote it.
var conflictText = regexp.MustCompile(`secret \S+ already exists and cannot be used: [^;]*`)

// viaWebhook creates the ClusterObjectSet, or updates the stored one, through the API server.
func viaWebhook(t *testing.T, tc frontEndCase, name string) ([]string, error) {
	t.Helper()
	cl, rec := testenv.Env.WarningClient(t)
	if tc.stored == nil {
		err := cl.Create(ctx, tc.submitted.DeepCopy())
		return rec.List(), err
	}
	// The reconciler writes the stored one meanwhile (finalizer, status): update the latest version.
	// An attempt that conflicts was still admitted, and may have healed: its warnings count, as kubectl
	// shows them; a retry that finds the work done adds none, one that repeats it the same again.
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		live := &olmv1.ClusterObjectSet{}
		if err := c().Get(ctx, client.ObjectKey{Name: name}, live); err != nil {
			return err
		}
		obj := tc.submitted.DeepCopy()
		obj.ResourceVersion = live.ResourceVersion
		return cl.Update(ctx, obj)
	})
	var warnings []string // each once, in the order first seen
	for _, w := range rec.List() {
		if !slices.Contains(warnings, w) {
			warnings = append(warnings, w)
		}
	}
	return warnings, err
}

// viaPlugin runs kubectl cos apply on the ClusterObjectSet.
func viaPlugin(t *testing.T, tc frontEndCase, _ string) ([]string, error) {
	t.Helper()
	r := plugin(t, "apply", "-f", testenv.WriteJSON(t, tc.submitted, "cos.json"))
	var warnings []string
	for line := range strings.SplitSeq(r.stderr, "\n") {
		if w, ok := strings.CutPrefix(line, "Warning: "); ok {
			warnings = append(warnings, w)
		}
	}
	return warnings, r.err
}

func secretsOf(t *testing.T, name string) []frontEndSecret {
	t.Helper()
	var out []frontEndSecret
	for _, s := range testenv.Env.ObjectDataSecrets(t, name) {
		out = append(out, frontEndSecret{Name: s.Name, Labels: s.Labels, Type: s.Type, Immutable: ptr.Deref(s.Immutable, false), Data: s.Data})
	}
	return out
}

// withName is a copy of c named name, changed by opts.
func withName(c *olmv1.ClusterObjectSet, name string, opts ...builders.Option) *olmv1.ClusterObjectSet {
	c = c.DeepCopy()
	c.Name = name
	for _, o := range opts {
		o(c)
	}
	return c
}

package webhook_test

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"os/exec"
	"regexp"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	olmv1 "github.com/cos-externalizer/cos-externalizer/api/v1"
	"github.com/cos-externalizer/cos-externalizer/internal/content"
	"github.com/cos-externalizer/cos-externalizer/internal/naming"
	"github.com/cos-externalizer/cos-externalizer/internal/secretdata"
	"github.com/cos-externalizer/cos-externalizer/test/builders"
	"github.com/cos-externalizer/cos-externalizer/test/framework"
	"github.com/cos-externalizer/cos-externalizer/test/testenv"
	"github.com/cos-externalizer/cos-externalizer/webhook/admission"
)

// staleClass is one way a stored ClusterObjectSet moves on between a client's read and its update,
// with what the stale update then carries: an update the webhooks, judging it against the newer
// stored object, would refuse or write Secrets for, where the API server alone answers 409 Conflict.
type staleClass struct {
	// prepare creates the ClusterObjectSet name (and what it needs) in env, reads it, moves the stored
	// one on, and returns the read with the stale update's changes: what the client sends.
	prepare func(t *testing.T, env *testenv.Environment, name string) *olmv1.ClusterObjectSet
	// settle: once prepared, the Secrets of name are to be owned by it before the snapshot (the
	// manager's Secret ownership writes them meanwhile).
	settle bool
}

// staleSend sends a stale update as a client does; it returns, for kubectl, what it
// printed on stderr, and the error.
type staleSend func(t *testing.T, env *testenv.Environment, stale *olmv1.ClusterObjectSet) (string, error)

// TestStaleUpdatesConflict: an update, patch or server-side apply that carries a resourceVersion
// older than the stored one is answered 409 Conflict (reason Conflict) by the API server, with and
// without our webhooks installed, with the very same status, and writes nothing (no Secret created
// or touched, the stored ClusterObjectSet unchanged), for every refusal class the webhooks have:
// transition rules (un-archive), immutable fields (revision, phases), a deletion in progress, a
// ClusterObjectSet deleted and re-created, a Secret under the planned name that is not ours, the
// check-refs entry (refusal and touch), and the Secret guard (label change, delete). The API server
// runs mutating admission before its optimistic-concurrency check; the webhook admits such an
// update as it is (webhook/admission's StaleUpdate), so the API server's own Conflict is what the
// client sees. The reproduction of issue 37 by hand is `kubectl replace` of a stale JSON after an
// archive: the class un-archive, sent by kubectl-replace.
func TestStaleUpdatesConflict(t *testing.T) {
	bare := testenv.StartFor(t) // the same CRDs, no webhooks, no manager
	bare.EnsureNamespace(t, testenv.SystemNamespace)
	envs := []struct {
		name string
		env  *testenv.Environment
	}{{"with our webhooks", testenv.Env}, {"without webhooks", bare}}
	run := strings.ToLower(rand.Text()[:5]) // names of this run (-count)

	cosSends := map[string]staleSend{
		"update": func(t *testing.T, env *testenv.Environment, stale *olmv1.ClusterObjectSet) (string, error) {
			return "", env.Client.Update(context.Background(), stale)
		},
		"update-dry-run": func(t *testing.T, env *testenv.Environment, stale *olmv1.ClusterObjectSet) (string, error) {
			return "", env.Client.Update(context.Background(), stale, client.DryRunAll)
		},
		// A merge patch applies to the stored object, and so carries its resourceVersion unless the
		// patch sets one, as this one does: metadata.resourceVersion and the whole spec.
		"merge-patch": func(t *testing.T, env *testenv.Environment, stale *olmv1.ClusterObjectSet) (string, error) {
			patch, err := json.Marshal(map[string]any{"metadata": map[string]any{"resourceVersion": stale.ResourceVersion}, "spec": stale.Spec})
			if err != nil {
				t.Fatal(err)
			}
			return "", env.Client.Patch(context.Background(), &olmv1.ClusterObjectSet{ObjectMeta: metav1.ObjectMeta{Name: stale.Name}},
				client.RawPatch(types.MergePatchType, patch))
		},
		"apply": func(t *testing.T, env *testenv.Environment, stale *olmv1.ClusterObjectSet) (string, error) {
			return "", applyStale(t, env, stale)
		},
		"apply-dry-run": func(t *testing.T, env *testenv.Environment, stale *olmv1.ClusterObjectSet) (string, error) {
			return "", applyStale(t, env, stale, client.DryRunAll)
		},
		"kubectl-replace": func(t *testing.T, env *testenv.Environment, stale *olmv1.ClusterObjectSet) (string, error) {
			stale.TypeMeta = metav1.TypeMeta{APIVersion: olmv1.GroupVersion.String(), Kind: olmv1.ClusterObjectSetKind}
			raw, err := json.Marshal(stale)
			if err != nil {
				t.Fatal(err)
			}
			_, stderr, err := env.Kubectl(t, raw, "replace", "-f", "-")
			return stderr, err
		},
	}
	classes := staleClasses()
	for className, class := range classes {
		for sendName, send := range cosSends {
			t.Run(className+"/"+sendName, func(t *testing.T) {
				t.Parallel()
				name := fmt.Sprintf("stale-%s-%s-%s", shortKey(className), shortKey(sendName), run)
				var got []staleAnswer
				for _, e := range envs {
					e.env.RemoveAfter(t, name)
					stale := class.prepare(t, e.env, name)
					if class.settle && e.env == testenv.Env {
						e.env.WaitOwned(t, name)
					}
					stored := getCOSIn(t, e.env, name)
					secrets := testenv.ResourceVersions(e.env.ObjectDataSecrets(t, name))
					stderr, err := send(t, e.env, stale)
					got = append(got, answerOf(t, e.name, err, stderr))
					if again := getCOSIn(t, e.env, name); again.ResourceVersion != stored.ResourceVersion {
						t.Errorf("%s: the stale update changed the ClusterObjectSet: resourceVersion %s -> %s", e.name, stored.ResourceVersion, again.ResourceVersion)
					}
					if after := testenv.ResourceVersions(e.env.ObjectDataSecrets(t, name)); !cmp.Equal(secrets, after) {
						t.Errorf("%s: the stale update wrote Secrets (-before +after):\n%s", e.name, cmp.Diff(secrets, after))
					}
				}
				if diff := cmp.Diff(got[1], got[0]); diff != "" {
					t.Errorf("the client's answer with our webhooks differs from the API server's alone (-without +with):\n%s", diff)
				}
			})
		}
	}

	// The Secret guard: validating, so called after the API server's own checks of the
	// resourceVersion (an update's) and of a delete's preconditions; these show it is never asked.
	secretSends := map[string]func(env *testenv.Environment, stale *corev1.Secret) error{
		"label-update": func(env *testenv.Environment, stale *corev1.Secret) error {
			stale.Labels[olmv1.LabelRevisionName] = "someone-else"
			return env.Client.Update(context.Background(), stale)
		},
		"label-update-dry-run": func(env *testenv.Environment, stale *corev1.Secret) error {
			stale.Labels[olmv1.LabelRevisionName] = "someone-else"
			return env.Client.Update(context.Background(), stale, client.DryRunAll)
		},
		"owners-merge-patch": func(env *testenv.Environment, stale *corev1.Secret) error {
			patch := fmt.Sprintf(`{"metadata":{"resourceVersion":%q,"ownerReferences":null}}`, stale.ResourceVersion)
			return env.Client.Patch(context.Background(), stale, client.RawPatch(types.MergePatchType, []byte(patch)))
		},
		"delete": func(env *testenv.Environment, stale *corev1.Secret) error {
			return env.Client.Delete(context.Background(), stale, client.Preconditions{ResourceVersion: &stale.ResourceVersion})
		},
		"delete-dry-run": func(env *testenv.Environment, stale *corev1.Secret) error {
			return env.Client.Delete(context.Background(), stale, client.Preconditions{ResourceVersion: &stale.ResourceVersion}, client.DryRunAll)
		},
	}
	for sendName, send := range secretSends {
		t.Run("secret-guard/"+sendName, func(t *testing.T) {
			t.Parallel()
			name := fmt.Sprintf("stale-s-%s-%s", shortKey(sendName), run)
			var got []staleAnswer
			for _, e := range envs {
				sec := plantSecret(t, e.env, name, "used")
				e.env.RemoveAfter(t, name) // before the Secret's delete: cleanups run last first
				cos := builders.COS(name, builders.WithPhase("configuration", builders.Ref(sec.Name, "", onlyKey(sec))))
				if err := e.env.Client.Create(context.Background(), cos); err != nil {
					t.Fatal(err)
				}
				owner := metav1.OwnerReference{APIVersion: olmv1.GroupVersion.String(), Kind: olmv1.ClusterObjectSetKind, Name: cos.Name, UID: cos.UID}
				if e.env == testenv.Env {
					e.env.WaitOwned(t, name)
				} else {
					// What the manager's Secret ownership does, so that the patch drops an owner.
					setOwner(t, e.env, sec, owner)
				}
				stale := &corev1.Secret{}
				if err := e.env.Client.Get(context.Background(), client.ObjectKeyFromObject(sec), stale); err != nil {
					t.Fatal(err)
				}
				annotate(t, e.env, stale.DeepCopy()) // moves it on
				before := testenv.ResourceVersions(e.env.ObjectDataSecrets(t, name))
				got = append(got, answerOf(t, e.name, send(e.env, stale), ""))
				if after := testenv.ResourceVersions(e.env.ObjectDataSecrets(t, name)); !cmp.Equal(before, after) {
					t.Errorf("%s: the stale request wrote the Secret (-before +after):\n%s", e.name, cmp.Diff(before, after))
				}
			}
			if diff := cmp.Diff(got[1], got[0]); diff != "" {
				t.Errorf("the client's answer with our webhooks differs from the API server's alone (-without +with):\n%s", diff)
			}
		})
	}
}

// shortKey is the initials of a dash-separated name: un-archive -> ua.
func shortKey(name string) string {
	var b strings.Builder
	for _, w := range strings.FieldsFunc(name, func(r rune) bool { return r == '-' || r == ' ' || r == ',' }) {
		b.WriteByte(w[0])
	}
	return b.String()
}

// staleClasses are the refusal classes of the webhooks for a stale update, keyed by names whose
// initials are unique (shortKey).
func staleClasses() map[string]staleClass {
	ctx := context.Background()
	always := builders.WithAnnotations(map[string]string{admission.Annotation: string(admission.ModeAlways)})
	// Content a stale fill submits: externalized, so that writing its Secrets would show.
	fill := func(stale *olmv1.ClusterObjectSet) {
		stale.Spec.Phases = builders.COS(stale.Name, builders.WithPhase("configuration", builders.InlineConfigMaps("default", stale.Name, 2)...)).Spec.Phases
	}
	create := func(t *testing.T, env *testenv.Environment, cos *olmv1.ClusterObjectSet) *olmv1.ClusterObjectSet {
		t.Helper()
		if err := env.Client.Create(ctx, cos); err != nil {
			t.Fatalf("creating %s: %v", cos.Name, err)
		}
		return getCOSIn(t, env, cos.Name)
	}
	archive := func(t *testing.T, env *testenv.Environment, name string) {
		t.Helper()
		patch := client.RawPatch(types.MergePatchType, []byte(`{"spec":{"lifecycleState":"Archived"}}`))
		if err := env.Client.Patch(ctx, &olmv1.ClusterObjectSet{ObjectMeta: metav1.ObjectMeta{Name: name}}, patch); err != nil {
			t.Fatalf("archiving %s: %v", name, err)
		}
	}
	relabel := func(t *testing.T, env *testenv.Environment, name string) {
		t.Helper()
		patch := client.RawPatch(types.MergePatchType, []byte(`{"metadata":{"labels":{"moved-on":"true"}}}`))
		if err := env.Client.Patch(ctx, &olmv1.ClusterObjectSet{ObjectMeta: metav1.ObjectMeta{Name: name}}, patch); err != nil {
			t.Fatalf("labelling %s: %v", name, err)
		}
	}
	small := func(name string) *olmv1.ClusterObjectSet {
		return builders.COS(name, builders.WithPhase("configuration", builders.InlineConfigMaps("default", name, 2)...))
	}
	refsTo := func(stale *olmv1.ClusterObjectSet, sec *corev1.Secret) {
		stale.Spec.Phases = builders.COS(stale.Name, builders.WithPhase("configuration", builders.Ref(sec.Name, "", onlyKey(sec)))).Spec.Phases
	}
	return map[string]staleClass{
		// Issue 37's reproduction: small, so stored inline, which calls the mutating webhook.
		"un-archive": {prepare: func(t *testing.T, env *testenv.Environment, name string) *olmv1.ClusterObjectSet {
			stale := create(t, env, small(name))
			archive(t, env, name)
			return stale
		}},
		"immutable-revision": {prepare: func(t *testing.T, env *testenv.Environment, name string) *olmv1.ClusterObjectSet {
			stale := create(t, env, small(name))
			relabel(t, env, name)
			stale.Spec.Revision++
			return stale
		}},
		"immutable-phases, filled by another": {settle: true, prepare: func(t *testing.T, env *testenv.Environment, name string) *olmv1.ClusterObjectSet {
			stale := create(t, env, builders.COS(name, always))
			other := stale.DeepCopy()
			other.Spec.Phases = builders.COS(name, builders.WithPhase("configuration", builders.InlineConfigMaps("default", name+"-other", 1)...)).Spec.Phases
			if err := env.Client.Update(ctx, other); err != nil {
				t.Fatalf("filling %s: %v", name, err)
			}
			fill(stale)
			return stale
		}},
		// The adversarial fixed seed's fill: an empty revision archived since it was read.
		"fill-archived": {prepare: func(t *testing.T, env *testenv.Environment, name string) *olmv1.ClusterObjectSet {
			stale := create(t, env, builders.COS(name, always))
			archive(t, env, name)
			fill(stale)
			return stale
		}},
		// Refs only: only the check-refs entry is called (failurePolicy Ignore, but a refusal refuses).
		"check-refs, archived": {prepare: func(t *testing.T, env *testenv.Environment, name string) *olmv1.ClusterObjectSet {
			sec := plantSecret(t, env, name, "refs")
			stale := create(t, env, builders.COS(name))
			archive(t, env, name)
			refsTo(stale, sec)
			return stale
		}},
		// check-refs would touch the Secret the refs name (a write) before the Conflict.
		"check-refs touch": {prepare: func(t *testing.T, env *testenv.Environment, name string) *olmv1.ClusterObjectSet {
			sec := plantSecret(t, env, name, "refs")
			stale := create(t, env, builders.COS(name))
			relabel(t, env, name)
			refsTo(stale, sec)
			return stale
		}},
		"deletion-in-progress": {prepare: func(t *testing.T, env *testenv.Environment, name string) *olmv1.ClusterObjectSet {
			cos := builders.COS(name, always)
			cos.Finalizers = []string{"test.cos-externalizer.io/hold"}
			stale := create(t, env, cos)
			t.Cleanup(func() { // before RemoveAfter's wait (cleanups run last first)
				patch := client.RawPatch(types.MergePatchType, []byte(`{"metadata":{"finalizers":null}}`))
				if err := env.Client.Patch(ctx, &olmv1.ClusterObjectSet{ObjectMeta: metav1.ObjectMeta{Name: name}}, patch); client.IgnoreNotFound(err) != nil {
					t.Error(err)
				}
			})
			if err := env.Client.Delete(ctx, stale.DeepCopy()); err != nil {
				t.Fatal(err)
			}
			fill(stale)
			return stale
		}},
		"owner-re-created": {prepare: func(t *testing.T, env *testenv.Environment, name string) *olmv1.ClusterObjectSet {
			stale := create(t, env, builders.COS(name, always))
			framework.Delete(ctx, t, env.Client, stale.DeepCopy())
			framework.WaitGone(ctx, t, env.Client, stale.DeepCopy())
			create(t, env, builders.COS(name, always))
			fill(stale)
			return stale
		}},
		// A Secret under the name planned for the stale fill's content, holding other content: the
		// webhook's judgement is a 409 of its own (secret_conflict), not the API server's Conflict.
		"secret-not-ours": {prepare: func(t *testing.T, env *testenv.Environment, name string) *olmv1.ClusterObjectSet {
			stale := create(t, env, builders.COS(name, always))
			fill(stale)
			plan, err := testenv.PlannedSecrets(stale)
			if err != nil {
				t.Fatal(err)
			}
			notOurs := secretdata.ObjectDataSecret(name, testenv.SystemNamespace, plan.Secrets[0])
			notOurs.Data = map[string][]byte{"other": []byte("{}")}
			if err := env.Client.Create(ctx, notOurs); err != nil {
				t.Fatal(err)
			}
			deleteAfter(t, env, notOurs)
			relabel(t, env, name)
			return stale
		}},
	}
}

// staleAnswer is what the client sees of the answer to a stale request.
type staleAnswer struct {
	Status metav1.Status
	Stderr string // kubectl's
}

// answerOf checks that err is the API server's 409 Conflict (or, from kubectl, says it) and returns
// what the client sees of it.
func answerOf(t *testing.T, env string, err error, stderr string) staleAnswer {
	t.Helper()
	var exit *exec.ExitError
	if stderr != "" || errors.As(err, &exit) {
		if !strings.Contains(stderr, "Error from server (Conflict)") {
			t.Errorf("%s: kubectl: %v, want a Conflict: %s", env, err, stderr)
		}
		return staleAnswer{Stderr: clusterSpecific(stderr)}
	}
	var status apierrors.APIStatus
	if !errors.As(err, &status) {
		t.Errorf("%s: answer %v, want 409 Conflict", env, err)
		return staleAnswer{}
	}
	s := status.Status()
	if s.Code != 409 || s.Reason != metav1.StatusReasonConflict {
		t.Errorf("%s: answer %d %s (%s), want 409 %s", env, s.Code, s.Reason, s.Message, metav1.StatusReasonConflict)
	}
	s.Message = clusterSpecific(s.Message)
	return staleAnswer{Status: s}
}

var (
	uidPattern = regexp.MustCompile(`[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}`)
	rvPattern  = regexp.MustCompile(`\(\d+\)`)
)

// clusterSpecific replaces what differs between two control planes for the same answer (uids, and
// resourceVersions in a precondition's message) with placeholders, so that the answers compare.
func clusterSpecific(msg string) string {
	return rvPattern.ReplaceAllString(uidPattern.ReplaceAllString(msg, "UID"), "(RV)")
}

// applyStale sends stale as a server-side apply configuration, its resourceVersion included.
func applyStale(t *testing.T, env *testenv.Environment, stale *olmv1.ClusterObjectSet, opts ...client.ApplyOption) error {
	t.Helper()
	cfg := stale.DeepCopy()
	cfg.ManagedFields, cfg.UID, cfg.CreationTimestamp, cfg.Generation = nil, "", metav1.Time{}, 0
	u, err := runtime.DefaultUnstructuredConverter.ToUnstructured(cfg)
	if err != nil {
		t.Fatal(err)
	}
	delete(u, "status")
	obj := &unstructured.Unstructured{Object: u}
	obj.SetGroupVersionKind(olmv1.GroupVersion.WithKind(olmv1.ClusterObjectSetKind))
	return env.Client.Apply(context.Background(), client.ApplyConfigurationFromUnstructured(obj),
		append([]client.ApplyOption{client.FieldOwner("stale-test"), client.ForceOwnership}, opts...)...)
}

// plantSecret creates an object-data Secret, labelled for the ClusterObjectSet name, holding one
// ConfigMap's content under its content key; it is deleted when the test ends.
func plantSecret(t *testing.T, env *testenv.Environment, name, suffix string) *corev1.Secret {
	t.Helper()
	data, err := content.Canonical(builders.ConfigMap("default", name+"-"+suffix, map[string]string{"k": "v"}).Object)
	if err != nil {
		t.Fatal(err)
	}
	sec := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: testenv.SystemNamespace, Name: name + "-" + suffix,
		Labels: map[string]string{olmv1.LabelRevisionName: naming.RevisionLabelValue(name)}},
		Type: olmv1.SecretTypeObjectData, Immutable: ptr.To(true), Data: map[string][]byte{content.Key(data): data}}
	if err := env.Client.Create(context.Background(), sec); err != nil {
		t.Fatal(err)
	}
	deleteAfter(t, env, sec)
	return sec
}

// deleteAfter deletes the Secret when the test ends, once nothing uses it (the guard refuses it
// before; the garbage collector may have taken it).
func deleteAfter(t *testing.T, env *testenv.Environment, sec *corev1.Secret) {
	t.Cleanup(func() {
		framework.Eventually(context.Background(), t, "Secret "+sec.Name+" deleted", func(ctx context.Context) (bool, string) {
			err := env.Client.Delete(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: sec.Namespace, Name: sec.Name}})
			if err != nil && !apierrors.IsNotFound(err) {
				return false, err.Error()
			}
			return true, ""
		})
	})
}

func onlyKey(sec *corev1.Secret) string {
	for k := range sec.Data {
		return k
	}
	return ""
}

// setOwner makes owner the controller of sec.
func setOwner(t *testing.T, env *testenv.Environment, sec *corev1.Secret, owner metav1.OwnerReference) {
	t.Helper()
	owner.Controller, owner.BlockOwnerDeletion = ptr.To(true), ptr.To(true)
	patch, err := json.Marshal(map[string]any{"metadata": map[string]any{"ownerReferences": []metav1.OwnerReference{owner}}})
	if err != nil {
		t.Fatal(err)
	}
	if err := env.Client.Patch(context.Background(), sec.DeepCopy(), client.RawPatch(types.MergePatchType, patch)); err != nil {
		t.Fatal(err)
	}
}

// annotate writes the Secret (an annotation), so that a copy read before is stale.
func annotate(t *testing.T, env *testenv.Environment, sec *corev1.Secret) {
	t.Helper()
	patch := client.RawPatch(types.MergePatchType, []byte(`{"metadata":{"annotations":{"moved-on":"true"}}}`))
	if err := env.Client.Patch(context.Background(), sec, patch); err != nil {
		t.Fatal(err)
	}
}

func getCOSIn(t *testing.T, env *testenv.Environment, name string) *olmv1.ClusterObjectSet {
	t.Helper()
	got := &olmv1.ClusterObjectSet{}
	if err := env.Client.Get(context.Background(), client.ObjectKey{Name: name}, got); err != nil {
		t.Fatalf("getting ClusterObjectSet %s: %v", name, err)
	}
	return got
}

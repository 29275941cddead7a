// Package webhook_test drives the externalizing webhook through a real API server, which calls it over
// TLS, with kubectl as users and GitOps tools do.
package webhook_test

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	olmv1 "github.com/cos-externalizer/cos-externalizer/api/v1"
	"github.com/cos-externalizer/cos-externalizer/internal/content"
	"github.com/cos-externalizer/cos-externalizer/internal/naming"
	"github.com/cos-externalizer/cos-externalizer/test/builders"
	"github.com/cos-externalizer/cos-externalizer/test/corpus"
	"github.com/cos-externalizer/cos-externalizer/test/testenv"
	"github.com/cos-externalizer/cos-externalizer/webhook/admission"
)

var manager *testenv.Manager

func TestMain(m *testing.M) {
	testenv.RunWithManager(m, &manager, func(ctx context.Context, env *testenv.Environment) (*testenv.Manager, error) {
		// Webhook-only mode: the reconciler's status writes would change the resourceVersions these
		// tests compare. Secret ownership still runs: tests wait for it to settle.
		return env.StartManager(ctx, "--rollout=false")
	})
}

func TestPrometheusBundleServerSideApply(t *testing.T) {
	b := submitBundle(t, "prometheus-operator", "prometheus-operator-crds", "monitoring", "apply", "--server-side")
	if !strings.Contains(b.stderr, "externalized 10 objects") {
		t.Errorf("kubectl did not show the webhook's warning; stderr: %s", b.stderr)
	}

	// Applying the same inline file again changes nothing.
	mustKubectl(t, nil, "apply", "--server-side", "-f", b.file)
	checkUnwritten(t, "re-apply", b.stored, b.secrets)
}

// submitted is a test bundle sent through kubectl as an inline ClusterObjectSet, and what the
// webhook made of it.
type submitted struct {
	inline, stored *olmv1.ClusterObjectSet
	file, stderr   string            // the file sent, what kubectl printed on stderr
	secrets        map[string]string // the stored form's Secrets, once owned
}

// submitBundle sends the test bundle dir (builders.Bundle's name, dir and namespace) through
// `kubectl VERB... -f FILE` and checks that the stored ClusterObjectSet is its externalized form; the
// ClusterObjectSet is removed when the test ends.
func submitBundle(t *testing.T, name, dir, namespace string, verb ...string) submitted {
	t.Helper()
	inline, err := builders.Bundle(name, dir, namespace)
	if err != nil {
		t.Fatal(err)
	}
	testenv.Env.RemoveAfter(t, inline.Name) // so that the test runs again (-count)
	file := writeJSON(t, inline)
	_, stderr := mustKubectl(t, nil, append(verb, "-f", file)...)
	stored := getCOS(t, inline.Name)
	testenv.Env.CheckExternalized(t, inline, stored)
	return submitted{inline: inline, stored: stored, file: file, stderr: stderr, secrets: settledSecrets(t, stored)}
}

func TestArgoCDClientSideApplyTwice(t *testing.T) {
	b := submitBundle(t, "argocd", "argocd-install", "argocd", "apply")
	if v := b.stored.Annotations[admission.LastAppliedAnnotation]; len(v) > 256<<10 || strings.Contains(v, `"object":`) {
		t.Errorf("last-applied annotation (%d bytes) still holds inline objects", len(v))
	}

	mustKubectl(t, nil, "apply", "-f", b.file)
	checkUnwritten(t, "second apply", b.stored, b.secrets)
}

func TestSmallCOSStaysInline(t *testing.T) {
	// Three inline objects and one ref to a Secret of its own: the reconciler's ownership of that
	// Secret shows that it has reconciled the ClusterObjectSet, before the test checks what it must
	// not have done.
	cm := builders.ConfigMap("default", "small-ref", nil)
	data, err := content.Canonical(cm.Object)
	if err != nil {
		t.Fatal(err)
	}
	sec := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: testenv.SystemNamespace, Name: "small-inline-data",
		Labels: map[string]string{olmv1.LabelRevisionName: naming.RevisionLabelValue("small-inline")}},
		Type: olmv1.SecretTypeObjectData, Immutable: ptr.To(true), Data: map[string][]byte{content.Key(data): data}}
	if err := testenv.Env.Client.Create(context.Background(), sec); client.IgnoreAlreadyExists(err) != nil {
		t.Fatal(err)
	}
	small := builders.COS("small-inline", builders.WithPhase("configuration",
		append(builders.InlineConfigMaps("default", "small", 3), builders.Ref(sec.Name, "", content.Key(data)))...))
	file := writeJSON(t, small)
	mustKubectl(t, nil, "apply", "-f", file)
	stored := getCOS(t, small.Name)
	if admission.CountInline(stored.Spec.Phases) != 3 {
		t.Errorf("a small ClusterObjectSet was externalized")
	}
	out, _ := mustKubectl(t, nil, "apply", "-f", file)
	if !strings.Contains(out, "unchanged") {
		t.Errorf("second apply of a small ClusterObjectSet printed %q, want unchanged", out)
	}
	settledSecrets(t, stored)
	stored = getCOS(t, small.Name)
	// Webhook-only mode (--rollout=false): nothing is rolled out, no finalizer, no status.
	if len(stored.Finalizers) > 0 || len(stored.Status.Conditions) > 0 {
		t.Errorf("webhook-only mode touched the ClusterObjectSet: finalizers %v, conditions %v", stored.Finalizers, stored.Status.Conditions)
	}
	if err := testenv.Env.Client.Get(context.Background(), client.ObjectKey{Namespace: "default", Name: "small-0"}, &corev1.ConfigMap{}); !apierrors.IsNotFound(err) {
		t.Errorf("webhook-only mode rolled an object out: %v", err)
	}
}

func TestCreateAndReplace(t *testing.T) {
	b := submitBundle(t, "argocd-create", "argocd-install", "argocd", "create")
	want, created, secrets := b.inline, b.stored, b.secrets

	// replace sends the inline content again, with a mutable field changed.
	withDeadline := want.DeepCopy()
	withDeadline.Spec.ProgressDeadlineMinutes = 30
	withDeadline.ResourceVersion = created.ResourceVersion
	mustKubectl(t, nil, "replace", "-f", writeJSON(t, withDeadline))
	replaced := getCOS(t, want.Name)
	if replaced.Spec.ProgressDeadlineMinutes != 30 {
		t.Errorf("progressDeadlineMinutes = %d after replace, want 30", replaced.Spec.ProgressDeadlineMinutes)
	}
	if fmt.Sprint(replaced.Spec.Phases) != fmt.Sprint(created.Spec.Phases) {
		t.Error("replace changed the stored refs")
	}
	checkSecretsUnwritten(t, "replace", want.Name, secrets)

	// Changing the content of a phase is refused: phases are immutable.
	changed := want.DeepCopy()
	changed.Spec.Phases[0].Objects[0].Object.SetLabels(map[string]string{"changed": "yes"})
	_, stderr, err := kubectl(t, nil, "apply", "--server-side", "--force-conflicts", "-f", writeJSON(t, changed))
	if err == nil || !strings.Contains(stderr, "phases is immutable; to change its objects, create a new ClusterObjectSet with a new name and the next revision") {
		t.Errorf("changing an object was not refused as immutable: %v %s", err, stderr)
	}
}

func TestDryRunAndDiff(t *testing.T) {
	want, err := builders.Bundle("dryrun-argocd", "argocd-install", "argocd")
	if err != nil {
		t.Fatal(err)
	}
	testenv.Env.Fresh(t, want.Name)
	file := writeJSON(t, want)
	before := secretNames(t)
	dry, _ := mustKubectl(t, nil, "apply", "--server-side", "--dry-run=server", "-o", "json", "-f", file)
	if w := written(t, before); len(w) > 0 {
		t.Fatalf("a dry run wrote Secrets %v", w)
	}
	if cosExists(t, want.Name) {
		t.Fatal("a dry run created the ClusterObjectSet")
	}
	var dryObj olmv1.ClusterObjectSet
	if err := json.Unmarshal([]byte(dry), &dryObj); err != nil {
		t.Fatal(err)
	}
	// kubectl diff of a ClusterObjectSet that does not exist yet shows it; after the real apply, nothing.
	if _, _, err := kubectl(t, nil, "diff", "--server-side", "-f", file); err == nil {
		t.Error("kubectl diff before the apply showed no difference")
	}
	if w := written(t, before); len(w) > 0 {
		t.Fatalf("kubectl diff wrote Secrets %v", w)
	}
	mustKubectl(t, nil, "apply", "--server-side", "-f", file)
	applied := getCOS(t, want.Name)
	if fmt.Sprint(dryObj.Spec.Phases) != fmt.Sprint(applied.Spec.Phases) {
		t.Error("the dry run's result differs from the real apply's")
	}
	if out, stderr, err := kubectl(t, nil, "diff", "--server-side", "-f", file); err != nil {
		t.Errorf("kubectl diff after the apply: %v\n%.3000s\n%s", err, out, stderr)
	}
	var own []string
	for _, s := range testenv.Env.ObjectDataSecrets(t, want.Name) {
		own = append(own, s.Name)
	}
	if w := written(t, before); fmt.Sprint(w) != fmt.Sprint(own) {
		t.Errorf("the apply wrote Secrets %v, want exactly those of the ClusterObjectSet %v", w, own)
	}
}

func TestInvalidCorpusWritesNothing(t *testing.T) {
	ctx := context.Background()
	for name, tc := range corpus.Cases() {
		if len(tc.Want) == 0 {
			continue
		}
		t.Run(name, func(t *testing.T) {
			before := secretNames(t)
			obj := bigger(tc.New)
			obj.Name = "invalid-" + fmt.Sprintf("%x", len(name)*7919+int(name[0]))
			var err error
			if tc.Old == nil {
				err = testenv.Env.Client.Create(ctx, obj)
			} else {
				old := bigger(tc.Old)
				old.Name = obj.Name
				if err := testenv.Env.Client.Create(ctx, old); err != nil {
					t.Fatalf("creating the old object: %v", err)
				}
				defer func() { _ = testenv.Env.Client.Delete(ctx, old) }()
				obj.ResourceVersion = old.ResourceVersion
				before = secretNames(t)
				err = testenv.Env.Client.Update(ctx, obj)
			}
			if err == nil {
				_ = testenv.Env.Client.Delete(ctx, obj)
				t.Fatal("accepted")
			}
			for _, c := range tc.Want {
				if c != corpus.Skipped && !strings.Contains(err.Error(), c.Field) {
					t.Errorf("error does not name %s: %v", c.Field, err)
				}
			}
			if w := written(t, before); len(w) > 0 {
				t.Errorf("Secrets %v written for a refused request", w)
			}
		})
	}
}

// bigger returns a copy of c with the always annotation, so the webhook would externalize it if it
// were valid.
func bigger(c *olmv1.ClusterObjectSet) *olmv1.ClusterObjectSet {
	c = c.DeepCopy()
	if c.Annotations == nil {
		c.Annotations = map[string]string{}
	}
	c.Annotations[admission.Annotation] = string(admission.ModeAlways)
	return c
}

// TestConcurrentApplies: ten clients apply one 2.8 MB bundle at once, server-side, as ten GitOps
// syncs of one application would. An apply the webhook has no room for is refused at once with 429
// TooManyRequests (kubectl itself retries it after the Retry-After the API server sets); an apply
// that still fails with 429, or with the API server's own Timeout on a loaded machine, is retried as
// a GitOps tool retries a failed sync: with a bounded backoff, a bounded number of times. Every
// client must end admitted, and the stored state must be one externalized ClusterObjectSet whose
// Secrets are exactly those it references.
func TestConcurrentApplies(t *testing.T) {
	want, err := builders.Bundle("concurrent", "prometheus-operator-crds", "monitoring")
	if err != nil {
		t.Fatal(err)
	}
	file := writeJSON(t, want)
	const clients, attempts = 10, 6
	var wg sync.WaitGroup
	errs := make([]error, clients)
	retried := make([][]string, clients)
	for i := range clients {
		wg.Go(func() {
			backoff := time.Second
			for attempt := 1; ; attempt++ {
				out, stderr, err := kubectl(t, nil, "apply", "--server-side", "-f", file)
				if err == nil {
					return
				}
				why := retryable(stderr)
				if why == "" || attempt == attempts {
					errs[i] = fmt.Errorf("attempt %d: %v: %s %s", attempt, err, out, stderr)
					return
				}
				retried[i] = append(retried[i], why)
				time.Sleep(backoff) // a client's backoff, not a wait for a condition
				backoff = min(2*backoff, 8*time.Second)
			}
		})
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Errorf("client %d, after retrying %v: %v", i, retried[i], err)
		}
	}
	t.Logf("retries per client: %v", retried)
	testenv.Env.CheckExternalized(t, want, getCOS(t, want.Name))
	secrets := testenv.Env.ObjectDataSecrets(t, want.Name)
	referenced := map[string]bool{}
	for _, p := range getCOS(t, want.Name).Spec.Phases {
		for _, o := range p.Objects {
			referenced[o.Ref.Name] = true
		}
	}
	if len(secrets) != len(referenced) {
		t.Errorf("%d Secrets for %d referenced", len(secrets), len(referenced))
	}
}

// retryable says why a failed apply is one a GitOps tool retries: the webhook's (or the API server's)
// 429, or the API server's Timeout of a request it could not finish in time; "" for any other failure.
func retryable(stderr string) string {
	switch {
	case strings.Contains(stderr, "(TooManyRequests)"):
		return "429"
	case strings.Contains(stderr, "(Timeout)"):
		return "timeout"
	}
	return ""
}

func TestStoredFormTooLargeIsRefusedWithWhy(t *testing.T) {
	want, err := builders.Bundle("never-externalized", "prometheus-operator-crds", "monitoring",
		builders.WithAnnotations(map[string]string{admission.Annotation: string(admission.ModeNever)}))
	if err != nil {
		t.Fatal(err)
	}
	before := secretNames(t)
	_, stderr, err := kubectl(t, nil, "apply", "--server-side", "-f", writeJSON(t, want))
	if err == nil {
		t.Fatal("a 2.8 MB inline ClusterObjectSet was accepted with externalization off")
	}
	for _, part := range []string{"spec.phases", "over the", "not externalized", "externalization is set to never"} {
		if !strings.Contains(stderr, part) {
			t.Errorf("refusal does not say %q: %s", part, stderr)
		}
	}
	if w := written(t, before); cosExists(t, want.Name) || len(w) > 0 {
		t.Errorf("something was written for a refused request: Secrets %v", w)
	}
}

func TestObjectTooLargeEvenCompressed(t *testing.T) {
	// 1.2 MB of random base64 compresses to about 0.9 MB: over a Secret's 900 KiB budget.
	blob := make([]byte, 900<<10)
	if _, err := rand.Read(blob); err != nil {
		t.Fatal(err)
	}
	huge := builders.ConfigMap("default", "incompressible", map[string]string{"blob": base64.StdEncoding.EncodeToString(blob)})
	obj := builders.COS("too-large", builders.WithPhase("configuration", builders.Inline(huge)))
	before := secretNames(t)
	_, stderr, err := kubectl(t, nil, "create", "-f", writeJSON(t, obj))
	if err == nil {
		t.Fatal("an object larger than a Secret, even compressed, was accepted")
	}
	for _, part := range []string{"spec.phases[0].objects[0]", `phase "configuration" object 0`, "ConfigMap default/incompressible", "gzip-compressed"} {
		if !strings.Contains(stderr, part) {
			t.Errorf("refusal does not say %q: %.1000s", part, stderr)
		}
	}
	if strings.Contains(stderr, base64.StdEncoding.EncodeToString(blob[:30])) {
		t.Error("the refusal quotes the object's content")
	}
	if w := written(t, before); len(w) > 0 {
		t.Errorf("Secrets %v written for a refused request", w)
	}
}

// TestCreateOfAnExistingNameWritesNothing: a create of a name that is taken is refused as the API
// server refuses it, before any Secret is written.
func TestCreateOfAnExistingNameWritesNothing(t *testing.T) {
	ctx := context.Background()
	testenv.Env.RemoveAfter(t, "taken")
	always := builders.WithAnnotations(map[string]string{"cos-externalizer.io/externalize": "always"})
	first := builders.COS("taken", always, builders.WithPhase("configuration", builders.InlineConfigMaps("default", "taken", 2)...))
	if err := testenv.Env.Client.Create(ctx, first); err != nil {
		t.Fatal(err)
	}
	before := secretNames(t)
	again := builders.COS("taken", always, builders.WithPhase("configuration", builders.InlineConfigMaps("default", "taken-other", 3)...))
	err := testenv.Env.Client.Create(ctx, again)
	if !apierrors.IsAlreadyExists(err) {
		t.Fatalf("creating a taken name: want AlreadyExists, got %v", err)
	}
	if added := written(t, before); len(added) > 0 {
		t.Errorf("a refused create wrote Secrets: %v", added)
	}
}

// TestReorderedPhasesAreRefused: phases roll out in order and are immutable; the CRD's CEL equality
// of a list-map ignores order, so the webhook refuses a reorder itself.
func TestReorderedPhasesAreRefused(t *testing.T) {
	ctx := context.Background()
	testenv.Env.RemoveAfter(t, "reorder")
	cos := builders.COS("reorder",
		builders.WithPhase("configuration", builders.Inline(builders.ConfigMap("default", "reorder-a", nil))),
		builders.WithPhase("deploy", builders.Inline(builders.ConfigMap("default", "reorder-b", nil))))
	if err := testenv.Env.Client.Create(ctx, cos); err != nil {
		t.Fatal(err)
	}
	stored := getCOS(t, cos.Name)
	swapped := stored.DeepCopy()
	swapped.Spec.Phases[0], swapped.Spec.Phases[1] = swapped.Spec.Phases[1], swapped.Spec.Phases[0]
	err := testenv.Env.Client.Update(ctx, swapped)
	if !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), "spec.phases: Forbidden: phases roll out in the order they are listed and cannot be reordered") {
		t.Fatalf("reordering phases: want Invalid with the reason, got %v", err)
	}
	if got := getCOS(t, cos.Name); got.Spec.Phases[0].Name != "configuration" || got.ResourceVersion != stored.ResourceVersion {
		t.Errorf("the refused reorder changed the ClusterObjectSet: phases %s, %s", got.Spec.Phases[0].Name, got.Spec.Phases[1].Name)
	}
}

// TestWebhookDown stops the manager and leaves its webhook configurations pointing at nothing, as
// when every replica is down: what the webhooks must see (inline objects, changes of stored phases)
// fails closed, while refs-only ClusterObjectSets and updates that leave their phases alone (what
// OLM writes) are admitted, since the API server does not call the webhooks for them
// (matchConditions). It starts a new manager when it ends, for the tests after it.
func TestWebhookDown(t *testing.T) {
	ctx := context.Background()
	testenv.Env.RemoveAfter(t, "webhook-down-refs", "webhook-down-reorder")
	refsOnly := func(name string, phases ...string) *olmv1.ClusterObjectSet {
		c := builders.COS(name)
		for _, p := range phases {
			builders.WithPhase(p, builders.Ref(name+"-"+p, "", "k"))(c)
		}
		return c
	}
	// Stored before the manager stops; the Secrets behind its refs need not exist.
	if err := testenv.Env.Client.Create(ctx, refsOnly("webhook-down-reorder", "first", "second")); err != nil {
		t.Fatal(err)
	}
	// While the manager is up, the webhooks see a reorder of refs too, and refuse it.
	swapped := getCOS(t, "webhook-down-reorder")
	swapped.Spec.Phases[0], swapped.Spec.Phases[1] = swapped.Spec.Phases[1], swapped.Spec.Phases[0]
	if err := testenv.Env.Client.Update(ctx, swapped); !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), "cannot be reordered") {
		t.Fatalf("reordering the phases of a refs-only ClusterObjectSet: want Invalid from the webhook, got %v", err)
	}
	stopManager(t)

	tests := []struct {
		name string
		// do sends the request and returns the ClusterObjectSet it is about.
		do func(t *testing.T) (cosName string, err error)
		// refusedBy is the webhook the refusal names; empty means admitted.
		refusedBy string
	}{{
		name: "inline create",
		do: func(t *testing.T) (string, error) {
			obj := builders.COS("webhook-down", builders.WithPhase("configuration", builders.InlineConfigMaps("default", "down", 2)...))
			_, stderr, err := kubectl(t, nil, "apply", "--server-side", "-f", writeJSON(t, obj))
			if err != nil {
				err = fmt.Errorf("%w: %s", err, stderr)
			}
			return obj.Name, err
		},
		refusedBy: "externalize.cos-externalizer.io",
	}, {
		name: "refs-only create",
		do: func(t *testing.T) (string, error) {
			obj := refsOnly("webhook-down-refs", "configuration")
			_, stderr, err := kubectl(t, nil, "apply", "--server-side", "-f", writeJSON(t, obj))
			if err != nil {
				err = fmt.Errorf("%w: %s", err, stderr)
			}
			return obj.Name, err
		},
	}, {
		name: "refs-only update of the labels",
		do: func(t *testing.T) (string, error) {
			c := getCOS(t, "webhook-down-reorder")
			c.Labels = map[string]string{"touched": "yes"}
			return c.Name, testenv.Env.Client.Update(ctx, c)
		},
	}, {
		name: "refs-only reorder of the phases",
		do: func(t *testing.T) (string, error) {
			c := getCOS(t, "webhook-down-reorder")
			c.Spec.Phases[0], c.Spec.Phases[1] = c.Spec.Phases[1], c.Spec.Phases[0]
			return c.Name, testenv.Env.Client.Update(ctx, c)
		},
		refusedBy: "externalize.cos-externalizer.io",
	}, {
		name: "refs-only change of the refs",
		do: func(t *testing.T) (string, error) {
			c := getCOS(t, "webhook-down-reorder")
			c.Spec.Phases[0].Objects[0].Ref.Key = "other"
			return c.Name, testenv.Env.Client.Update(ctx, c)
		},
		refusedBy: "externalize.cos-externalizer.io",
	}, {
		name: "refs-only archive",
		do: func(t *testing.T) (string, error) {
			c := getCOS(t, "webhook-down-reorder")
			c.Spec.LifecycleState = olmv1.LifecycleStateArchived
			return c.Name, testenv.Env.Client.Update(ctx, c)
		},
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before := secretNames(t)
			var resourceVersion string
			if c := (&olmv1.ClusterObjectSet{}); testenv.Env.Client.Get(ctx, client.ObjectKey{Name: "webhook-down-reorder"}, c) == nil {
				resourceVersion = c.ResourceVersion
			}
			name, err := tt.do(t)
			switch {
			case tt.refusedBy == "" && err != nil:
				t.Fatalf("refused while the webhooks were down: %v", err)
			case tt.refusedBy != "" && err == nil:
				t.Fatal("admitted while the webhooks were down")
			case tt.refusedBy != "" && (!strings.Contains(err.Error(), "failed calling webhook") || !strings.Contains(err.Error(), tt.refusedBy)):
				t.Errorf("want a failed call of %s, got: %v", tt.refusedBy, err)
			}
			if tt.refusedBy == "" && !cosExists(t, name) {
				t.Errorf("ClusterObjectSet %s was admitted but is not stored", name)
			}
			if tt.refusedBy != "" {
				if name == "webhook-down-reorder" {
					if got := getCOS(t, name); got.ResourceVersion != resourceVersion || got.Spec.Phases[0].Name != "first" {
						t.Errorf("the refused update changed the ClusterObjectSet")
					}
				} else if cosExists(t, name) {
					t.Errorf("the refused ClusterObjectSet %s is stored", name)
				}
			}
			if w := written(t, before); len(w) > 0 {
				t.Errorf("Secrets were written while the webhooks were down: %v", w)
			}
		})
	}
}

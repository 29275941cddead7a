package plugin_test

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	testingclock "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	olmv1 "github.com/cos-externalizer/cos-externalizer/api/v1"
	"github.com/cos-externalizer/cos-externalizer/cmd/kubectl-cos/commands"
	"github.com/cos-externalizer/cos-externalizer/controllers"
	"github.com/cos-externalizer/cos-externalizer/internal/content"
	"github.com/cos-externalizer/cos-externalizer/test/builders"
	"github.com/cos-externalizer/cos-externalizer/test/framework"
	"github.com/cos-externalizer/cos-externalizer/test/testenv"
	"github.com/cos-externalizer/cos-externalizer/webhook/admission"
)

// generateBundle writes a folder of manifests: a Namespace and n ConfigMaps of about size bytes of
// random hexadecimal words each (which gzip to about half), in files of 20 ConfigMaps.
func generateBundle(t testing.TB, ns string, n, size int) string {
	t.Helper()
	dir := t.TempDir()
	r := rand.New(rand.NewPCG(uint64(n), uint64(size)))
	writeText(t, dir, "00-namespace.yaml", fmt.Sprintf("apiVersion: v1\nkind: Namespace\nmetadata:\n  name: %s\n", ns))
	var b strings.Builder
	for i := range n {
		var blob strings.Builder
		for blob.Len() < size {
			fmt.Fprintf(&blob, "%016x ", r.Uint64())
		}
		fmt.Fprintf(&b, "---\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: blob-%03d\ndata:\n  blob: %s\n", i, blob.String())
		if (i+1)%20 == 0 || i == n-1 {
			writeText(t, dir, fmt.Sprintf("configmaps-%03d.yaml", i/20), b.String())
			b.Reset()
		}
	}
	return dir
}

// TestTenMegabyteBundleRollsOut: a generated 10 MB bundle, which no request to the API server can
// carry inline, is built into a ClusterObjectSet, applied with kubectl cos apply, and rolls out to
// Succeeded; a second apply writes nothing.
func TestTenMegabyteBundleRollsOut(t *testing.T) {
	const name, ns = "ten-megabytes", "ten-megabytes"
	testenv.Env.RemoveWithSecretsAfter(t, name)
	dir := generateBundle(t, ns, 200, 50_000)
	built := mustPlugin(t, "build", dir, "--name", name, "--revision", "1", "-n", ns)
	file := writeText(t, t.TempDir(), "cos.yaml", built.stdout)
	want := decodeCOS(t, built.stdout)
	if size := len(built.stdout); size < 10_000_000 {
		t.Fatalf("the bundle's ClusterObjectSet is %d bytes, want 10 MB", size)
	}
	if _, stderr, err := testenv.Kubectl(t, nil, "apply", "--server-side", "-f", file); err == nil || !strings.Contains(stderr, "too large") {
		t.Fatalf("kubectl apply of the inline 10 MB ClusterObjectSet: want the API server's refusal, got %v: %.500s", err, stderr)
	}

	start := time.Now()
	r := mustPlugin(t, "apply", "-f", file, "--server-side")
	t.Logf("kubectl cos apply took %s", time.Since(start).Round(time.Millisecond))
	if !strings.Contains(r.stdout, "clusterobjectset.olm.operatorframework.io/"+name+" created") ||
		!strings.Contains(r.stderr, "externalized 201 objects into") {
		t.Errorf("apply printed:\n%s\n%s", r.stdout, r.stderr)
	}
	stored := getCOS(t, name)
	testenv.Env.CheckExternalized(t, want, stored)
	testenv.Env.WaitForCondition(t, name, olmv1.ConditionSucceeded, metav1.ConditionTrue, "")
	secrets := testenv.Env.WaitOwned(t, name)
	if len(secrets) < 5 {
		t.Errorf("%d Secrets for about 5 MB of compressed content", len(secrets))
	}
	for _, s := range secrets {
		size := 0
		for k, v := range s.Data {
			size += len(k) + len(v)
		}
		if size > content.DefaultBudget {
			t.Errorf("Secret %s holds %d bytes of data, over the %d budget", s.Name, size, content.DefaultBudget)
		}
	}
	cm := &corev1.ConfigMap{}
	if err := c().Get(ctx, client.ObjectKey{Namespace: ns, Name: "blob-199"}, cm); err != nil || len(cm.Data["blob"]) < 50_000 {
		t.Errorf("the last ConfigMap was not rolled out whole: %v", err)
	}

	// Again: nothing is written.
	before, beforeSecrets := getCOS(t, name).ResourceVersion, testenv.ResourceVersions(testenv.Env.ObjectDataSecrets(t, name))
	r = mustPlugin(t, "apply", "-f", file, "--server-side")
	if !strings.Contains(r.stdout, name+" unchanged") || !strings.Contains(r.stderr, "the stored ClusterObjectSet holds the same objects: no Secret written") {
		t.Errorf("second apply printed:\n%s\n%s", r.stdout, r.stderr)
	}
	if after := getCOS(t, name).ResourceVersion; after != before {
		t.Errorf("the second apply wrote the ClusterObjectSet: resourceVersion %s -> %s", before, after)
	}
	if diff := cmp.Diff(beforeSecrets, testenv.ResourceVersions(testenv.Env.ObjectDataSecrets(t, name))); diff != "" {
		t.Errorf("the second apply changed the Secrets (-before +after):\n%s", diff)
	}
}

// TestSecondApplyWritesNothing, for both ways of sending: the same file again changes nothing;
// a changed mutable field is applied without touching the Secrets; changed objects are refused
// before any Secret is written.
func TestSecondApplyWritesNothing(t *testing.T) {
	for name, args := range map[string][]string{
		"client-side": nil,
		"server-side": {"--server-side"},
	} {
		t.Run(name, func(t *testing.T) {
			cosName, ns := "again-"+name, "again-"+name
			testenv.Env.RemoveWithSecretsAfter(t, cosName)
			testenv.Env.EnsureNamespace(t, ns)
			always := builders.WithAnnotations(map[string]string{admission.Annotation: string(admission.ModeAlways)})
			want := builders.COS(cosName, always, builders.WithPhase("configuration", builders.InlineConfigMaps(ns, "again", 5)...))
			file := writeFile(t, want)
			apply := func() result { return mustPlugin(t, append([]string{"apply", "-f", file}, args...)...) }

			if r := apply(); !strings.Contains(r.stdout, cosName+" created") {
				t.Fatalf("first apply printed %q", r.stdout)
			}
			testenv.Env.WaitForCondition(t, cosName, olmv1.ConditionSucceeded, metav1.ConditionTrue, "")
			testenv.Env.WaitOwned(t, cosName)
			stored := getCOS(t, cosName)
			secrets := testenv.ResourceVersions(testenv.Env.ObjectDataSecrets(t, cosName))

			if r := apply(); !strings.Contains(r.stdout, cosName+" unchanged") {
				t.Errorf("second apply printed %q", r.stdout)
			}
			if got := getCOS(t, cosName); got.ResourceVersion != stored.ResourceVersion {
				t.Errorf("the second apply wrote the ClusterObjectSet: %s -> %s", stored.ResourceVersion, got.ResourceVersion)
			}
			if diff := cmp.Diff(secrets, testenv.ResourceVersions(testenv.Env.ObjectDataSecrets(t, cosName))); diff != "" {
				t.Errorf("the second apply changed the Secrets (-before +after):\n%s", diff)
			}

			// A mutable field changes; the stored refs and the Secrets stay.
			deadline := want.DeepCopy()
			deadline.Spec.ProgressDeadlineMinutes = 30
			file = writeFile(t, deadline)
			if r := apply(); !strings.Contains(r.stdout, cosName+" configured") {
				t.Errorf("applying a new deadline printed %q", r.stdout)
			}
			got := getCOS(t, cosName)
			if got.Spec.ProgressDeadlineMinutes != 30 || !cmp.Equal(got.Spec.Phases, stored.Spec.Phases) {
				t.Errorf("after a deadline change: deadline %d, phases changed %v", got.Spec.ProgressDeadlineMinutes, !cmp.Equal(got.Spec.Phases, stored.Spec.Phases))
			}
			if diff := cmp.Diff(secrets, testenv.ResourceVersions(testenv.Env.ObjectDataSecrets(t, cosName))); diff != "" {
				t.Errorf("a deadline change changed the Secrets (-before +after):\n%s", diff)
			}

			// Changed objects are refused as the API refuses them, and nothing is written.
			changed := deadline.DeepCopy()
			changed.Spec.Phases[0].Objects[0].Object.SetLabels(map[string]string{"changed": "yes"})
			r := plugin(t, append([]string{"apply", "-f", writeFile(t, changed)}, args...)...)
			if r.err == nil || !strings.Contains(r.err.Error(), "phases is immutable; to change its objects, create a new ClusterObjectSet with a new name and the next revision") ||
				!strings.Contains(r.err.Error(), "cos.json:1: document 1 (ClusterObjectSet "+cosName+")") {
				t.Errorf("changed objects: want the immutable refusal naming the file, got %v", r.err)
			}
			if diff := cmp.Diff(secrets, testenv.ResourceVersions(testenv.Env.ObjectDataSecrets(t, cosName))); diff != "" {
				t.Errorf("a refused apply changed the Secrets (-before +after):\n%s", diff)
			}
		})
	}
}

// secretView is what must be byte-equal between the Secrets the webhook writes and those kubectl cos
// writes: everything but server-set metadata and the owner's uid.
type secretView struct {
	Name, Namespace string
	Labels          map[string]string
	Annotations     map[string]string
	Type            corev1.SecretType
	Immutable       bool
	Data            map[string][]byte
	Owners          []string
}

func viewOf(secrets []corev1.Secret) []secretView {
	var out []secretView
	for _, s := range secrets {
		// The last-used time says when a Secret was last reused (every reuse writes it), not what it is.
		annotations := maps.Clone(s.Annotations)
		delete(annotations, content.LastUsedAnnotation)
		if len(annotations) == 0 {
			annotations = nil
		}
		v := secretView{Name: s.Name, Namespace: s.Namespace, Labels: s.Labels, Annotations: annotations, Type: s.Type,
			Immutable: ptr.Deref(s.Immutable, false), Data: s.Data}
		for _, o := range s.OwnerReferences {
			v.Owners = append(v.Owners, fmt.Sprintf("%s %s %s controller=%v block=%v", o.APIVersion, o.Kind, o.Name, ptr.Deref(o.Controller, false), ptr.Deref(o.BlockOwnerDeletion, false)))
		}
		out = append(out, v)
	}
	return out
}

// TestPluginAndWebhookStoreTheSame applies the same inline ClusterObjectSet through the webhook
// (kubectl apply --server-side) and with kubectl cos apply, under the same name one after the other,
// and compares what is stored: the refs and the Secrets, byte for byte. Both are archived at
// creation: what is stored is the same, the reconciler still owns the Secrets, and nothing is rolled
// out, so the ten CRDs are not created and torn down between the two (their rollout:
// TestInspectPrometheusOperator, TestBuildExternalizeEqualsTheWebhook).
func TestPluginAndWebhookStoreTheSame(t *testing.T) {
	archived := builders.WithLifecycleState(olmv1.LifecycleStateArchived)
	prometheus, err := builders.Bundle("same-prometheus", "prometheus-operator-crds", "monitoring", archived)
	if err != nil {
		t.Fatal(err)
	}
	// A user's ref, kept as given by both, into a Secret outside the system namespace.
	userNS := "same-user-refs"
	testenv.Env.EnsureNamespace(t, userNS)
	given := builders.ConfigMap("same-mixed", "given", map[string]string{"k": "v"})
	data, err := content.Canonical(given.Object)
	if err != nil {
		t.Fatal(err)
	}
	userSecret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: userNS, Name: "given"}, Type: olmv1.SecretTypeObjectData,
		Immutable: ptr.To(true), Data: map[string][]byte{content.Key(data): data}}
	if err := c().Create(ctx, userSecret); client.IgnoreAlreadyExists(err) != nil {
		t.Fatal(err)
	}
	// Over 900 KiB of poorly compressible data: more than one Secret; small objects stay plain JSON.
	mixed := builders.COS("same-mixed", archived, builders.WithPhase("namespaces", builders.Inline(namespace("same-mixed"))),
		builders.WithPhase("configuration", append(bigConfigMaps("same-mixed", 12, 150_000),
			builders.Inline(builders.ConfigMap("same-mixed", "small", map[string]string{"a": "b"})),
			builders.Ref("given", userNS, content.Key(data)))...))

	for name, want := range map[string]*olmv1.ClusterObjectSet{"prometheus-operator": prometheus, "mixed": mixed} {
		t.Run(name, func(t *testing.T) {
			testenv.Env.RemoveWithSecretsAfter(t, want.Name)
			file := writeFile(t, want)

			testenv.MustKubectl(t, nil, "apply", "--server-side", "-f", file)
			byWebhook := getCOS(t, want.Name)
			webhookSecrets := viewOf(testenv.Env.WaitOwned(t, want.Name))
			testenv.Env.DeleteWithSecrets(t, want.Name)

			mustPlugin(t, "apply", "-f", file, "--server-side")
			byPlugin := getCOS(t, want.Name)
			pluginSecrets := viewOf(testenv.Env.WaitOwned(t, want.Name))

			if diff := cmp.Diff(byWebhook.Spec, byPlugin.Spec); diff != "" {
				t.Errorf("the stored specs differ (-webhook +plugin):\n%.3000s", diff)
			}
			if diff := cmp.Diff(webhookSecrets, pluginSecrets); diff != "" {
				t.Errorf("the Secrets differ (-webhook +plugin):\n%.3000s", diff)
			}
			if len(pluginSecrets) == 0 || (name == "mixed" && len(pluginSecrets) < 2) {
				t.Errorf("%d Secrets", len(pluginSecrets))
			}
			resolvesToWithUserRefs(t, want, byPlugin)
		})
	}
}

// resolvesToWithUserRefs is Environment.CheckExternalized for a ClusterObjectSet whose given refs
// stay refs.
func resolvesToWithUserRefs(t *testing.T, want, stored *olmv1.ClusterObjectSet) {
	t.Helper()
	inlineOnly := want.DeepCopy()
	storedOnly := stored.DeepCopy()
	for i, p := range want.Spec.Phases {
		for j := len(p.Objects) - 1; j >= 0; j-- {
			if p.Objects[j].IsRef() {
				if !cmp.Equal(p.Objects[j].Ref, stored.Spec.Phases[i].Objects[j].Ref) {
					t.Errorf("the given ref %v became %v", p.Objects[j].Ref, stored.Spec.Phases[i].Objects[j].Ref)
				}
				inlineOnly.Spec.Phases[i].Objects = append(inlineOnly.Spec.Phases[i].Objects[:j], inlineOnly.Spec.Phases[i].Objects[j+1:]...)
				storedOnly.Spec.Phases[i].Objects = append(storedOnly.Spec.Phases[i].Objects[:j], storedOnly.Spec.Phases[i].Objects[j+1:]...)
			}
		}
	}
	testenv.Env.CheckExternalized(t, inlineOnly, storedOnly)
}

func namespace(name string) *unstructured.Unstructured {
	u := builders.ConfigMap("", name, nil)
	u.SetKind("Namespace")
	return u
}

// bigConfigMaps returns n inline ConfigMaps of about size bytes of random hexadecimal each.
func bigConfigMaps(ns string, n, size int) []olmv1.ClusterObjectSetObject {
	r := rand.New(rand.NewPCG(7, uint64(n)))
	out := make([]olmv1.ClusterObjectSetObject, n)
	for i := range n {
		var b strings.Builder
		for b.Len() < size {
			fmt.Fprintf(&b, "%016x", r.Uint64())
		}
		out[i] = builders.Inline(builders.ConfigMap(ns, fmt.Sprintf("big-%02d", i), map[string]string{"blob": b.String()}))
	}
	return out
}

// errStopped plays a kubectl cos process killed between its two steps.
var errStopped = errors.New("stopped between the Secrets and the ClusterObjectSet")

// TestApplyStoppedBetweenSecretsAndClusterObjectSet stops kubectl cos apply after it wrote the
// Secrets and before it sent the ClusterObjectSet, as a killed process would stop: running it again
// completes (the Secrets are reused, not written twice); left alone, the orphan sweep deletes them.
func TestApplyStoppedBetweenSecretsAndClusterObjectSet(t *testing.T) {
	stop := commands.Hooks{AfterSecrets: func(_ context.Context, _ string) error { return errStopped }}
	stopped := func(t *testing.T, name string) (string, []corev1.Secret) {
		t.Helper()
		testenv.Env.RemoveWithSecretsAfter(t, name)
		want := builders.COS(name, builders.WithAnnotations(map[string]string{admission.Annotation: string(admission.ModeAlways)}),
			builders.WithPhase("configuration", bigConfigMaps("default", 14, 150_000)...))
		file := writeFile(t, want)
		r := pluginWith(t, stop, nil, "apply", "-f", file, "--server-side")
		if !errors.Is(r.err, errStopped) {
			t.Fatalf("apply with the stop hook: %v", r.err)
		}
		if cosExists(t, name) {
			t.Fatal("the ClusterObjectSet was sent")
		}
		secrets := testenv.Env.ObjectDataSecrets(t, name)
		if len(secrets) < 2 {
			t.Fatalf("%d Secrets written before the stop", len(secrets))
		}
		for _, s := range secrets {
			if len(s.OwnerReferences) > 0 {
				t.Errorf("Secret %s has owners before its ClusterObjectSet exists", s.Name)
			}
		}
		// inspect shows them as orphans of that name.
		ins := plugin(t, "inspect", name)
		for _, s := range secrets {
			if !strings.Contains(ins.stdout, testenv.SystemNamespace+"/"+s.Name+": not referenced") {
				t.Errorf("inspect does not list the orphan %s:\n%s", s.Name, ins.stdout)
			}
		}
		return file, secrets
	}

	t.Run("run again: completes", func(t *testing.T) {
		name := fmt.Sprintf("stopped-rerun-%d", time.Now().UnixNano()%1e6)
		file, first := stopped(t, name)
		r := mustPlugin(t, "apply", "-f", file, "--server-side")
		if !strings.Contains(r.stderr, fmt.Sprintf("0 created, %d already there", len(first))) {
			t.Errorf("the second run did not reuse the Secrets: %s", r.stderr)
		}
		testenv.Env.WaitForCondition(t, name, olmv1.ConditionSucceeded, metav1.ConditionTrue, "")
		owned := testenv.Env.WaitOwned(t, name)
		var names, firstNames []string
		for i := range owned {
			names = append(names, owned[i].Name)
		}
		for _, s := range first {
			firstNames = append(firstNames, s.Name)
		}
		if diff := cmp.Diff(firstNames, names); diff != "" {
			t.Errorf("the Secrets of the completed run differ from the stopped run's (-stopped +completed):\n%s", diff)
		}
	})

	t.Run("left alone: swept", func(t *testing.T) {
		name := fmt.Sprintf("stopped-swept-%d", time.Now().UnixNano()%1e6)
		_, secrets := stopped(t, name)
		// The manager's own sweep with its default grace period (5 minutes): it sees them unused, and
		// deletes them (keeping quarantine copies) once they stayed so for the grace period.
		clk := testingclock.NewFakePassiveClock(time.Now())
		sweeper := &controllers.OrphanSweeper{Metrics: controllers.NewMetrics(), Client: c(), APIReader: c(), SystemNamespace: testenv.SystemNamespace,
			GracePeriod: 5 * time.Minute, RestoreWindow: 2 * time.Minute, Clock: clk}
		framework.Eventually(ctx, t, "the sweep to see the Secrets unused", func(ctx context.Context) (bool, string) {
			if _, err := sweeper.Sweep(ctx); err != nil {
				return false, err.Error()
			}
			for _, s := range secrets {
				cur := &corev1.Secret{}
				if err := c().Get(ctx, client.ObjectKeyFromObject(&s), cur); apierrors.IsNotFound(err) {
					continue
				} else if err != nil {
					return false, err.Error()
				}
				if !sweeper.SeenUnused(cur.UID) {
					return false, "Secret " + s.Name + " not seen unused"
				}
			}
			return true, ""
		})
		clk.SetTime(clk.Now().Add(sweeper.GracePeriod))
		if _, err := sweeper.Sweep(ctx); err != nil {
			t.Fatal(err)
		}
		if left := testenv.Env.ObjectDataSecrets(t, name); len(left) > 0 {
			t.Errorf("%d of %d Secrets left after the sweep", len(left), len(secrets))
		}
	})
}

// TestApplyWithoutWebhook: with no webhook installed, kubectl cos apply stores the same form; the
// reconciler, started afterwards, owns the Secrets and rolls it out.
func TestApplyWithoutWebhook(t *testing.T) {
	const name = "no-webhook"
	testenv.Env.RemoveWithSecretsAfter(t, name)
	if err := manager.Stop(); err != nil {
		t.Fatal(err)
	}
	if err := testenv.Env.RemoveWebhooks(ctx); err != nil {
		t.Fatal(err)
	}
	started := false
	t.Cleanup(func() {
		if !started {
			if m, err := startManager(ctx); err != nil {
				t.Errorf("starting the manager again: %v", err)
			} else {
				manager = m
			}
		}
	})
	want, err := builders.Bundle(name, "argocd-install", "argocd")
	if err != nil {
		t.Fatal(err)
	}
	testenv.Env.EnsureNamespace(t, "argocd")
	file := writeFile(t, want)
	r := mustPlugin(t, "apply", "-f", file)
	if !strings.Contains(r.stderr, "externalized 59 objects into 1 Secret") {
		t.Errorf("apply printed: %s", r.stderr)
	}
	testenv.Env.CheckExternalized(t, want, getCOS(t, name))
	for _, s := range testenv.Env.ObjectDataSecrets(t, name) {
		if len(s.OwnerReferences) > 0 {
			t.Errorf("Secret %s is owned with no manager running", s.Name)
		}
	}

	m, err := startManager(ctx)
	if err != nil {
		t.Fatal(err)
	}
	manager, started = m, true
	testenv.Env.WaitOwned(t, name)
	testenv.Env.WaitForCondition(t, name, olmv1.ConditionSucceeded, metav1.ConditionTrue, "")
}

// TestKubectlRunsThePlugin: kubectl finds kubectl-cos on PATH, and completes its arguments through
// kubectl_complete-cos.
func TestKubectlRunsThePlugin(t *testing.T) {
	t.Parallel() // it writes nothing to the cluster
	dir := pluginBinaries(t)
	out, stderr, err := kubectlWithPlugin(t, "plugin", "list")
	if err != nil || !strings.Contains(out, filepath.Join(dir, "kubectl-cos")) {
		t.Errorf("kubectl plugin list: %v\n%s\n%s", err, out, stderr)
	}
	file := writeFile(t, builders.COS("plugin-size", builders.WithPhase("configuration", builders.InlineConfigMaps("default", "x", 2)...)))
	out, stderr, err = kubectlWithPlugin(t, "cos", "size", "-f", file)
	if err != nil || !strings.Contains(out, "ClusterObjectSet plugin-size: 2 objects in 1 phase") {
		t.Errorf("kubectl cos size: %v\n%s\n%s", err, out, stderr)
	}
	out, stderr, err = kubectlWithPlugin(t, "__complete", "cos", "ins")
	if err != nil || !strings.Contains(out, "inspect") {
		t.Errorf("kubectl completion of kubectl cos: %v\n%s\n%s", err, out, stderr)
	}
	if _, err := os.Stat(filepath.Join(dir, "kubectl_complete-cos")); err != nil {
		t.Error(err)
	}
}

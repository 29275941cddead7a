package webhook_test

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	olmv1 "github.com/cos-externalizer/cos-externalizer/api/v1"
	"github.com/cos-externalizer/cos-externalizer/test/builders"
	"github.com/cos-externalizer/cos-externalizer/test/framework"
	"github.com/cos-externalizer/cos-externalizer/test/testenv"
	"github.com/cos-externalizer/cos-externalizer/webhook/admission"
)

// TestUnreferencedWritesAreBounded: creates whose Secrets no ClusterObjectSet will reference (here the
// API server's storage refuses them after admission, for the resourceVersion they carry, as a forger
// or a create that fails after admission for any reason leaves them) fill the bound; past it, creates are refused with
// 429 before anything is written, and the bytes written stay under the bound.
func TestUnreferencedWritesAreBounded(t *testing.T) {
	const (
		perCOS   = 200_000 // random, so stored uncompressed
		maxBytes = 3 * perCOS
		creates  = 8
	)
	withManager(t, "--max-unreferenced-bytes="+strconv.Itoa(maxBytes))
	ctx := context.Background()
	before := secretNames(t)
	t.Cleanup(func() {
		for _, name := range written(t, before) {
			sec := &corev1.Secret{}
			sec.Namespace, sec.Name = testenv.SystemNamespace, name
			_ = testenv.Env.Client.Delete(context.Background(), sec)
		}
	})
	var tooMany int
	for i := range creates {
		blob := make([]byte, perCOS*3/4)
		if _, err := rand.Read(blob); err != nil {
			t.Fatal(err)
		}
		name := fmt.Sprintf("unreferenced-%d", i)
		err := createUnreferenced(ctx, t, name, map[string]string{"blob": base64.StdEncoding.EncodeToString(blob)})
		switch {
		case apierrors.IsTooManyRequests(err):
			tooMany++
			if !strings.Contains(err.Error(), "--max-unreferenced-bytes=") || !strings.Contains(err.Error(), "nothing was written") {
				t.Errorf("%s: the refusal does not name the flag: %v", name, err)
			}
		case tooMany > 0:
			t.Errorf("%s: refused otherwise after a 429: %v", name, err)
		}
	}
	var stored int
	for _, name := range written(t, before) {
		sec := &corev1.Secret{}
		if err := testenv.Env.Client.Get(ctx, client.ObjectKey{Namespace: testenv.SystemNamespace, Name: name}, sec); err != nil {
			t.Fatal(err)
		}
		for k, v := range sec.Data {
			stored += len(k) + len(v)
		}
	}
	t.Logf("%d of %d creates refused with 429; %d bytes of object-data Secrets written (bound %d)", tooMany, creates, stored, maxBytes)
	if tooMany < creates-maxBytes/perCOS {
		t.Errorf("%d creates refused with 429, want at least %d", tooMany, creates-maxBytes/perCOS)
	}
	if stored > maxBytes {
		t.Errorf("%d bytes written, over the bound of %d", stored, maxBytes)
	}
}

// TestUnreferencedCountsTheCluster: the bound counts the unreferenced object-data Secrets that exist,
// not those one process wrote: Secrets written before the manager started (by another replica, or by
// this one before a restart) fill it, and a restarted manager still finds it full. A Secret leaves
// the count once a ClusterObjectSet references it, an existing one owns it, or it is deleted. The
// manager runs on a system namespace of its own, so that no other test's Secrets count.
func TestUnreferencedCountsTheCluster(t *testing.T) {
	ctx := context.Background()
	suffix := make([]byte, 4)
	if _, err := rand.Read(suffix); err != nil {
		t.Fatal(err)
	}
	ns := fmt.Sprintf("ledger-%x", suffix)
	testenv.Env.EnsureNamespace(t, ns)
	t.Cleanup(func() {
		_ = testenv.Env.Client.Delete(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})
	})
	earlier := make([]*corev1.Secret, 3)
	for i := range earlier {
		earlier[i] = &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: fmt.Sprintf("earlier-%d-0123456789abcdef", i),
			Labels: map[string]string{olmv1.LabelRevisionName: fmt.Sprintf("earlier-%d", i)}},
			Type: olmv1.SecretTypeObjectData, Immutable: ptr.To(true), Data: map[string][]byte{"k": []byte(`{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"e","namespace":"default"}}`)}}
		if err := testenv.Env.Client.Create(ctx, earlier[i]); err != nil {
			t.Fatal(err)
		}
	}
	args := []string{"--system-namespace=" + ns, "--max-unreferenced-secrets=3"}
	withManager(t, args...)
	testenv.Env.RemoveAfter(t, "ledger-user")
	// attempt is a create refused by the API server's storage after admission (its resourceVersion):
	// the webhook writes its Secret, which nothing will reference, unless it refuses with 429 first.
	attempt := func(name string) (tooMany bool) {
		t.Helper()
		if err := createUnreferenced(ctx, t, name, map[string]string{"k": "v"}); apierrors.IsTooManyRequests(err) {
			if !strings.Contains(err.Error(), "--max-unreferenced-secrets=3") {
				t.Errorf("%s: the refusal does not name the flag: %v", name, err)
			}
			return true
		}
		return false
	}
	refused := func(name, why string) {
		t.Helper()
		if !attempt(name) {
			t.Fatalf("%s: admitted, want 429: %s", name, why)
		}
	}
	admittedOnce := func(name, after string) {
		t.Helper()
		framework.Eventually(ctx, t, name+" to be admitted once "+after, func(context.Context) (bool, string) {
			return !attempt(name), "refused with 429"
		})
	}
	pending := func(want int) {
		t.Helper()
		framework.Eventually(ctx, t, fmt.Sprintf("the manager to count %d unreferenced Secrets", want), func(ctx context.Context) (bool, string) {
			text, err := testenv.ScrapeMetrics(ctx, manager.MetricsURL)
			if err != nil {
				return false, err.Error()
			}
			got, err := testenv.SumMetric(strings.NewReader(text), "cos_externalizer_unreferenced_secrets ")
			return err == nil && got == float64(want), fmt.Sprintf("%v (%v)", got, err)
		})
	}
	pending(3)
	refused("ledger-a", "three Secrets written before the manager started fill the bound")

	// Referenced by a live ClusterObjectSet: out of the count.
	user := builders.COS("ledger-user", builders.WithPhase("configuration", builders.Ref(earlier[0].Name, "", "k")))
	if err := testenv.Env.Client.Create(ctx, user); err != nil {
		t.Fatal(err)
	}
	admittedOnce("ledger-a", "a ClusterObjectSet references one of them")
	refused("ledger-b", "ledger-a's Secret takes the room")

	// Owned by an existing ClusterObjectSet: out of the count.
	if err := testenv.Env.Client.Get(ctx, client.ObjectKeyFromObject(user), user); err != nil {
		t.Fatal(err)
	}
	owned := earlier[1].DeepCopy()
	patch := client.MergeFrom(owned.DeepCopy())
	owned.OwnerReferences = []metav1.OwnerReference{{APIVersion: olmv1.GroupVersion.String(), Kind: olmv1.ClusterObjectSetKind, Name: user.Name, UID: user.UID}}
	if err := testenv.Env.Client.Patch(ctx, owned, patch); err != nil {
		t.Fatal(err)
	}
	admittedOnce("ledger-b", "an existing ClusterObjectSet owns one of them")
	refused("ledger-c", "ledger-b's Secret takes the room")

	// Deleted: out of the count.
	if err := testenv.Env.Client.Delete(ctx, earlier[2]); err != nil {
		t.Fatal(err)
	}
	admittedOnce("ledger-c", "one of them is deleted")

	// A restart (or another replica) counts what the last one wrote: still full.
	if err := manager.Stop(); err != nil {
		t.Fatal(err)
	}
	m, err := testenv.Env.StartManager(ctx, append([]string{"--rollout=false"}, args...)...)
	if err != nil {
		t.Fatalf("starting the manager again: %v", err)
	}
	manager = m
	pending(3)
	refused("ledger-d", "the Secrets of ledger-a, -b and -c, written before the restart, fill the bound")
}

// createUnreferenced creates the ClusterObjectSet name with one inline ConfigMap of data (externalize:
// always) that the API server's storage refuses after admission, for the resourceVersion it carries,
// as a forger, or a create that fails after admission for any reason, leaves it: the webhook writes
// its Secret, which nothing will reference, unless it refuses first. It returns the API server's
// error, never nil. No retries: client-go retries a 429 with Retry-After by itself.
func createUnreferenced(ctx context.Context, t *testing.T, name string, data map[string]string) error {
	t.Helper()
	cos := builders.COS(name, builders.WithAnnotations(map[string]string{admission.Annotation: string(admission.ModeAlways)}),
		builders.WithPhase("configuration", builders.Inline(builders.ConfigMap("default", name, data))))
	cos.ResourceVersion = "1"
	body, err := json.Marshal(cos)
	if err != nil {
		t.Fatal(err)
	}
	err = testenv.Env.Clientset.CoreV1().RESTClient().Post().AbsPath("/apis/olm.operatorframework.io/v1/clusterobjectsets").
		SetHeader("Content-Type", "application/json").Body(body).MaxRetries(0).Do(ctx).Error()
	if err == nil {
		t.Fatalf("%s was stored: the API server should refuse a create with a resourceVersion", name)
	}
	return err
}

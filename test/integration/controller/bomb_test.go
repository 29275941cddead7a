package controller_test

import (
	"bytes"
	"compress/gzip"
	"context"
	"fmt"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	olmv1 "github.com/cos-externalizer/cos-externalizer/api/v1"
	"github.com/cos-externalizer/cos-externalizer/internal/content"
	"github.com/cos-externalizer/cos-externalizer/test/builders"
	"github.com/cos-externalizer/cos-externalizer/test/framework"
	"github.com/cos-externalizer/cos-externalizer/test/testenv"
)

// bombMarker is in the bomb's content, to check that no message quotes it.
const bombMarker = "bomb-marker-do-not-leak"

// gzipBomb returns about 10 KB of gzip that inflates to a ConfigMap of just under
// content.MaxDecompressedSize bytes of JSON (each value alone is allowed), and that size.
func gzipBomb(t *testing.T) ([]byte, int) {
	t.Helper()
	size := content.MaxDecompressedSize - 1024
	head := `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"` + bombMarker + `","namespace":"default"},"data":{"x":"`
	tail := `"}}`
	var buf bytes.Buffer
	zw, _ := gzip.NewWriterLevel(&buf, gzip.BestCompression)
	_, _ = zw.Write([]byte(head + strings.Repeat("a", size-len(head)-len(tail)) + tail))
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes(), size
}

// TestGzipBombRefsAreBlocked: a thousand refs (20 phases of 50, the most the CRD allows) to one
// 10 KB gzip bomb would inflate to 10 GB; the per-ClusterObjectSet budget (--max-resolved-bytes,
// 64 MiB by default) blocks the rollout after six refs instead, the webhook refuses to compare more
// than the budget, and deleting the ClusterObjectSet (teardown resolves again) still completes.
func TestGzipBombRefsAreBlocked(t *testing.T) {
	stored, size := gzipBomb(t)
	key := content.Key(stored)
	t.Logf("bomb: %d bytes stored, %d inflated", len(stored), size)
	const name = "gzip-bomb"
	sec := objectDataSecret(name+"-data", name, map[string][]byte{key: stored, "plain-key": stored})
	if err := c().Create(ctx, sec); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c().Delete(ctx, sec) })

	refs := func(key string) []builders.Option {
		var opts []builders.Option
		for i := range 20 {
			objs := make([]olmv1.ClusterObjectSetObject, 50)
			for j := range objs {
				objs[j] = builders.Ref(sec.Name, "", key)
			}
			opts = append(opts, builders.WithPhase(fmt.Sprintf("p%02d", i), objs...))
		}
		return opts
	}
	cos := builders.COS(name, refs(key)...)
	create(t, cos)

	// 6 refs fit in 64 MiB; the 7th (phase p00, object 6) does not.
	got := testenv.Env.WaitForCondition(t, name, olmv1.ConditionProgressing, metav1.ConditionFalse, olmv1.ReasonBlocked)
	msg := apimeta.FindStatusCondition(got.Status.Conditions, olmv1.ConditionProgressing).Message
	want := fmt.Sprintf(`resolving ref in phase "p00": key %q in Secret %s/%s: the resolved content of this ClusterObjectSet exceeds the limit of %d bytes (--max-resolved-bytes)`,
		key, testenv.SystemNamespace, name+"-data", content.DefaultMaxResolvedBytes)
	if msg != want {
		t.Errorf("Blocked message\n%q, want\n%q", msg, want)
	}
	if strings.Contains(msg, bombMarker) || strings.Contains(msg, "aaaa") {
		t.Errorf("Blocked message quotes content: %q", msg)
	}

	// An update to refs under another key of the same content makes the webhook compare both sides:
	// two values per object, so the budget runs out at object 3, and the update is refused.
	wc, seen := testenv.Env.WarningClient(t)
	update := getCOS(t, name)
	update.Spec.Phases = builders.COS(name, refs("plain-key")...).Spec.Phases
	err := wc.Update(ctx, update)
	if !apierrors.IsInvalid(err) {
		t.Errorf("update to other refs: %v, want Invalid (a change of immutable phases)", err)
	}
	budgetWarning := ""
	for _, w := range seen.List() {
		if strings.Contains(w, bombMarker) || strings.Contains(w, "aaaa") {
			t.Errorf("warning quotes content: %q", w)
		}
		if strings.Contains(w, "--max-resolved-bytes") {
			budgetWarning = w
		}
	}
	if !strings.Contains(budgetWarning, `phase "p00" object 3: the resolved content exceeds the limit of 67108864 bytes`) {
		t.Errorf("no warning about the budget at phase p00 object 3; warnings: %q", seen.List())
	}
	if err != nil && (strings.Contains(err.Error(), bombMarker) || strings.Contains(err.Error(), "aaaa")) {
		t.Errorf("refusal quotes content: %v", err)
	}

	// Teardown resolves the refs again, within the same budget, and completes.
	if err := c().Delete(ctx, got); err != nil {
		t.Fatal(err)
	}
	framework.Eventually(ctx, t, "the ClusterObjectSet to be gone", func(ctx context.Context) (bool, string) {
		err := c().Get(ctx, client.ObjectKey{Name: name}, &olmv1.ClusterObjectSet{})
		return apierrors.IsNotFound(err), fmt.Sprint(err)
	})
	framework.Eventually(ctx, t, "the Secret to be gone", func(ctx context.Context) (bool, string) {
		err := c().Delete(ctx, &corev1.Secret{ObjectMeta: sec.ObjectMeta})
		return apierrors.IsNotFound(err), fmt.Sprint(err)
	})
}

// containerBomb returns about 10 KB of gzip that inflates to a ConfigMap-like object of just under
// content.MaxDecompressedSize bytes of JSON holding 3.5 million empty objects (`[{},{},...]`):
// 3 bytes of JSON each, some 80 bytes of heap once parsed. i makes each different.
func containerBomb(t *testing.T, i int) []byte {
	t.Helper()
	head := fmt.Sprintf(`{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"%s-%d","namespace":"default"},"data":[`, bombMarker, i)
	var buf bytes.Buffer
	zw, _ := gzip.NewWriterLevel(&buf, gzip.BestCompression)
	_, _ = zw.Write([]byte(head + strings.Repeat("{},", (content.MaxDecompressedSize-1024-len(head))/3) + "{}]}"))
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// TestContainerBombRefsAreBlocked: six refs to different 10 KB values, with valid content keys, of
// 3.5 million empty objects each: parsed, they took 1.6 GB of heap, over the manager's 1 GiB limit,
// and every new leader crash-looped on them. The budget charges a value the heap its object would
// take, estimated before parsing, so the first ref is refused: the COS is Blocked, the webhook's
// comparison of an update refuses it the same way, and the manager keeps serving (it tears the COS
// down).
func TestContainerBombRefsAreBlocked(t *testing.T) {
	const name = "container-bomb"
	data := map[string][]byte{}
	var keys []string
	for i := range 6 {
		v := containerBomb(t, i)
		key := content.Key(v)
		keys = append(keys, key)
		data[key] = v
		data[fmt.Sprintf("plain-%d", i)] = v
	}
	sec := objectDataSecret(name+"-data", name, data)
	if err := c().Create(ctx, sec); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c().Delete(ctx, sec) })
	refs := func(key func(i int) string) []olmv1.ClusterObjectSetObject {
		objs := make([]olmv1.ClusterObjectSetObject, len(keys))
		for i := range objs {
			objs[i] = builders.Ref(sec.Name, "", key(i))
		}
		return objs
	}
	create(t, builders.COS(name, builders.WithPhase("p", refs(func(i int) string { return keys[i] })...)))

	got := testenv.Env.WaitForCondition(t, name, olmv1.ConditionProgressing, metav1.ConditionFalse, olmv1.ReasonBlocked)
	msg := apimeta.FindStatusCondition(got.Status.Conditions, olmv1.ConditionProgressing).Message
	want := fmt.Sprintf(`resolving ref in phase "p": key %q in Secret %s/%s: the resolved content of this ClusterObjectSet exceeds the limit of %d bytes (--max-resolved-bytes)`,
		keys[0], testenv.SystemNamespace, sec.Name, content.DefaultMaxResolvedBytes)
	if msg != want {
		t.Errorf("Blocked message\n%q, want\n%q", msg, want)
	}

	// The webhook compares an update to the plain keys with the stored refs: the first stored value
	// is refused by the budget, so the update is refused as a change of immutable phases.
	wc, seen := testenv.Env.WarningClient(t)
	update := getCOS(t, name)
	update.Spec.Phases = builders.COS(name, builders.WithPhase("p", refs(func(i int) string { return fmt.Sprintf("plain-%d", i) })...)).Spec.Phases
	if err := wc.Update(ctx, update); !apierrors.IsInvalid(err) {
		t.Errorf("update to other refs: %v, want Invalid (a change of immutable phases)", err)
	} else if strings.Contains(err.Error(), bombMarker) {
		t.Errorf("refusal quotes content: %v", err)
	}
	budgetWarning := ""
	for _, w := range seen.List() {
		if strings.Contains(w, bombMarker) {
			t.Errorf("warning quotes content: %q", w)
		}
		if strings.Contains(w, "--max-resolved-bytes") {
			budgetWarning = w
		}
	}
	if !strings.Contains(budgetWarning, `phase "p" object 0: the resolved content exceeds the limit of 67108864 bytes (the limit is --max-resolved-bytes)`) {
		t.Errorf("no warning about the budget at phase p object 0; warnings: %q", seen.List())
	}

	// The manager lives on: it tears the ClusterObjectSet down.
	if err := c().Delete(ctx, got); err != nil {
		t.Fatal(err)
	}
	framework.Eventually(ctx, t, "the ClusterObjectSet to be gone", func(ctx context.Context) (bool, string) {
		err := c().Get(ctx, client.ObjectKey{Name: name}, &olmv1.ClusterObjectSet{})
		return apierrors.IsNotFound(err), fmt.Sprint(err)
	})
}

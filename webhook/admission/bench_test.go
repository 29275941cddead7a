package admission_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"

	olmv1 "github.com/cos-externalizer/cos-externalizer/api/v1"
	"github.com/cos-externalizer/cos-externalizer/internal/content"
	"github.com/cos-externalizer/cos-externalizer/internal/secretdata"
	b "github.com/cos-externalizer/cos-externalizer/test/builders"
	"github.com/cos-externalizer/cos-externalizer/webhook/admission"
	"github.com/cos-externalizer/cos-externalizer/webhook/admission/admissiontest"
)

// BenchmarkReapply is a re-apply of the same inline objects over a stored ClusterObjectSet of refs
// (kubectl apply of unchanged manifests): the pipeline decides by plan first. For comparison,
// "resolve" is what deciding by resolving the stored refs alone costs (admission.SameContent).
func BenchmarkReapply(b *testing.B) {
	for _, size := range []int{1 << 20, 5 << 20} {
		inline, stored, store := reapplyFixture(b, size)
		b.Run(fmt.Sprintf("pipeline/%dMiB", size>>20), func(b *testing.B) {
			p := &admission.Pipeline{Store: store, SystemNamespace: ns}
			for b.Loop() {
				r := p.Admit(context.Background(), admission.Request{Operation: admission.Update, Old: stored, New: inline})
				if r.Refusal != nil || !r.Stats.Kept {
					b.Fatalf("not kept: %+v", r.Refusal)
				}
			}
		})
		b.Run(fmt.Sprintf("resolve/%dMiB", size>>20), func(b *testing.B) {
			for b.Loop() {
				resolve := secretdata.SecretResolver(context.Background(), secretdata.ResolveMemory{}, store.GetSecret, ns)
				if same, err := admission.SameContent(stored.Spec.Phases, inline.Spec.Phases, ns, resolve); err != nil || !same {
					b.Fatal(same, err)
				}
			}
		})
	}
}

// reapplyFixture is an inline ClusterObjectSet of about size bytes of poorly compressible
// ConfigMaps, its stored form and a Store with its Secrets.
func reapplyFixture(tb testing.TB, size int) (inline, stored *olmv1.ClusterObjectSet, store *admissiontest.Store) {
	r := rand.New(rand.NewPCG(1, 2))
	var objs []olmv1.ClusterObjectSetObject
	for i := range size / (64 << 10) {
		var s strings.Builder
		for s.Len() < 64<<10 {
			fmt.Fprintf(&s, "%016x", r.Uint64())
		}
		objs = append(objs, b.Inline(b.ConfigMap("default", fmt.Sprintf("cm-%03d", i), map[string]string{"blob": s.String()})))
	}
	inline = b.COS("bench", b.WithAnnotations(map[string]string{admission.Annotation: string(admission.ModeAlways)}), b.WithPhase("p", objs...))
	plan, err := content.PlanFor(inline.Name, admission.PlanInput(inline), content.Options{})
	if err != nil {
		tb.Fatal(err)
	}
	store = admissiontest.NewStore(ns)
	if _, err := store.Write(context.Background(), inline.Name, plan, false); err != nil {
		tb.Fatal(err)
	}
	stored = inline.DeepCopy()
	stored.Spec.Phases = admission.WithRefs(inline.Spec.Phases, plan, ns)
	return inline, stored, store
}

// Package objectdata_test runs the object-data writer and resolver (package objectdata) against a
// real API server.
package objectdata_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	utilrand "k8s.io/apimachinery/pkg/util/rand"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	olmv1 "github.com/cos-externalizer/cos-externalizer/api/v1"
	"github.com/cos-externalizer/cos-externalizer/internal/content"
	"github.com/cos-externalizer/cos-externalizer/internal/kube/objectdata"
	"github.com/cos-externalizer/cos-externalizer/internal/secretdata"
	"github.com/cos-externalizer/cos-externalizer/test/builders"
	"github.com/cos-externalizer/cos-externalizer/test/testenv"
)

// The writer and the resolver run against a real API server; each case has its own namespace.
func TestMain(m *testing.M) { testenv.Run(m) }

func freshNamespace(t *testing.T) string {
	t.Helper()
	ns := "objectdata-" + utilrand.String(8)
	testenv.Env.EnsureNamespace(t, ns)
	return ns
}

// create creates objs in namespace ns (the namespaced ones) and returns them as stored.
func create(t *testing.T, ns string, objs ...client.Object) {
	t.Helper()
	for _, o := range objs {
		if _, ok := o.(*corev1.Secret); ok {
			o.SetNamespace(ns)
		}
		if err := testenv.Env.Client.Create(context.Background(), o); err != nil {
			t.Fatal(err)
		}
	}
}

func plan(t *testing.T) *content.Plan {
	t.Helper()
	in := content.Input{Phases: []content.PhaseInput{{Name: "p", Objects: []content.ObjectInput{
		{Object: map[string]any{"apiVersion": "v1", "kind": "ConfigMap", "metadata": map[string]any{"name": "a", "namespace": "n"}}},
		{Object: map[string]any{"apiVersion": "v1", "kind": "ConfigMap", "metadata": map[string]any{"name": "b", "namespace": "n"}}},
	}}}}
	p, err := content.PlanFor("app", in, content.Options{})
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func TestWrite(t *testing.T) {
	// At most one owner is the controller (the API server refuses more).
	owner := func(name, uid string, controller bool) metav1.OwnerReference {
		return metav1.OwnerReference{APIVersion: olmv1.GroupVersion.String(), Kind: olmv1.ClusterObjectSetKind, Name: name, UID: types.UID(uid), Controller: ptr.To(controller)}
	}
	// existing returns the planned Secret, changed.
	existing := func(p *content.Plan, change func(*corev1.Secret)) *corev1.Secret {
		s := secretdata.ObjectDataSecret("app", "", p.Secrets[0])
		change(s)
		return s
	}
	recently := content.LastUsedValue(time.Now())
	var liveUID string
	tests := map[string]struct {
		existing    func(*testing.T, *content.Plan) []client.Object
		dryRun      bool
		wantCreated int
		wantErr     string
		// check looks at the Secret after the write.
		check func(t *testing.T, s *corev1.Secret, found bool, before string)
	}{
		"created": {
			wantCreated: 1,
			check: func(t *testing.T, s *corev1.Secret, found bool, _ string) {
				if !found || s.Type != olmv1.SecretTypeObjectData || !ptr.Deref(s.Immutable, false) || len(s.OwnerReferences) > 0 || len(s.Annotations) > 0 {
					t.Errorf("created Secret: %+v", s)
				}
			},
		},
		// A reuse writes nothing when there is no dead owner to drop (issue 35): no request can make
		// the webhook rewrite a Secret it did not create over and over.
		"reused: nothing written": {
			existing: func(_ *testing.T, p *content.Plan) []client.Object {
				return []client.Object{existing(p, func(s *corev1.Secret) {
					s.Annotations = map[string]string{content.LastUsedAnnotation: recently, "marker": "kept"}
				})}
			},
			check: func(t *testing.T, s *corev1.Secret, _ bool, before string) {
				if s.ResourceVersion != before || s.Annotations["marker"] != "kept" || s.Annotations[content.LastUsedAnnotation] != recently {
					t.Errorf("the reused Secret was written: resourceVersion %s (was %s), annotations %v", s.ResourceVersion, before, s.Annotations)
				}
			},
		},
		"owner gone: dropped": {
			existing: func(t *testing.T, p *content.Plan) []client.Object {
				live := builders.COS("objectdata-live", builders.WithPhase("p", builders.Inline(builders.ConfigMap("n", "c", nil))))
				create(t, "", live)
				t.Cleanup(func() { _ = testenv.Env.Client.Delete(context.Background(), live) })
				liveUID = string(live.UID)
				return []client.Object{
					existing(p, func(s *corev1.Secret) {
						s.Annotations = map[string]string{content.LastUsedAnnotation: recently}
						s.OwnerReferences = []metav1.OwnerReference{owner("app", "old-uid", true), owner("objectdata-live", liveUID, false)}
					}),
				}
			},
			check: func(t *testing.T, s *corev1.Secret, _ bool, _ string) {
				if diff := cmp.Diff([]metav1.OwnerReference{owner("objectdata-live", liveUID, false)}, s.OwnerReferences); diff != "" {
					t.Errorf("owners (-want +got):\n%s", diff)
				}
			},
		},
		"not ours: refused": {
			existing: func(_ *testing.T, p *content.Plan) []client.Object {
				return []client.Object{existing(p, func(s *corev1.Secret) { s.Immutable = nil; s.Labels = nil })}
			},
			wantErr: "already exists and cannot be used: it is not immutable, it belongs to another ClusterObjectSet; delete it or rename the ClusterObjectSet",
		},
		"dry run: nothing written": {
			dryRun: true,
			check: func(t *testing.T, _ *corev1.Secret, found bool, _ string) {
				if found {
					t.Error("a dry run created the Secret")
				}
			},
		},
		"dry run: a Secret not ours is refused": {
			dryRun: true,
			existing: func(_ *testing.T, p *content.Plan) []client.Object {
				return []client.Object{existing(p, func(s *corev1.Secret) { s.Data = map[string][]byte{"k": []byte("other")} })}
			},
			wantErr: "its data differs from the content it must hold",
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			p := plan(t)
			ns := freshNamespace(t)
			c := testenv.Env.Client
			before := ""
			if tc.existing != nil {
				objs := tc.existing(t, p)
				create(t, ns, objs...)
				before = objs[0].GetResourceVersion()
			}
			var mu sync.Mutex
			var written []int
			w := &objectdata.Writer{Client: c, Reader: c, Namespace: ns, Written: func(i int, _ bool) {
				mu.Lock()
				defer mu.Unlock()
				written = append(written, i)
			}}
			n, err := w.Write(context.Background(), "app", p, tc.dryRun)
			if tc.wantErr != "" {
				var conflict *secretdata.ConflictError
				if !errors.As(err, &conflict) || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("error %v, want a ConflictError with %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if n != tc.wantCreated || len(written) != len(p.Secrets) {
				t.Errorf("created %d (want %d), Written called %d times", n, tc.wantCreated, len(written))
			}
			got := &corev1.Secret{}
			err = c.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: p.Secrets[0].Name}, got)
			if err != nil && !apierrors.IsNotFound(err) {
				t.Fatal(err)
			}
			if tc.check != nil {
				tc.check(t, got, err == nil, before)
			}
		})
	}
}

func TestResolver(t *testing.T) {
	p := plan(t)
	ns := freshNamespace(t)
	sec := secretdata.ObjectDataSecret("app", ns, p.Secrets[0])
	create(t, ns, sec)
	c := testenv.Env.Client
	resolve := objectdata.Resolver(context.Background(), c, ns, secretdata.ResolveMemory{})
	obj, err := resolve(olmv1.ObjectSourceRef{Name: sec.Name, Key: p.Refs[0][0].Key})
	if err != nil || obj["metadata"].(map[string]any)["name"] != "a" {
		t.Fatalf("resolve: %v, %v", obj, err)
	}
	for name, tc := range map[string]struct {
		ref  olmv1.ObjectSourceRef
		want string
	}{
		"missing Secret": {olmv1.ObjectSourceRef{Name: "gone", Key: "k"}, `reading Secret ` + ns + `/gone: secrets "gone" not found`},
		"missing key":    {olmv1.ObjectSourceRef{Name: sec.Name, Key: "k"}, `has no key "k"`},
		"other namespace": {olmv1.ObjectSourceRef{Name: sec.Name, Namespace: "elsewhere", Key: p.Refs[0][0].Key},
			"reading Secret elsewhere/" + sec.Name},
	} {
		t.Run(name, func(t *testing.T) {
			if _, err := resolve(tc.ref); err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %v, want %q", err, tc.want)
			}
		})
	}
	tiny := objectdata.Resolver(context.Background(), c, ns, secretdata.ResolveMemory{MaxResolvedBytes: 10})
	if _, err := tiny(olmv1.ObjectSourceRef{Name: sec.Name, Key: p.Refs[0][0].Key}); !errors.Is(err, content.ErrBudgetExceeded) ||
		!strings.Contains(err.Error(), "(the limit is --max-resolved-bytes)") {
		t.Errorf("over the budget: %v", err)
	}
}

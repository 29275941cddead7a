package inspect

import (
	"bytes"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	olmv1 "github.com/cos-externalizer/cos-externalizer/api/v1"
	"github.com/cos-externalizer/cos-externalizer/internal/content"
	"github.com/cos-externalizer/cos-externalizer/internal/phasedigest"
	"github.com/cos-externalizer/cos-externalizer/internal/secretdata"
	"github.com/cos-externalizer/cos-externalizer/webhook/admission"
)

const sys = "olmv1-system"

// secretValue is in every ConfigMap: no rendered report may show it.
const secretValue = "TOP-SECRET-VALUE"

var now = time.Date(2026, 11, 24, 12, 0, 0, 0, time.UTC)

// fixture is a ClusterObjectSet of two phases, externalized (big ConfigMaps are gzipped), with its
// Secrets owned by it, the first phase completed with its digest latched.
func fixture(t *testing.T) (*olmv1.ClusterObjectSet, map[string]SecretRead) {
	t.Helper()
	cm := func(name string, size int) olmv1.ClusterObjectSetObject {
		return olmv1.ClusterObjectSetObject{Object: unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "v1", "kind": "ConfigMap", "metadata": map[string]any{"name": name, "namespace": "app"},
			"data": map[string]any{"v": secretValue + strings.Repeat("x", size)},
		}}}
	}
	c := &olmv1.ClusterObjectSet{
		ObjectMeta: metav1.ObjectMeta{Name: "app", UID: "uid-1", CreationTimestamp: metav1.NewTime(now.Add(-time.Hour))},
		Spec: olmv1.ClusterObjectSetSpec{LifecycleState: olmv1.LifecycleStateActive, Revision: 3, CollisionProtection: olmv1.CollisionProtectionPrevent,
			Phases: []olmv1.ClusterObjectSetPhase{
				{Name: "configuration", Objects: []olmv1.ClusterObjectSetObject{cm("small", 10), cm("big", 5000)}},
				{Name: "deploy", Objects: []olmv1.ClusterObjectSetObject{cm("inline", 1)}},
			}},
	}
	digest, err := phasedigest.Of("configuration", []map[string]any{c.Spec.Phases[0].Objects[0].Object.Object, c.Spec.Phases[0].Objects[1].Object.Object})
	if err != nil {
		t.Fatal(err)
	}
	plan, err := content.PlanFor(c.Name, admission.PlanInput(&olmv1.ClusterObjectSet{Spec: olmv1.ClusterObjectSetSpec{Phases: c.Spec.Phases[:1]}}), content.Options{})
	if err != nil {
		t.Fatal(err)
	}
	c.Spec.Phases[0] = admission.WithRefs(c.Spec.Phases[:1], plan, "")[0]
	c.Status.ObservedPhases = []olmv1.ObservedPhase{{Name: "configuration", Digest: digest, CompletedAt: metav1.NewTime(now.Add(-50 * time.Minute))}}
	c.Status.Conditions = []metav1.Condition{{Type: olmv1.ConditionProgressing, Status: metav1.ConditionTrue, Reason: olmv1.ReasonRollingOut, Message: "Revision is rolling out."}}
	secrets := map[string]SecretRead{}
	for _, s := range plan.Secrets {
		sec := secretdata.ObjectDataSecret(c.Name, sys, s)
		sec.OwnerReferences = []metav1.OwnerReference{{APIVersion: olmv1.GroupVersion.String(), Kind: olmv1.ClusterObjectSetKind, Name: c.Name, UID: c.UID, Controller: ptr.To(true)}}
		secrets[sys+"/"+s.Name] = SecretRead{Secret: sec}
	}
	return c, secrets
}

func TestBuild(t *testing.T) {
	notFound := apierrors.NewNotFound(schema.GroupResource{Resource: "secrets"}, "x")
	type summary struct {
		Problems   int
		Current    string
		Objects    []string
		Checks     []string
		Digest     string
		SecretLine string
		Orphans    []string
	}
	tests := map[string]struct {
		change func(c *olmv1.ClusterObjectSet, s map[string]SecretRead, in *Input)
		want   summary
		render []string
	}{
		"healthy": {
			change: func(*olmv1.ClusterObjectSet, map[string]SecretRead, *Input) {},
			want: summary{Current: "deploy (2 of 2)", Objects: []string{"ConfigMap app/small", "ConfigMap app/big", "ConfigMap app/inline"},
				Checks: []string{"digest verified", "digest verified"}, Digest: "matches the content",
				SecretLine: "exists, immutable, type olm.operatorframework.io/object-data, owner ClusterObjectSet app (this one), 2 keys"},
			render: []string{"Current phase:  deploy (2 of 2)", "Progressing  True  RollingOut", "1. configuration: 2 objects, completed 2026-11-24T11:10:00Z; digest matches the content",
				"ConfigMap app/big", ", gzip", "2. deploy: 1 object, not completed; digest not latched yet", "ConfigMap app/inline  inline", "Orphaned Secrets:\n  none"},
		},
		"tampered content": {
			change: func(_ *olmv1.ClusterObjectSet, s map[string]SecretRead, _ *Input) {
				for _, r := range s {
					for k := range r.Secret.Data {
						r.Secret.Data[k] = []byte(`{"kind":"ConfigMap","data":{"v":"` + secretValue + `"}}`)
					}
				}
			},
			want: summary{Problems: 2, Current: "deploy (2 of 2)", Objects: []string{"(not resolved)", "(not resolved)", "ConfigMap app/inline"},
				Checks: []string{"DIGEST MISMATCH: the content does not hash to its key", "DIGEST MISMATCH: the content does not hash to its key"},
				Digest: "not checked: not every object resolved", SecretLine: "exists, immutable, type olm.operatorframework.io/object-data, owner ClusterObjectSet app (this one), 2 keys"},
			render: []string{"DIGEST MISMATCH"},
		},
		"Secret missing, and an orphan": {
			change: func(c *olmv1.ClusterObjectSet, s map[string]SecretRead, in *Input) {
				for k, r := range s {
					in.Labelled = []corev1.Secret{*r.Secret}
					in.Labelled[0].Name = "app-orphan"
					in.Labelled[0].CreationTimestamp = metav1.NewTime(now.Add(-2 * time.Minute))
					in.Labelled[0].OwnerReferences = nil
					s[k] = SecretRead{Err: notFound}
				}
			},
			want: summary{Problems: 4, Current: "deploy (2 of 2)", Objects: []string{"(not resolved)", "(not resolved)", "ConfigMap app/inline"},
				Checks: []string{"the Secret does not exist", "the Secret does not exist"}, Digest: "not checked: not every object resolved",
				SecretLine: "MISSING", Orphans: []string{sys + "/app-orphan"}},
			render: []string{"olmv1-system/app-orphan: not referenced; created 2m ago; no owner.", "! does not exist: the reconciler waits for it (Retrying)"},
		},
		"mutable, unowned, content changed since latched": {
			change: func(c *olmv1.ClusterObjectSet, s map[string]SecretRead, _ *Input) {
				c.Status.ObservedPhases[0].Digest = "sha256:00"
				for _, r := range s {
					r.Secret.Immutable = nil
					r.Secret.OwnerReferences = nil
				}
			},
			want: summary{Problems: 3, Current: "deploy (2 of 2)", Objects: []string{"ConfigMap app/small", "ConfigMap app/big", "ConfigMap app/inline"},
				Checks: []string{"digest verified", "digest verified"}, Digest: "DIFFERS from the content: the reconciler blocks this revision",
				SecretLine: "exists, MUTABLE, type olm.operatorframework.io/object-data, no owner, 2 keys"},
			render: []string{"! not immutable: the reconciler refuses it (Blocked)", "! no owner yet: the reconciler makes the ClusterObjectSet its owner"},
		},
		"all phases done": {
			change: func(c *olmv1.ClusterObjectSet, _ map[string]SecretRead, _ *Input) {
				c.Status.ObservedPhases = append(c.Status.ObservedPhases, olmv1.ObservedPhase{Name: "deploy", Digest: "sha256:11", CompletedAt: metav1.NewTime(now)})
			},
			want: summary{Problems: 1, Current: "none: all 2 phases have rolled out", Objects: []string{"ConfigMap app/small", "ConfigMap app/big", "ConfigMap app/inline"},
				Checks: []string{"digest verified", "digest verified"}, Digest: "matches the content",
				SecretLine: "exists, immutable, type olm.operatorframework.io/object-data, owner ClusterObjectSet app (this one), 2 keys"},
		},
		"decoding budget reached": {
			change: func(_ *olmv1.ClusterObjectSet, _ map[string]SecretRead, in *Input) {
				in.Resolve.MaxResolvedBytes = 4000
			},
			want: summary{Problems: 1, Current: "deploy (2 of 2)", Objects: []string{"ConfigMap app/small", "(not resolved)", "ConfigMap app/inline"},
				Checks: []string{"digest verified", "digest verified; not decoded: the limit of decoded content (--max-resolved-bytes) is reached"}, Digest: "not checked: not every object resolved",
				SecretLine: "exists, immutable, type olm.operatorframework.io/object-data, owner ClusterObjectSet app (this one), 2 keys"},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			c, secrets := fixture(t)
			in := Input{Name: c.Name, SystemNamespace: sys, COS: c, Secrets: secrets, Now: now,
				Events: []Event{{Time: now.Add(-time.Minute), Type: "Normal", Reason: "PhaseComplete", Message: `phase "configuration" is rolled out and ready`, Count: 2}}}
			tc.change(c, secrets, &in)
			r := Build(in)
			got := summary{Problems: r.Problems, Current: r.Current, Digest: r.Phases[0].DigestCheck}
			for _, ph := range r.Phases {
				for _, o := range ph.Objects {
					got.Objects = append(got.Objects, o.What)
					if o.Ref != nil {
						got.Checks = append(got.Checks, o.Ref.Check)
					}
				}
			}
			if len(r.Secrets) == 1 {
				line := secretLine(r.Secrets[0])
				if i := strings.LastIndex(line, ", "); i > 0 && strings.HasSuffix(line, " of data") {
					line = line[:i]
				}
				got.SecretLine = line
			}
			for _, o := range r.Orphans {
				got.Orphans = append(got.Orphans, o.Key)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
			var out bytes.Buffer
			if err := Render(&out, r); err != nil {
				t.Fatal(err)
			}
			for _, s := range append(tc.render, "Name:", "Events:\n  60s ago  Normal  PhaseComplete  phase \"configuration\" is rolled out and ready (x2)") {
				if !strings.Contains(out.String(), s) {
					t.Errorf("the report lacks %q:\n%s", s, out.String())
				}
			}
			if strings.Contains(out.String(), secretValue) {
				t.Errorf("the report shows content:\n%s", out.String())
			}
		})
	}
}

// TestEachPartPrints: when the ClusterObjectSet, the Events and the Secrets cannot be read, every
// section still prints, saying why.
func TestEachPartPrints(t *testing.T) {
	r := Build(Input{Name: "gone", SystemNamespace: sys, Now: now,
		COSErr:    errors.New(`clusterobjectsets.olm.operatorframework.io "gone" not found`),
		EventsErr: errors.New("events is forbidden"),
		Labelled: []corev1.Secret{{ObjectMeta: metav1.ObjectMeta{Namespace: sys, Name: "gone-0123", CreationTimestamp: metav1.NewTime(now.Add(-10 * time.Minute)),
			Annotations: map[string]string{content.LastUsedAnnotation: content.LastUsedValue(now.Add(-3 * time.Minute))}}}},
	})
	var out bytes.Buffer
	if err := Render(&out, r); err != nil {
		t.Fatal(err)
	}
	for _, s := range []string{
		`ClusterObjectSet:  cannot be read: clusterobjectsets.olm.operatorframework.io "gone" not found`,
		"Events:\n  cannot be listed: events is forbidden",
		"olmv1-system/gone-0123: not referenced; created 10m ago, last used 3m ago; no owner.",
	} {
		if !strings.Contains(out.String(), s) {
			t.Errorf("the report lacks %q:\n%s", s, out.String())
		}
	}
	if r.Problems != 2 {
		t.Errorf("problems: %d", r.Problems)
	}
	r = Build(Input{Name: "x", LabelledErr: fmt.Errorf("secrets is forbidden"), COSErr: errors.New("nope"), Now: now})
	out.Reset()
	_ = Render(&out, r)
	if !strings.Contains(out.String(), "Orphaned Secrets:\n  cannot be listed: secrets is forbidden") {
		t.Errorf("report:\n%s", out.String())
	}
}

// TestDescribe: inspect words each of the resolver's failures as a check line.
func TestDescribe(t *testing.T) {
	const contentKey = "0123456789012345678901234567890123456789abc"
	fail := func(reason secretdata.Reason, err error) error {
		return &secretdata.Failure{Reason: reason, Secret: types.NamespacedName{Namespace: sys, Name: "s"}, Key: contentKey, Err: err}
	}
	tests := map[string]struct {
		v    secretdata.Value
		err  error
		want Ref
	}{
		"resolved": {v: secretdata.Value{Object: map[string]any{"kind": "ConfigMap"}, Stored: 10, Gzip: true, Decoded: 30},
			want: Ref{Check: "digest verified", OK: true, Stored: 10, Gzip: true, Inline: 30}},
		"missing Secret": {err: fail(secretdata.SecretMissing, apierrors.NewNotFound(schema.GroupResource{Resource: "secrets"}, "s")),
			want: Ref{Check: "the Secret does not exist"}},
		"unreadable Secret": {err: fail(secretdata.SecretUnreadable, errors.New("forbidden")), want: Ref{Check: "the Secret cannot be read: forbidden"}},
		"Secret not read":   {err: fail(secretdata.SecretUnreadable, errNotRead), want: Ref{Check: "Secret not read"}},
		"key missing":       {err: fail(secretdata.KeyMissing, nil), want: Ref{Check: "key not found in the Secret"}},
		"digest mismatch": {v: secretdata.Value{Stored: 5}, err: fail(secretdata.DigestMismatch, content.ErrDigestMismatch),
			want: Ref{Check: "DIGEST MISMATCH: the content does not hash to its key", Stored: 5}},
		"over budget": {err: fail(secretdata.OverBudget, content.ErrBudgetExceeded),
			want: Ref{Check: "digest verified; not decoded: the limit of decoded content (--max-resolved-bytes) is reached"}},
		"too large":     {err: fail(secretdata.TooLarge, content.ErrTooLarge), want: Ref{Check: "digest verified; not decoded: over 10485760 bytes"}},
		"corrupt":       {err: fail(secretdata.Corrupt, content.ErrCorrupt), want: Ref{Check: "digest verified; cannot be decoded (corrupt)"}},
		"not an object": {err: fail(secretdata.NotAnObject, content.ErrNotObject), want: Ref{Check: "digest verified; not a JSON object"}},
		"not a Kubernetes object": {err: fail(secretdata.NotAnObject, secretdata.ErrNotKubernetesObject),
			want: Ref{Check: "digest verified; not a Kubernetes object (no apiVersion or kind)"}},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got := Ref{Secret: sys + "/s", Key: contentKey}
			describe(&got, tc.v, tc.err)
			tc.want.Secret, tc.want.Key = sys+"/s", contentKey
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

package admission_test

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	olmv1 "github.com/cos-externalizer/cos-externalizer/api/v1"
	"github.com/cos-externalizer/cos-externalizer/internal/content"
	"github.com/cos-externalizer/cos-externalizer/internal/naming"
	"github.com/cos-externalizer/cos-externalizer/internal/secretdata"
	b "github.com/cos-externalizer/cos-externalizer/test/builders"
	"github.com/cos-externalizer/cos-externalizer/webhook/admission"
	"github.com/cos-externalizer/cos-externalizer/webhook/admission/admissiontest"
)

const ns = "olmv1-system"

// errGone is the cause of the contexts the tests end.
var errGone = errors.New("the caller has gone")

// secretValue is in every inline object: no warning or refusal may quote it.
const secretValue = "s3cr3t-value"

// outcome is what a test compares of a Response and the store after it.
type outcome struct {
	Refusal  admission.Reason
	Fields   []string // the refusal's field paths
	Warnings []string
	// Phases: "submitted", "refs" (the planned refs) or "stored".
	Phases  string
	Kept    bool
	Healed  []string
	Created int
	DryRun  bool
	// Secrets are the names of the Secrets in the store after the request.
	Secrets []string
}

func TestAdmit(t *testing.T) {
	always := b.WithAnnotations(map[string]string{admission.Annotation: string(admission.ModeAlways)})
	cm := func(name, value string) olmv1.ClusterObjectSetObject {
		return b.Inline(b.ConfigMap("default", name, map[string]string{"k": value}))
	}
	inline := b.COS("app", always, b.WithPhase("configuration", cm("a", secretValue), cm("b", secretValue+"-b")))
	plan, err := content.PlanFor(inline.Name, admission.PlanInput(inline), content.Options{})
	if err != nil {
		t.Fatal(err)
	}
	planned := map[types.NamespacedName]*corev1.Secret{}
	var plannedNames []string
	for _, s := range plan.Secrets {
		planned[types.NamespacedName{Namespace: ns, Name: s.Name}] = secretdata.ObjectDataSecret(inline.Name, ns, s)
		plannedNames = append(plannedNames, s.Name)
	}
	stored := inline.DeepCopy()
	stored.Spec.Phases = admission.WithRefs(inline.Spec.Phases, plan, ns)
	damaged := map[types.NamespacedName]*corev1.Secret{}
	for k, s := range planned {
		s = s.DeepCopy()
		s.Data = map[string][]byte{"other": []byte("{}")}
		damaged[k] = s
	}
	// The stored refs of an earlier plan: another Secret holding the same content.
	olderKey := types.NamespacedName{Namespace: ns, Name: "app-older-format"}
	older := stored.DeepCopy()
	olderSecret := &corev1.Secret{ObjectMeta: objectMeta(olderKey), Type: olmv1.SecretTypeObjectData, Data: map[string][]byte{}}
	for j, o := range inline.Spec.Phases[0].Objects {
		data, err := content.Canonical(o.Object.Object)
		if err != nil {
			t.Fatal(err)
		}
		olderSecret.Data[content.Key(data)] = data
		older.Spec.Phases[0].Objects[j].Ref = olmv1.ObjectSourceRef{Name: olderKey.Name, Namespace: ns, Key: content.Key(data)}
	}
	changed := inline.DeepCopy()
	changed.Spec.Phases[0].Objects[0] = cm("a", "other")
	userKey := types.NamespacedName{Namespace: "team", Name: "given"}
	refsOnly := b.COS("refs", b.WithPhase("p", b.Ref("absent", "", "k"), b.Ref(userKey.Name, userKey.Namespace, "nokey"), b.Ref(userKey.Name, userKey.Namespace, "k")))
	user := &corev1.Secret{ObjectMeta: objectMeta(userKey), Data: map[string][]byte{"k": []byte(secretValue)}}
	missingWarning := admission.WarningPrefix + naming.Count(len(plannedNames), "Secret") + " of the stored refs missing (" + strings.Join(plannedNames, ", ") + "): "
	immutable := []string{"spec.phases"}

	tests := map[string]struct {
		coss    []*olmv1.ClusterObjectSet
		secrets map[types.NamespacedName]*corev1.Secret
		// unreadable Secrets fail every read.
		unreadable []types.NamespacedName
		op         admission.Operation
		old, new   *olmv1.ClusterObjectSet
		dryRun     bool
		mode       admission.Mode
		// ended: the request's context has ended (its caller gone, its call's deadline passed).
		ended bool
		want  outcome
	}{
		"create: a request whose context ended stops before it plans, writing nothing": {
			op: admission.Create, new: inline, ended: true,
			want: outcome{Refusal: admission.ReasonCanceled},
		},
		"update: a request whose context ended stops before it compares, writing nothing": {
			op: admission.Update, old: stored, new: inline, ended: true,
			want: outcome{Refusal: admission.ReasonCanceled},
		},
		"create: externalized": {
			op: admission.Create, new: inline,
			want: outcome{Phases: "refs", Created: len(plannedNames), Secrets: plannedNames},
		},
		"create: dry run writes nothing": {
			op: admission.Create, new: inline, dryRun: true,
			want: outcome{Phases: "refs", DryRun: true},
		},
		"create: present Secrets are reused": {
			op: admission.Create, new: inline, secrets: planned,
			want: outcome{Phases: "refs", Secrets: plannedNames},
		},
		"create: of an existing name writes nothing": {
			op: admission.Create, new: inline, coss: []*olmv1.ClusterObjectSet{stored},
			want: outcome{Phases: "refs", DryRun: true,
				Warnings: []string{admission.WarningPrefix + "ClusterObjectSet app already exists: this create writes no Secrets"}},
		},
		"create: invalid is refused and writes nothing": {
			op: admission.Create, new: with(inline, func(c *olmv1.ClusterObjectSet) { c.Spec.ProgressDeadlineMinutes = 5 }),
			want: outcome{Refusal: admission.ReasonInvalid, Fields: []string{"spec.progressDeadlineMinutes"}},
		},
		"create: an unknown policy annotation is refused": {
			op: admission.Create, new: with(inline, func(c *olmv1.ClusterObjectSet) { c.Annotations[admission.Annotation] = "sometimes" }),
			want: outcome{Refusal: admission.ReasonInvalid, Fields: []string{"metadata.annotations[cos-externalizer.io/externalize]"}},
		},
		"create: generateName is refused": {
			op: admission.Create, new: with(inline, func(c *olmv1.ClusterObjectSet) { c.Name, c.GenerateName = "", "app-" }),
			want: outcome{Refusal: admission.ReasonNameRequired, Fields: []string{"metadata.name"}},
		},
		"create: a Secret not ours is refused": {
			op: admission.Create, new: inline, secrets: damaged,
			want: outcome{Refusal: admission.ReasonSecretConflict, Secrets: plannedNames},
		},
		"create: small objects stay inline": {
			op: admission.Create, new: with(inline, func(c *olmv1.ClusterObjectSet) { c.Annotations = nil }), mode: admission.ModeOversized,
			want: outcome{Phases: "submitted"},
		},
		"create: refs-only warns about missing Secrets and keys": {
			op: admission.Create, new: refsOnly, secrets: map[types.NamespacedName]*corev1.Secret{userKey: user},
			want: outcome{Phases: "submitted", Secrets: []string{userKey.Name}, Warnings: []string{
				admission.WarningPrefix + "spec.phases[0].objects[0].ref: Secret olmv1-system/absent does not exist (yet)",
				admission.WarningPrefix + "spec.phases[0].objects[1].ref: Secret team/given not checked: outside " + ns,
			}},
		},
		"update: empty phases are filled once": {
			op: admission.Update, old: with(inline, func(c *olmv1.ClusterObjectSet) { c.Spec.Phases = nil }), new: inline,
			want: outcome{Phases: "refs", Created: len(plannedNames), Secrets: plannedNames},
		},
		"update: the same objects keep the stored refs": {
			op: admission.Update, old: stored, new: inline, secrets: planned,
			want: outcome{Phases: "stored", Kept: true, Secrets: plannedNames},
		},
		"update: the stored refs of an earlier plan stand": {
			op: admission.Update, old: older, new: inline, secrets: map[types.NamespacedName]*corev1.Secret{olderKey: olderSecret},
			want: outcome{Phases: "stored", Kept: true, Secrets: []string{olderKey.Name}},
		},
		"update: mutable fields of the stored form pass": {
			op: admission.Update, old: stored, new: with(stored, func(c *olmv1.ClusterObjectSet) { c.Spec.LifecycleState = olmv1.LifecycleStateArchived }),
			want: outcome{Phases: "submitted", Kept: true},
		},
		"update: heals missing Secrets": {
			op: admission.Update, old: stored, new: inline,
			want: outcome{Phases: "stored", Kept: true, Healed: plannedNames, Created: len(plannedNames), Secrets: plannedNames,
				Warnings: []string{missingWarning + "the submitted objects are their content: re-created " + naming.Count(len(plannedNames), "Secret")}},
		},
		"update: a Secret of the stored refs that cannot be read is refused": {
			op: admission.Update, old: stored, new: inline, unreadable: slices.Collect(maps.Keys(planned)),
			want: outcome{Refusal: admission.ReasonWriteFailed},
		},
		"update: a heal on a dry run writes nothing": {
			op: admission.Update, old: stored, new: inline, dryRun: true,
			want: outcome{Phases: "stored", Kept: true, Healed: plannedNames, DryRun: true,
				Warnings: []string{missingWarning + "the submitted objects are their content and would re-create them; nothing written"}},
		},
		"update: a heal of an invalid update is refused and writes nothing": {
			op: admission.Update, old: stored, new: with(inline, func(c *olmv1.ClusterObjectSet) { c.Spec.ProgressDeadlineMinutes = 5 }),
			want: outcome{Refusal: admission.ReasonInvalid, Fields: []string{"spec.progressDeadlineMinutes"}},
		},
		"update: a damaged Secret of the stored refs is refused": {
			op: admission.Update, old: stored, new: inline, secrets: damaged,
			want: outcome{Refusal: admission.ReasonSecretConflict, Secrets: plannedNames},
		},
		"update: other objects are refused: phases are immutable": {
			op: admission.Update, old: stored, new: changed, secrets: planned,
			want: outcome{Refusal: admission.ReasonInvalid, Fields: immutable, Secrets: plannedNames},
		},
		"update: other objects with unreadable stored refs are refused with a warning": {
			op: admission.Update, old: stored, new: changed,
			want: outcome{Refusal: admission.ReasonInvalid, Fields: immutable, Warnings: []string{admission.WarningPrefix + "could not compare the submitted phases with the stored ones: " +
				fmt.Sprintf(`phase "configuration" object 0: reading Secret %s/%s: secrets %q not found`, ns, plannedNames[0], plannedNames[0])}},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			store := admissiontest.NewStore(ns)
			for _, c := range tc.coss {
				store.AddClusterObjectSet(c)
			}
			for _, s := range tc.secrets {
				store.AddSecret(s)
			}
			for _, k := range tc.unreadable {
				store.FailReads(k, fmt.Errorf("the API server is away"))
			}
			mode := tc.mode
			if mode == "" {
				mode = admission.ModeOversized
			}
			p := &admission.Pipeline{Store: store, SystemNamespace: ns, Mode: mode, Threshold: admission.DefaultThreshold}
			req := admission.Request{Operation: tc.op, Old: tc.old, New: tc.new.DeepCopy(), SpecSize: 100, DryRun: tc.dryRun}
			ctx, cancel := context.WithCancelCause(context.Background())
			defer cancel(nil)
			if tc.ended {
				cancel(errGone)
			}
			resp := p.Admit(ctx, req)
			if !cmp.Equal(req.New, tc.new) {
				t.Error("the request's object changed")
			}
			got := outcome{Warnings: resp.Warnings, Kept: resp.Stats.Kept, Healed: resp.Stats.Healed, Created: resp.Stats.Created, DryRun: resp.Stats.DryRun}
			if r := resp.Refusal; r != nil {
				got.Refusal = r.Reason
				for _, e := range r.Errs {
					got.Fields = append(got.Fields, e.Field)
				}
				if tc.ended && !errors.Is(r.Err, errGone) {
					t.Errorf("the refusal does not wrap the context's cause: %v", r.Err)
				}
				if r.Err != nil && strings.Contains(r.Err.Error(), secretValue) || len(r.Errs) > 0 && strings.Contains(r.Errs.ToAggregate().Error(), secretValue) {
					t.Errorf("the refusal quotes content: %v %v", r.Err, r.Errs)
				}
				got.Kept, got.Healed, got.Created, got.DryRun = false, nil, 0, false
			} else {
				switch {
				case !resp.PhasesChanged && cmp.Equal(resp.Phases, tc.new.Spec.Phases):
					got.Phases = "submitted"
				case tc.old != nil && cmp.Equal(resp.Phases, tc.old.Spec.Phases):
					got.Phases = "stored"
				case cmp.Equal(resp.Phases, admission.WithRefs(tc.new.Spec.Phases, plan, ns)):
					got.Phases = "refs"
				default:
					t.Errorf("unexpected phases (changed %v): %v", resp.PhasesChanged, resp.Phases)
				}
			}
			for _, w := range resp.Warnings {
				if strings.Contains(w, secretValue) {
					t.Errorf("a warning quotes content: %s", w)
				}
			}
			for _, k := range store.Secrets() {
				got.Secrets = append(got.Secrets, k.Name)
			}
			slices.Sort(got.Secrets)
			want := tc.want
			slices.Sort(want.Secrets)
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

func TestImmutableRefusalSaysHowToChange(t *testing.T) {
	old := b.COS("app", b.WithPhase("p", b.Ref("s", "", "k")))
	updated := b.COS("app", b.WithPhase("p", b.Ref("s", "", "other")))
	store := admissiontest.NewStore(ns)
	resp := (&admission.Pipeline{Store: store, SystemNamespace: ns}).Admit(context.Background(), admission.Request{Operation: admission.Update, Old: old, New: updated})
	if resp.Refusal == nil || len(resp.Refusal.Errs) != 1 || !strings.HasSuffix(resp.Refusal.Errs[0].Detail, admission.ImmutablePhasesHint) {
		t.Fatalf("want the immutable refusal with its hint, got %+v", resp.Refusal)
	}
}

func TestSummary(t *testing.T) {
	s := admission.Stats{Decision: admission.Decision{Externalize: true, Reason: "externalization is set to always"},
		Plan: content.Stats{Objects: 1, Secrets: 2, InlineBytes: 10, StoredBytes: 7}}
	want := "externalized 1 object into 2 Secrets in ns (10 bytes inline, 7 bytes stored; externalization is set to always; nothing written)"
	if got := s.Summary("ns", "nothing written"); got != want {
		t.Errorf("got  %s\nwant %s", got, want)
	}
}

func objectMeta(key types.NamespacedName) metav1.ObjectMeta {
	return metav1.ObjectMeta{Namespace: key.Namespace, Name: key.Name}
}

func with(c *olmv1.ClusterObjectSet, f func(*olmv1.ClusterObjectSet)) *olmv1.ClusterObjectSet {
	c = c.DeepCopy()
	f(c)
	return c
}

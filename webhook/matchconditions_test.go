package webhook

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"path/filepath"
	"slices"
	"sync"
	"testing"

	gocmp "github.com/google/go-cmp/cmp"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/version"
	"k8s.io/apiserver/pkg/admission"
	admissioncel "k8s.io/apiserver/pkg/admission/plugin/cel"
	apiwebhook "k8s.io/apiserver/pkg/admission/plugin/webhook"
	"k8s.io/apiserver/pkg/admission/plugin/webhook/matchconditions"
	"k8s.io/apiserver/pkg/admission/plugin/webhook/predicates/object"
	"k8s.io/apiserver/pkg/admission/plugin/webhook/predicates/rules"
	"k8s.io/apiserver/pkg/authentication/user"
	"k8s.io/apiserver/pkg/cel/environment"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/kyaml/filesys"

	olmv1 "github.com/cos-externalizer/cos-externalizer/api/v1"
)

// called says, for each of the four webhooks, whether the API server calls it for a request.
type called struct{ Externalize, CheckRefs, Validate, SecretGuard bool }

// TestMatchConditions evaluates the webhooks' matchConditions (config/webhook/matchconditions.yaml),
// as the overlays the cluster gets render them, with the API server's own code
// (k8s.io/apiserver at the version of go.mod): each webhook's rules and object selector, then its
// compiled matchConditions, as the admission dispatcher runs them. Every expression must compile as
// a new one (what the API server checks when the configuration is written) and evaluate without an
// error on every request: an error would refuse the request (failurePolicy Fail) or skip the webhook
// silently (Ignore).
func TestMatchConditions(t *testing.T) {
	overlays := map[string]map[string]hook{}
	for _, overlay := range []string{"webhook", "webhook-only"} {
		overlays[overlay] = renderHooks(t, overlay)
	}

	nsController := NamespaceControllerUser
	olm := OperatorControllerUser
	for name, tc := range map[string]struct {
		req sampleRequest
		// want on config/webhook (and the overlays that take it as it is: default, self-signed,
		// production); webhookOnly on config/webhook-only when it differs.
		want        called
		webhookOnly *called
	}{
		// Creates.
		"create with inline objects": {
			req:  create(cos(inline("a"))),
			want: called{Externalize: true, Validate: true},
		},
		"create with inline objects and refs": {
			req:  create(cos(refs("a"), phase("b", refObject(), inlineObject()))),
			want: called{Externalize: true, Validate: true},
		},
		"create refs-only (what OLM writes)": {
			req:  create(cos(refs("a"), refs("b"))),
			want: called{CheckRefs: true},
		},
		// OLM's own identities skip check-refs (both layouts), never externalize or validate.
		"create refs-only by OLM's operator-controller": {
			req:  as(olm, create(cos(refs("a"), refs("b")))),
			want: called{},
		},
		"create refs-only by OLM's object-controller": {
			req:  as(ObjectControllerUser, create(cos(refs("a")))),
			want: called{},
		},
		"create refs-only by a look-alike of OLM's ServiceAccount": {
			req:  as("system:serviceaccount:other:operator-controller-controller-manager", create(cos(refs("a")))),
			want: called{CheckRefs: true},
		},
		"create with inline objects by OLM": {
			req:  as(olm, create(cos(refs("a"), inline("b")))),
			want: called{Externalize: true, Validate: true},
		},
		"update giving the first phases, refs-only, by OLM": {
			req:  as(olm, update(cos(), cos(refs("a")))),
			want: called{Validate: true},
		},
		"update adding inline objects by OLM": {
			req:  as(ObjectControllerUser, update(cos(refs("a")), cos(refs("a"), inline("b")))),
			want: called{Externalize: true, Validate: true},
		},
		"create with a phase of no objects": {
			req:  create(cos(phase("a"))),
			want: called{CheckRefs: true},
		},
		// Shapes the schema refuses after the mutating webhooks have run: the conditions must not
		// fail on them.
		"create with a phase without objects": {
			req:  create(withoutObjects(cos(phase("a")))),
			want: called{CheckRefs: true},
		},
		"create with an object of neither object nor ref": {
			req:  create(cos(phase("a", olmv1.ClusterObjectSetObject{}))),
			want: called{CheckRefs: true},
		},
		"create without phases": {
			req:  create(cos()),
			want: called{},
		},
		"create with empty phases": {
			req:  create(emptyPhases(cos())),
			want: called{},
		},
		"create without spec": {
			req:  create(noSpec(cos())),
			want: called{},
		},

		// Updates that keep the phases.
		"update of labels, refs-only": {
			req:  update(cos(refs("a")), labelled(cos(refs("a")))),
			want: called{},
		},
		"update archiving, refs-only": {
			req:  update(cos(refs("a")), archived(cos(refs("a")))),
			want: called{},
		},
		"update keeping inline objects": {
			req:  update(cos(inline("a")), labelled(cos(inline("a")))),
			want: called{Externalize: true, Validate: true},
		},
		"update keeping no phases": {
			req:  update(cos(), labelled(cos())),
			want: called{},
		},
		"update keeping empty phases": {
			req:  update(emptyPhases(cos()), labelled(emptyPhases(cos()))),
			want: called{},
		},

		// Updates that change the phases.
		"update changing a ref": {
			req:  update(cos(refs("a")), cos(phase("a", refObjectTo("other")))),
			want: called{Externalize: true},
		},
		"update of a phase's collisionProtection": {
			req:  update(cos(refs("a")), cos(protected(refs("a")))),
			want: called{Externalize: true},
		},
		"update adding inline objects": {
			req:  update(cos(refs("a")), cos(refs("a"), inline("b"))),
			want: called{Externalize: true, Validate: true},
		},
		"update replacing inline objects by refs": {
			req:  update(cos(inline("a")), cos(refs("a"))),
			want: called{Externalize: true},
		},
		"update reordering phases": {
			req:  update(cos(refs("a"), refs("b")), cos(refs("b"), refs("a"))),
			want: called{Externalize: true, Validate: true},
		},
		"update renaming a phase": {
			req:  update(cos(refs("a")), cos(refs("b"))),
			want: called{Externalize: true, Validate: true},
		},
		"update adding a refs-only phase": {
			req:  update(cos(refs("a")), cos(refs("a"), refs("b"))),
			want: called{Externalize: true, Validate: true},
		},
		"update removing every phase": {
			req:  update(cos(refs("a")), cos()),
			want: called{Externalize: true, Validate: true},
		},
		"update emptying the phases": {
			req:  update(cos(refs("a")), emptyPhases(cos())),
			want: called{Externalize: true, Validate: true},
		},
		"update giving the first phases, refs-only": {
			req:  update(cos(), cos(refs("a"))),
			want: called{CheckRefs: true, Validate: true},
		},
		"update from empty phases to refs-only": {
			req:  update(emptyPhases(cos()), cos(refs("a"))),
			want: called{CheckRefs: true, Validate: true},
		},
		"update giving the first phases, inline": {
			req:  update(cos(), cos(inline("a"))),
			want: called{Externalize: true, Validate: true},
		},
		"delete": {
			req:  sampleRequest{op: admission.Delete, old: cos(inline("a"))},
			want: called{},
		},

		// The Secret guard.
		"secret update by a user": {
			req:  secretUpdate(someone, secret(true), secret(true)),
			want: called{SecretGuard: true},
		},
		"secret update removing the label": {
			req:  secretUpdate(someone, secret(true), secret(false)),
			want: called{SecretGuard: true},
		},
		"secret update adding the label": {
			req:  secretUpdate(someone, secret(false), secret(true)),
			want: called{SecretGuard: true},
		},
		"secret delete by a user": {
			req:  secretDelete(someone, secret(true)),
			want: called{SecretGuard: true},
		},
		"secret delete by the namespace controller": {
			req:  secretDelete(nsController, secret(true)),
			want: called{},
		},
		"secret update by the namespace controller": {
			req:  secretUpdate(nsController, secret(true), secret(true)),
			want: called{},
		},
		"secret delete by OLM": {
			req:         secretDelete(olm, secret(true)),
			want:        called{SecretGuard: true},
			webhookOnly: &called{},
		},
		"secret update by OLM": {
			req:         secretUpdate(olm, secret(true), secret(true)),
			want:        called{SecretGuard: true},
			webhookOnly: &called{},
		},
		"secret without the label": {
			req:  secretDelete(someone, secret(false)),
			want: called{},
		},
		"secret create": {
			req:  sampleRequest{op: admission.Create, obj: secret(true), user: someone},
			want: called{},
		},
	} {
		t.Run(name, func(t *testing.T) {
			for overlay, hooks := range overlays {
				want := tc.want
				if overlay == "webhook-only" && tc.webhookOnly != nil {
					want = *tc.webhookOnly
				}
				if diff := gocmp.Diff(want, evaluate(t, hooks, tc.req)); diff != "" {
					t.Errorf("config/%s: webhooks called (-want +got):\n%s", overlay, diff)
				}
			}
		})
	}
}

// hook is one webhook of a rendered configuration.
type hook struct {
	accessor apiwebhook.WebhookAccessor
	rules    []admissionregistrationv1.RuleWithOperations
	matcher  matchconditions.Matcher
}

// renderHooks renders config/<overlay> as kustomize does and returns its four webhooks, their
// failurePolicy set to Fail, so that an evaluation error is returned, not taken for false.
func renderHooks(t *testing.T, overlay string) map[string]hook {
	t.Helper()
	m, err := krusty.MakeKustomizer(krusty.MakeDefaultOptions()).Run(filesys.MakeFsOnDisk(), filepath.Join("..", "config", overlay))
	if err != nil {
		t.Fatalf("rendering config/%s: %v", overlay, err)
	}
	fail := ptr.To(admissionregistrationv1.Fail)
	// The API server defaults a missing object selector to the empty one, which selects everything.
	everything := &metav1.LabelSelector{}
	// As the admission dispatcher compiles them (generic.NewWebhook): stored expressions.
	conditions := admissioncel.NewConditionCompiler(baseEnvs(environment.DefaultCompatibilityVersion()))
	checkNew := func(w string, mcs []admissionregistrationv1.MatchCondition) {
		if len(mcs) == 0 {
			t.Errorf("config/%s: webhook %s has no matchConditions", overlay, w)
		}
		for _, v := range []*version.Version{oldestAPIServer, environment.DefaultCompatibilityVersion()} {
			compiler := admissioncel.NewCompiler(baseEnvs(v))
			for _, mc := range mcs {
				res := compiler.CompileCELExpression(&matchconditions.MatchCondition{Name: mc.Name, Expression: mc.Expression},
					admissioncel.OptionalVariableDeclarations{HasAuthorizer: true}, environment.NewExpressions)
				if res.Error != nil {
					t.Errorf("config/%s: webhook %s: matchCondition %s does not compile on Kubernetes %s: %v", overlay, w, mc.Name, v, res.Error)
				}
			}
		}
	}
	hooks := map[string]hook{}
	for _, r := range m.Resources() {
		b, err := r.MarshalJSON()
		if err != nil {
			t.Fatal(err)
		}
		switch r.GetKind() {
		case "MutatingWebhookConfiguration", "ValidatingWebhookConfiguration":
			// The API server matches a request to a webhook of either kind alike (rules, selectors,
			// matchConditions); read as the validating kind, a mutating webhook loses only its
			// reinvocationPolicy, which plays no part in matching.
			wc := &admissionregistrationv1.ValidatingWebhookConfiguration{}
			if err := json.Unmarshal(b, wc); err != nil {
				t.Fatal(err)
			}
			for i := range wc.Webhooks {
				w := &wc.Webhooks[i]
				checkNew(w.Name, w.MatchConditions)
				w.FailurePolicy = fail
				w.ObjectSelector = cmp.Or(w.ObjectSelector, everything)
				a := apiwebhook.NewValidatingWebhookAccessor(w.Name, wc.Name, w)
				hooks[w.Name] = hook{a, w.Rules, a.GetCompiledMatcher(conditions)}
			}
		}
	}
	want := []string{"check-refs.cos-externalizer.io", "externalize.cos-externalizer.io", SecretGuardName, "validate.cos-externalizer.io"}
	if diff := gocmp.Diff(want, slices.Sorted(maps.Keys(hooks))); diff != "" {
		t.Fatalf("config/%s: webhooks (-want +got):\n%s", overlay, diff)
	}
	return hooks
}

// oldestAPIServer is the oldest Kubernetes the webhooks support (docs/support.md: webhook-only on
// 1.30, where matchConditions are GA): its API server must accept the expressions as new ones.
var oldestAPIServer = version.MajorMinor(1, 30)

// baseEnvs returns the API server's CEL environment set of a Kubernetes version, built once a
// version (it takes a while).
func baseEnvs(v *version.Version) *environment.EnvSet {
	envsMu.Lock()
	defer envsMu.Unlock()
	if envs[v.String()] == nil {
		envs[v.String()] = environment.MustBaseEnvSet(v)
	}
	return envs[v.String()]
}

var (
	envsMu sync.Mutex
	envs   = map[string]*environment.EnvSet{}
)

// evaluate returns which of hooks the API server calls for req: the rules and the object selector
// match, and every matchCondition is true.
func evaluate(t *testing.T, hooks map[string]hook, req sampleRequest) called {
	t.Helper()
	attr := req.attributes()
	versioned := &admission.VersionedAttributes{Attributes: attr, VersionedKind: attr.GetKind()}
	if attr.GetObject() != nil {
		versioned.VersionedObject.Set(attr.GetObject())
	}
	if attr.GetOldObject() != nil {
		versioned.VersionedOldObject.Set(attr.GetOldObject())
	}
	calls := map[string]bool{}
	for name, h := range hooks {
		matched := false
		for _, r := range h.rules {
			if (&rules.Matcher{Rule: r, Attr: attr}).Matches() {
				matched = true
			}
		}
		if !matched {
			continue
		}
		if ok, err := (&object.Matcher{}).MatchObjectSelector(h.accessor, attr); err != nil {
			t.Fatalf("webhook %s: object selector: %v", name, err)
		} else if !ok {
			continue
		}
		res := h.matcher.Match(context.Background(), versioned, nil, nil)
		if res.Error != nil {
			t.Errorf("webhook %s: matchConditions: %v", name, res.Error)
		}
		calls[name] = res.Matches
	}
	return called{
		Externalize: calls["externalize.cos-externalizer.io"],
		CheckRefs:   calls["check-refs.cos-externalizer.io"],
		Validate:    calls["validate.cos-externalizer.io"],
		SecretGuard: calls[SecretGuardName],
	}
}

// sampleRequest is an admission request of the table.
type sampleRequest struct {
	op       admission.Operation
	obj, old runtime.Object
	user     string
}

// someone is a user of no special standing: the one of create and update.
const someone = "alice"

func create(obj *unstructured.Unstructured) sampleRequest {
	return sampleRequest{op: admission.Create, obj: obj, user: someone}
}

func update(old, obj *unstructured.Unstructured) sampleRequest {
	return sampleRequest{op: admission.Update, obj: obj, old: old, user: someone}
}

// as makes req one of user.
func as(user string, req sampleRequest) sampleRequest {
	req.user = user
	return req
}

func secretUpdate(user string, old, obj *corev1.Secret) sampleRequest {
	return sampleRequest{op: admission.Update, obj: obj, old: old, user: user}
}

// secretDelete: on a delete the API server passes the stored object as the old one.
func secretDelete(user string, old *corev1.Secret) sampleRequest {
	return sampleRequest{op: admission.Delete, old: old, user: user}
}

func (r sampleRequest) attributes() admission.Attributes {
	o := r.obj
	if o == nil {
		o = r.old
	}
	gvk := o.GetObjectKind().GroupVersionKind()
	gvr := olmv1.GroupVersion.WithResource("clusterobjectsets")
	ns, name := "", o.(metav1.Object).GetName()
	var opts runtime.Object
	if gvk.Kind == "Secret" {
		gvr = corev1.SchemeGroupVersion.WithResource("secrets")
		ns = o.(metav1.Object).GetNamespace()
	}
	switch r.op {
	case admission.Create:
		opts = &metav1.CreateOptions{}
	case admission.Update:
		opts = &metav1.UpdateOptions{}
	case admission.Delete:
		opts = &metav1.DeleteOptions{}
	}
	return admission.NewAttributesRecord(r.obj, r.old, gvk, ns, name, gvr, "", r.op, opts, false, &user.DefaultInfo{Name: r.user})
}

// cos returns a ClusterObjectSet with phases as the API server decodes it for a webhook: JSON made
// unstructured (a custom resource), with no phases when none are given.
func cos(phases ...olmv1.ClusterObjectSetPhase) *unstructured.Unstructured {
	c := &olmv1.ClusterObjectSet{
		TypeMeta:   metav1.TypeMeta{APIVersion: olmv1.GroupVersion.String(), Kind: "ClusterObjectSet"},
		ObjectMeta: metav1.ObjectMeta{Name: "sample-1"},
		Spec:       olmv1.ClusterObjectSetSpec{LifecycleState: olmv1.LifecycleStateActive, Revision: 1, Phases: phases},
	}
	b, err := json.Marshal(c)
	if err != nil {
		panic(err)
	}
	u := &unstructured.Unstructured{}
	if err := u.UnmarshalJSON(b); err != nil {
		panic(err)
	}
	return u
}

// phase is a phase of objects; without any, `objects: []` (the API server drops a null before
// admission: the schema does not make it nullable).
func phase(name string, objects ...olmv1.ClusterObjectSetObject) olmv1.ClusterObjectSetPhase {
	return olmv1.ClusterObjectSetPhase{Name: name, Objects: append([]olmv1.ClusterObjectSetObject{}, objects...)}
}

// refs is a refs-only phase; inline, one with an inline object.
func refs(name string) olmv1.ClusterObjectSetPhase   { return phase(name, refObject()) }
func inline(name string) olmv1.ClusterObjectSetPhase { return phase(name, inlineObject()) }

func refObject() olmv1.ClusterObjectSetObject { return refObjectTo("sample-1-objects") }

func refObjectTo(secret string) olmv1.ClusterObjectSetObject {
	return olmv1.ClusterObjectSetObject{Ref: olmv1.ObjectSourceRef{Name: secret, Namespace: olmv1.DefaultSystemNamespace, Key: "configmap"}}
}

func inlineObject() olmv1.ClusterObjectSetObject {
	cm := unstructured.Unstructured{}
	cm.SetAPIVersion("v1")
	cm.SetKind("ConfigMap")
	cm.SetName("settings")
	cm.SetNamespace("default")
	_ = unstructured.SetNestedField(cm.Object, "v", "data", "k")
	return olmv1.ClusterObjectSetObject{Object: cm}
}

func protected(p olmv1.ClusterObjectSetPhase) olmv1.ClusterObjectSetPhase {
	p.CollisionProtection = "None"
	return p
}

func emptyPhases(u *unstructured.Unstructured) *unstructured.Unstructured {
	must(unstructured.SetNestedSlice(u.Object, []any{}, "spec", "phases"))
	return u
}

// withoutObjects drops the objects of every phase.
func withoutObjects(u *unstructured.Unstructured) *unstructured.Unstructured {
	phases, _, _ := unstructured.NestedSlice(u.Object, "spec", "phases")
	for _, p := range phases {
		delete(p.(map[string]any), "objects")
	}
	must(unstructured.SetNestedSlice(u.Object, phases, "spec", "phases"))
	return u
}

func noSpec(u *unstructured.Unstructured) *unstructured.Unstructured {
	unstructured.RemoveNestedField(u.Object, "spec")
	return u
}

func labelled(u *unstructured.Unstructured) *unstructured.Unstructured {
	u.SetLabels(map[string]string{"olm.operatorframework.io/owner-name": "sample"})
	return u
}

func archived(u *unstructured.Unstructured) *unstructured.Unstructured {
	must(unstructured.SetNestedField(u.Object, string(olmv1.LifecycleStateArchived), "spec", "lifecycleState"))
	return u
}

// secret is an object-data Secret, with the revision-name label or without.
func secret(withLabel bool) *corev1.Secret {
	s := &corev1.Secret{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Secret"},
		ObjectMeta: metav1.ObjectMeta{Name: "sample-1-objects", Namespace: olmv1.DefaultSystemNamespace},
		Data:       map[string][]byte{"configmap": []byte(`{}`)},
	}
	if withLabel {
		s.Labels = map[string]string{olmv1.LabelRevisionName: "sample-1"}
	}
	return s
}

func must(err error) {
	if err != nil {
		panic(fmt.Sprintf("building a sample: %v", err))
	}
}

// TestOLMCondition: every overlay's check-refs webhook skips exactly OLMUsers, in the form
// ExemptCondition writes.
func TestOLMCondition(t *testing.T) {
	for _, overlay := range []string{"webhook", "webhook-only"} {
		var got []string
		for _, mc := range renderHooks(t, overlay)["check-refs.cos-externalizer.io"].accessor.GetMatchConditions() {
			if mc.Name == OLMConditionName {
				got = append(got, mc.Expression)
			}
		}
		if diff := gocmp.Diff([]string{ExemptCondition(OLMUsers)}, got); diff != "" {
			t.Errorf("config/%s: check-refs' matchCondition %s (-want +got):\n%s", overlay, OLMConditionName, diff)
		}
	}
}

package admission_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	olmv1 "github.com/cos-externalizer/cos-externalizer/api/v1"
	b "github.com/cos-externalizer/cos-externalizer/test/builders"
	"github.com/cos-externalizer/cos-externalizer/webhook/admission"
	"github.com/cos-externalizer/cos-externalizer/webhook/admission/admissiontest"
)

// answer is everything a caller of the pipeline sees.
type answer struct {
	Warnings []string
	Refusal  string
	Phases   []olmv1.ClusterObjectSetPhase
}

func answerOf(r admission.Response) answer {
	a := answer{Warnings: r.Warnings, Phases: r.Phases}
	if r.Refusal != nil {
		a.Refusal = string(r.Refusal.Reason)
		if r.Refusal.Err != nil {
			a.Refusal += ": " + r.Refusal.Err.Error()
		}
		if len(r.Refusal.Errs) > 0 {
			a.Refusal += ": " + r.Refusal.Errs.ToAggregate().Error()
		}
	}
	return a
}

// TestForgedRequestsLearnNothing: a request (forged, straight to the webhook port, or through the API
// server) names Secrets it cannot read, in refs and in the oldObject of an update. Whether they exist,
// their keys and the lengths of their values make no difference to the answer: the pipeline reads no
// Secret outside the system namespace, and one of another type than object-data reads as missing.
func TestForgedRequestsLearnNothing(t *testing.T) {
	const password = "hunter2-is-21-bytes!!"
	secret := func(namespace, name string, typ corev1.SecretType, keys ...string) *corev1.Secret {
		s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name}, Type: typ, Data: map[string][]byte{}}
		for _, k := range keys {
			s.Data[k] = []byte(password)
		}
		return s
	}
	// The Secrets a forged request probes for: present in one world, absent in the other.
	probed := []*corev1.Secret{
		secret("default", "topsecret", corev1.SecretTypeOpaque, "password", "other"),
		secret(ns, "creds", corev1.SecretTypeOpaque, "password", "other"),
		secret(ns, "serving", corev1.SecretTypeTLS, "tls.crt", "tls.key"),
		// object-data elsewhere is not ours either: never read.
		secret("default", "lookalike", olmv1.SecretTypeObjectData, "password"),
	}
	inline := b.Inline(b.ConfigMap("default", "cm", map[string]string{"k": "v"}))
	always := b.WithAnnotations(map[string]string{admission.Annotation: string(admission.ModeAlways)})
	refsTo := func(refs ...olmv1.ClusterObjectSetObject) *olmv1.ClusterObjectSet {
		return b.COS("forged", b.WithPhase("p", refs...))
	}
	tests := map[string]struct {
		op       admission.Operation
		old, new *olmv1.ClusterObjectSet
		dryRun   bool
	}{
		"create: ref to a key of a Secret in another namespace": {
			op: admission.Create, new: refsTo(b.Ref("topsecret", "default", "password"))},
		"create: ref to a missing key of a Secret in another namespace": {
			op: admission.Create, new: refsTo(b.Ref("topsecret", "default", "nokey"))},
		"create: ref to an object-data Secret in another namespace": {
			op: admission.Create, new: refsTo(b.Ref("lookalike", "default", "password"))},
		"create: ref to an Opaque Secret of the system namespace": {
			op: admission.Create, new: refsTo(b.Ref("creds", ns, "password"))},
		"create: ref to a missing key of an Opaque Secret of the system namespace": {
			op: admission.Create, new: refsTo(b.Ref("creds", "", "nokey"))},
		"create: ref to a TLS Secret of the system namespace": {
			op: admission.Create, new: refsTo(b.Ref("serving", "", "tls.key"), b.Ref("serving", "", "nokey"))},
		"create: externalized beside refs to Secrets it cannot read": {
			op: admission.Create, new: b.COS("forged", always, b.WithPhase("p", inline, b.Ref("creds", "", "password"), b.Ref("topsecret", "default", "nokey")))},
		"create: dry run": {
			op: admission.Create, dryRun: true, new: refsTo(b.Ref("creds", "", "password"), b.Ref("topsecret", "default", "password"))},
		"update: oldObject refs a Secret of another namespace": {
			op: admission.Update, old: refsTo(b.Ref("topsecret", "default", "password")), new: b.COS("forged", b.WithPhase("p", inline))},
		"update: oldObject refs a missing key of a Secret of another namespace": {
			op: admission.Update, old: refsTo(b.Ref("topsecret", "default", "nokey")), new: b.COS("forged", b.WithPhase("p", inline))},
		"update: oldObject refs an object-data Secret of another namespace": {
			op: admission.Update, old: refsTo(b.Ref("lookalike", "default", "password")), new: b.COS("forged", b.WithPhase("p", inline))},
		"update: oldObject refs an Opaque Secret of the system namespace": {
			op: admission.Update, old: refsTo(b.Ref("creds", "", "password")), new: b.COS("forged", b.WithPhase("p", inline))},
		"update: oldObject refs a TLS Secret of the system namespace": {
			op: admission.Update, old: refsTo(b.Ref("serving", ns, "tls.key")), new: b.COS("forged", b.WithPhase("p", inline))},
		"update: both objects ref Secrets it cannot read": {
			op: admission.Update, old: refsTo(b.Ref("creds", "", "password")), new: refsTo(b.Ref("topsecret", "default", "password"))},
		"update: the new object refs a Secret it cannot read": {
			op: admission.Update, old: refsTo(b.Ref("absent", "", "k")), new: refsTo(b.Ref("creds", "", "other"))},
		"update: dry run": {
			op: admission.Update, dryRun: true, old: refsTo(b.Ref("topsecret", "default", "password")), new: b.COS("forged", b.WithPhase("p", inline))},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			answers := map[string]answer{}
			for _, world := range []string{"present", "absent"} {
				store := admissiontest.NewStore(ns)
				if world == "present" {
					for _, s := range probed {
						store.AddSecret(s)
					}
				}
				p := &admission.Pipeline{Store: store, SystemNamespace: ns, Mode: admission.ModeOversized, Threshold: admission.DefaultThreshold}
				req := admission.Request{Operation: tc.op, Old: tc.old, New: tc.new.DeepCopy(), SpecSize: 100, DryRun: tc.dryRun}
				a := answerOf(p.Admit(context.Background(), req))
				answers[world] = a
				text := strings.Join(append(a.Warnings, a.Refusal), "\n")
				for _, leak := range []string{password, "bytes)", fmt.Sprint(len(password)), "tls.crt", `"other"`, "Opaque", "kubernetes.io/tls"} {
					if strings.Contains(text, leak) && !strings.Contains(fmt.Sprint(tc.old, tc.new), leak) {
						t.Errorf("%s: the answer carries %q, which the request did not submit:\n%s", world, leak, text)
					}
				}
			}
			if diff := cmp.Diff(answers["absent"], answers["present"]); diff != "" {
				t.Errorf("the answer tells whether the Secrets exist (-absent +present):\n%s", diff)
			}
		})
	}
}

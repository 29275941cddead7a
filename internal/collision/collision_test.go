package collision

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	olmv1 "github.com/cos-externalizer/cos-externalizer/api/v1"
)

const (
	prevent = olmv1.CollisionProtectionPrevent
	ifNoCtl = olmv1.CollisionProtectionIfNoController
	none    = olmv1.CollisionProtectionNone
)

func TestEffective(t *testing.T) {
	tests := map[string]struct {
		spec, phase, object olmv1.CollisionProtection
		want                olmv1.CollisionProtection
	}{
		"spec only":                 {spec: prevent, want: prevent},
		"phase overrides spec":      {spec: prevent, phase: none, want: none},
		"object overrides phase":    {spec: prevent, phase: none, object: ifNoCtl, want: ifNoCtl},
		"object overrides spec":     {spec: none, object: prevent, want: prevent},
		"empty phase falls through": {spec: ifNoCtl, object: "", phase: "", want: ifNoCtl},
		"all unset":                 {want: ""},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, Effective(tc.spec, tc.phase, tc.object)); diff != "" {
				t.Errorf("Effective() mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

// self is revision 2 of owner "ext".
var self = Revision{Name: "ext-2", UID: "uid-self", Revision: 2, OwnerName: "ext", Active: true}

func cosRef(name string, uid types.UID) metav1.OwnerReference {
	return metav1.OwnerReference{
		APIVersion: "olm.operatorframework.io/v1", Kind: "ClusterObjectSet",
		Name: name, UID: uid, Controller: ptr.To(true), BlockOwnerDeletion: ptr.To(true),
	}
}

// cosRefAt is cosRef with another apiVersion.
func cosRefAt(apiVersion, name string, uid types.UID) metav1.OwnerReference {
	r := cosRef(name, uid)
	r.APIVersion = apiVersion
	return r
}

func meta(refs ...metav1.OwnerReference) *metav1.ObjectMeta {
	return &metav1.ObjectMeta{Name: "obj", Namespace: "ns", OwnerReferences: refs}
}

func nonController(r metav1.OwnerReference) metav1.OwnerReference {
	r.Controller = nil
	return r
}

var deployRef = metav1.OwnerReference{
	APIVersion: "apps/v1", Kind: "Deployment", Name: "web", UID: "uid-deploy", Controller: ptr.To(true),
}

func rev(name string, uid types.UID, n int64, owner string, active bool) *Revision {
	return &Revision{Name: name, UID: uid, Revision: n, OwnerName: owner, Active: active}
}

func TestDecide(t *testing.T) {
	older := rev("ext-1", "uid-1", 1, "ext", true)
	newer := rev("ext-3", "uid-3", 3, "ext", true)
	same := rev("ext-2b", "uid-2b", 2, "ext", true)
	olderArchived := rev("ext-1", "uid-1", 1, "ext", false)
	newerArchived := rev("ext-3", "uid-3", 3, "ext", false)
	foreign := rev("other-1", "uid-o", 1, "other", true)
	foreignArchived := rev("other-1", "uid-o", 1, "other", false)
	unlabelled := rev("plain", "uid-p", 1, "", true)

	tests := map[string]struct {
		in   Input
		want Decision
	}{
		// Create and Update.
		"missing object is created": {
			in:   Input{Protection: prevent, Self: self},
			want: Decision{Verdict: Create},
		},
		"missing object is created whatever the level": {
			in:   Input{Protection: none, Self: self, Controller: foreign},
			want: Decision{Verdict: Create},
		},
		"self controller updates under Prevent": {
			in:   Input{Protection: prevent, Self: self, Existing: meta(cosRef("ext-2", "uid-self")), Controller: &self},
			want: Decision{Verdict: Update},
		},
		"self controller updates even when Controller is not passed": {
			in:   Input{Protection: ifNoCtl, Self: self, Existing: meta(cosRef("ext-2", "uid-self"))},
			want: Decision{Verdict: Update},
		},
		"self as non-controller owner is not Update": {
			in:   Input{Protection: prevent, Self: self, Existing: meta(nonController(cosRef("ext-2", "uid-self")))},
			want: Decision{Verdict: Collide, Message: "exists and is not controlled by this revision (collision protection Prevent)"},
		},
		"empty self UID never controls": {
			in:   Input{Protection: prevent, Self: Revision{Name: "x"}, Existing: meta(cosRef("x", ""))},
			want: Decision{Verdict: Collide, Message: "controlled by ClusterObjectSet x, which no longer exists, not by this revision (collision protection Prevent)"},
		},

		// Handover between revisions of the same owner.
		"older active revision of same owner: adopt under Prevent": {
			in:   Input{Protection: prevent, Self: self, Existing: meta(cosRef("ext-1", "uid-1")), Controller: older},
			want: Decision{Verdict: Adopt, Message: "taking over from older revision ext-1 (1)"},
		},
		"older active revision of same owner: adopt under IfNoController": {
			in:   Input{Protection: ifNoCtl, Self: self, Existing: meta(cosRef("ext-1", "uid-1")), Controller: older},
			want: Decision{Verdict: Adopt, Message: "taking over from older revision ext-1 (1)"},
		},
		"older active revision of same owner: adopt under None": {
			in:   Input{Protection: none, Self: self, Existing: meta(cosRef("ext-1", "uid-1")), Controller: older},
			want: Decision{Verdict: Adopt, Message: "taking over from older revision ext-1 (1)"},
		},
		"newer active revision of same owner: collide under None": {
			in:   Input{Protection: none, Self: self, Existing: meta(cosRef("ext-3", "uid-3")), Controller: newer},
			want: Decision{Verdict: Collide, Message: "held by newer revision ext-3 (3)"},
		},
		"newer active revision of same owner: collide under Prevent": {
			in:   Input{Protection: prevent, Self: self, Existing: meta(cosRef("ext-3", "uid-3")), Controller: newer},
			want: Decision{Verdict: Collide, Message: "held by newer revision ext-3 (3)"},
		},
		"equal active revision of same owner: collide": {
			in:   Input{Protection: none, Self: self, Existing: meta(cosRef("ext-2b", "uid-2b")), Controller: same},
			want: Decision{Verdict: Collide, Message: "held by revision ext-2b (2) of the same owner with the same revision number"},
		},
		"older archived revision of same owner: adopt under Prevent": {
			in:   Input{Protection: prevent, Self: self, Existing: meta(cosRef("ext-1", "uid-1")), Controller: olderArchived},
			want: Decision{Verdict: Adopt, Message: "taking over from archived revision ext-1 (1) (collision protection Prevent)"},
		},
		"newer archived revision of same owner: collide under Prevent": {
			in:   Input{Protection: prevent, Self: self, Existing: meta(cosRef("ext-3", "uid-3")), Controller: newerArchived},
			want: Decision{Verdict: Collide, Message: "controlled by archived ClusterObjectSet ext-3 (3) of the same owner, which is not older than this revision (collision protection Prevent)"},
		},
		"newer archived revision of same owner: adopt under IfNoController": {
			in:   Input{Protection: ifNoCtl, Self: self, Existing: meta(cosRef("ext-3", "uid-3")), Controller: newerArchived},
			want: Decision{Verdict: Adopt, Message: "taking over from archived revision ext-3 (3) (collision protection IfNoController)"},
		},
		"newer archived revision of same owner: adopt under None": {
			in:   Input{Protection: none, Self: self, Existing: meta(cosRef("ext-3", "uid-3")), Controller: newerArchived},
			want: Decision{Verdict: Adopt, Message: "taking over from archived revision ext-3 (3) (collision protection None)"},
		},
		"older archived revision of same owner: adopt under IfNoController": {
			in:   Input{Protection: ifNoCtl, Self: self, Existing: meta(cosRef("ext-1", "uid-1")), Controller: olderArchived},
			want: Decision{Verdict: Adopt, Message: "taking over from archived revision ext-1 (1) (collision protection IfNoController)"},
		},
		"same empty owner name is not the same owner": {
			in: Input{Protection: prevent, Self: Revision{Name: "a-2", UID: "uid-a2", Revision: 2},
				Existing: meta(cosRef("plain", "uid-p")), Controller: rev("plain", "uid-p", 1, "", true)},
			want: Decision{Verdict: Collide, Message: "controlled by ClusterObjectSet plain without a common owner (collision protection Prevent)"},
		},

		// No controller.
		"no owner references: Prevent collides": {
			in:   Input{Protection: prevent, Self: self, Existing: meta()},
			want: Decision{Verdict: Collide, Message: "exists and is not controlled by this revision (collision protection Prevent)"},
		},
		"no owner references: IfNoController adopts": {
			in:   Input{Protection: ifNoCtl, Self: self, Existing: meta()},
			want: Decision{Verdict: Adopt, Message: "adopting: no controller (collision protection IfNoController)"},
		},
		"no owner references: None adopts": {
			in:   Input{Protection: none, Self: self, Existing: meta()},
			want: Decision{Verdict: Adopt, Message: "adopting: no controller (collision protection None)"},
		},
		"only non-controller owner references: IfNoController adopts": {
			in:   Input{Protection: ifNoCtl, Self: self, Existing: meta(nonController(deployRef), nonController(cosRef("other-1", "uid-o")))},
			want: Decision{Verdict: Adopt, Message: "adopting: no controller (collision protection IfNoController)"},
		},
		"controller false is no controller": {
			in: Input{Protection: ifNoCtl, Self: self, Existing: meta(func() metav1.OwnerReference {
				r := deployRef
				r.Controller = ptr.To(false)
				return r
			}())},
			want: Decision{Verdict: Adopt, Message: "adopting: no controller (collision protection IfNoController)"},
		},
		"Controller passed without a controller ref is ignored": {
			in:   Input{Protection: ifNoCtl, Self: self, Existing: meta(), Controller: newer},
			want: Decision{Verdict: Adopt, Message: "adopting: no controller (collision protection IfNoController)"},
		},

		// Controller is a ClusterObjectSet that no longer exists.
		"vanished ClusterObjectSet: Prevent collides": {
			in:   Input{Protection: prevent, Self: self, Existing: meta(cosRef("gone", "uid-g"))},
			want: Decision{Verdict: Collide, Message: "controlled by ClusterObjectSet gone, which no longer exists, not by this revision (collision protection Prevent)"},
		},
		"vanished ClusterObjectSet: IfNoController adopts": {
			in:   Input{Protection: ifNoCtl, Self: self, Existing: meta(cosRef("gone", "uid-g"))},
			want: Decision{Verdict: Adopt, Message: "adopting: controlling ClusterObjectSet gone no longer exists (collision protection IfNoController)"},
		},
		"vanished ClusterObjectSet: None adopts": {
			in:   Input{Protection: none, Self: self, Existing: meta(cosRef("gone", "uid-g"))},
			want: Decision{Verdict: Adopt, Message: "adopting: controlling ClusterObjectSet gone no longer exists (collision protection None)"},
		},
		"other version of the group counts as a ClusterObjectSet": {
			in:   Input{Protection: ifNoCtl, Self: self, Existing: meta(cosRefAt("olm.operatorframework.io/v2", "gone", "uid-g"))},
			want: Decision{Verdict: Adopt, Message: "adopting: controlling ClusterObjectSet gone no longer exists (collision protection IfNoController)"},
		},
		"same kind in another group is a foreign controller": {
			in:   Input{Protection: ifNoCtl, Self: self, Existing: meta(cosRefAt("example.com/v1", "imposter", "uid-i"))},
			want: Decision{Verdict: Collide, Message: "controlled by ClusterObjectSet imposter (collision protection IfNoController)"},
		},

		// Controller of another kind.
		"Deployment controller: Prevent collides": {
			in:   Input{Protection: prevent, Self: self, Existing: meta(deployRef)},
			want: Decision{Verdict: Collide, Message: "controlled by Deployment web (collision protection Prevent)"},
		},
		"Deployment controller: IfNoController collides": {
			in:   Input{Protection: ifNoCtl, Self: self, Existing: meta(deployRef)},
			want: Decision{Verdict: Collide, Message: "controlled by Deployment web (collision protection IfNoController)"},
		},
		"Deployment controller: None adopts": {
			in:   Input{Protection: none, Self: self, Existing: meta(deployRef)},
			want: Decision{Verdict: Adopt, Message: "adopting from controller Deployment web (collision protection None)"},
		},
		"first controller ref counts": {
			in:   Input{Protection: ifNoCtl, Self: self, Existing: meta(nonController(cosRef("ext-2", "uid-self")), deployRef, cosRef("ext-2", "uid-self"))},
			want: Decision{Verdict: Collide, Message: "controlled by Deployment web (collision protection IfNoController)"},
		},

		// ClusterObjectSet of another owner.
		"active foreign ClusterObjectSet: Prevent collides": {
			in:   Input{Protection: prevent, Self: self, Existing: meta(cosRef("other-1", "uid-o")), Controller: foreign},
			want: Decision{Verdict: Collide, Message: "controlled by ClusterObjectSet other-1 of another owner (collision protection Prevent)"},
		},
		"active foreign ClusterObjectSet: IfNoController collides": {
			in:   Input{Protection: ifNoCtl, Self: self, Existing: meta(cosRef("other-1", "uid-o")), Controller: foreign},
			want: Decision{Verdict: Collide, Message: "controlled by ClusterObjectSet other-1 of another owner (collision protection IfNoController)"},
		},
		"active foreign ClusterObjectSet: None adopts": {
			in:   Input{Protection: none, Self: self, Existing: meta(cosRef("other-1", "uid-o")), Controller: foreign},
			want: Decision{Verdict: Adopt, Message: "adopting from ClusterObjectSet other-1 of another owner (collision protection None)"},
		},
		"archived foreign ClusterObjectSet: IfNoController collides": {
			in:   Input{Protection: ifNoCtl, Self: self, Existing: meta(cosRef("other-1", "uid-o")), Controller: foreignArchived},
			want: Decision{Verdict: Collide, Message: "controlled by archived ClusterObjectSet other-1 of another owner (collision protection IfNoController)"},
		},
		"archived foreign ClusterObjectSet: None adopts": {
			in:   Input{Protection: none, Self: self, Existing: meta(cosRef("other-1", "uid-o")), Controller: foreignArchived},
			want: Decision{Verdict: Adopt, Message: "adopting from archived ClusterObjectSet other-1 of another owner (collision protection None)"},
		},
		"unlabelled ClusterObjectSet: IfNoController collides": {
			in:   Input{Protection: ifNoCtl, Self: self, Existing: meta(cosRef("plain", "uid-p")), Controller: unlabelled},
			want: Decision{Verdict: Collide, Message: "controlled by ClusterObjectSet plain without a common owner (collision protection IfNoController)"},
		},
		"older revision of another owner is not a handover": {
			in:   Input{Protection: prevent, Self: self, Existing: meta(cosRef("other-1", "uid-o")), Controller: rev("other-1", "uid-o", 1, "other", true)},
			want: Decision{Verdict: Collide, Message: "controlled by ClusterObjectSet other-1 of another owner (collision protection Prevent)"},
		},
		"Controller with mismatched UID is a foreign live controller": {
			in:   Input{Protection: ifNoCtl, Self: self, Existing: meta(cosRef("ext-1", "uid-1")), Controller: rev("ext-1", "uid-stale", 1, "ext", false)},
			want: Decision{Verdict: Collide, Message: "controlled by ClusterObjectSet ext-1 (collision protection IfNoController)"},
		},
		"Controller without UID is trusted": {
			in:   Input{Protection: prevent, Self: self, Existing: meta(cosRef("ext-1", "uid-1")), Controller: rev("ext-1", "", 1, "ext", true)},
			want: Decision{Verdict: Adopt, Message: "taking over from older revision ext-1 (1)"},
		},

		// Unknown levels are Prevent.
		"unset protection is Prevent": {
			in:   Input{Self: self, Existing: meta()},
			want: Decision{Verdict: Collide, Message: "exists and is not controlled by this revision (collision protection unset, treated as Prevent)"},
		},
		"unknown protection is Prevent": {
			in:   Input{Protection: "Sometimes", Self: self, Existing: meta(cosRef("gone", "uid-g"))},
			want: Decision{Verdict: Collide, Message: "controlled by ClusterObjectSet gone, which no longer exists, not by this revision (collision protection Sometimes, treated as Prevent)"},
		},
		"unknown protection still hands over": {
			in:   Input{Self: self, Existing: meta(cosRef("ext-1", "uid-1")), Controller: older},
			want: Decision{Verdict: Adopt, Message: "taking over from older revision ext-1 (1)"},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got := Decide(tc.in)
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("Decide() mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

// TestDecideMessagesNameNoContent checks that messages never carry the object's labels, annotations
// or name: the caller adds the object's identity itself.
func TestDecideMessagesNameNoContent(t *testing.T) {
	const marker = "SECRET-MARKER"
	for _, p := range []olmv1.CollisionProtection{prevent, ifNoCtl, none, ""} {
		for _, ctl := range []*Revision{nil, rev("ext-1", "uid-1", 1, "ext", true), rev("o", "uid-1", 9, "o", false)} {
			m := meta(cosRef("ext-1", "uid-1"))
			m.Name = marker
			m.Labels = map[string]string{"k": marker}
			m.Annotations = map[string]string{"a": marker}
			d := Decide(Input{Protection: p, Self: self, Existing: m, Controller: ctl})
			if strings.Contains(d.Message, marker) {
				t.Errorf("message %q carries object content", d.Message)
			}
		}
	}
}

func TestVerdictString(t *testing.T) {
	got := []string{Create.String(), Update.String(), Adopt.String(), Collide.String(), Verdict(7).String()}
	want := []string{"Create", "Update", "Adopt", "Collide", "Verdict(7)"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("String() mismatch (-want +got):\n%s", diff)
	}
}

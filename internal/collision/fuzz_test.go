package collision

import (
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	olmv1 "github.com/cos-externalizer/cos-externalizer/api/v1"
)

// fuzzInput builds an Input from a few fuzzed values. refs describes up to four owner references, one
// byte each: bits 0-1 the UID (self, "uid-1", "uid-2", empty), bits 2-3 the controller flag (nil,
// false, true, true), bits 4-5 the kind (ClusterObjectSet, Deployment, ClusterObjectSet of another
// group, empty), bit 6 a bad apiVersion.
func fuzzInput(level string, selfUID string, selfRev int64, selfOwner string, exists bool, refs []byte,
	ctlKind uint8, ctlUID string, ctlRev int64, ctlOwner string, ctlActive bool) Input {
	in := Input{
		Protection: olmv1.CollisionProtection(level),
		Self:       Revision{Name: "self", UID: types.UID(selfUID), Revision: selfRev, OwnerName: selfOwner, Active: true},
	}
	if !exists {
		if ctlKind%2 == 1 {
			in.Controller = &Revision{Name: "c", UID: types.UID(ctlUID), Revision: ctlRev, OwnerName: ctlOwner, Active: ctlActive}
		}
		return in
	}
	m := &metav1.ObjectMeta{Name: "obj"}
	for i, b := range refs {
		if i == 4 {
			break
		}
		r := metav1.OwnerReference{Name: "owner", APIVersion: "olm.operatorframework.io/v1", Kind: "ClusterObjectSet"}
		switch b & 3 {
		case 0:
			r.UID = types.UID(selfUID)
		case 1:
			r.UID = "uid-1"
		case 2:
			r.UID = "uid-2"
		}
		switch (b >> 2) & 3 {
		case 1:
			r.Controller = ptr.To(false)
		case 2, 3:
			r.Controller = ptr.To(true)
		}
		switch (b >> 4) & 3 {
		case 1:
			r.APIVersion, r.Kind = "apps/v1", "Deployment"
		case 2:
			r.APIVersion = "example.com/v1"
		case 3:
			r.Kind = ""
		}
		if b&64 != 0 {
			r.APIVersion = "v1"
		}
		m.OwnerReferences = append(m.OwnerReferences, r)
	}
	in.Existing = m
	if ctlKind%2 == 1 {
		in.Controller = &Revision{Name: "c", UID: types.UID(ctlUID), Revision: ctlRev, OwnerName: ctlOwner, Active: ctlActive}
	}
	return in
}

func FuzzDecide(f *testing.F) {
	f.Add("Prevent", "uid-s", int64(2), "ext", true, []byte{0x08}, uint8(1), "uid-s", int64(2), "ext", true)
	f.Add("IfNoController", "uid-s", int64(2), "ext", true, []byte{0x09}, uint8(1), "uid-1", int64(1), "ext", true)
	f.Add("None", "uid-s", int64(2), "ext", true, []byte{0x19, 0x09}, uint8(0), "", int64(0), "", false)
	f.Add("", "", int64(0), "", true, []byte{0x08}, uint8(1), "", int64(0), "", false)
	f.Add("Prevent", "uid-s", int64(1), "ext", false, []byte{}, uint8(1), "uid-1", int64(3), "ext", true)
	f.Add("IfNoController", "uid-1", int64(5), "", true, []byte{0x05, 0x4a, 0x2b}, uint8(1), "uid-2", int64(9), "", false)
	f.Fuzz(func(t *testing.T, level, selfUID string, selfRev int64, selfOwner string, exists bool, refs []byte,
		ctlKind uint8, ctlUID string, ctlRev int64, ctlOwner string, ctlActive bool) {
		in := fuzzInput(level, selfUID, selfRev, selfOwner, exists, refs, ctlKind, ctlUID, ctlRev, ctlOwner, ctlActive)
		d := Decide(in)
		if again := Decide(in); again != d {
			t.Fatalf("not deterministic: %+v then %+v", d, again)
		}

		if (d.Verdict == Create) != (in.Existing == nil) {
			t.Fatalf("Create iff Existing nil: got %v for Existing %v", d.Verdict, in.Existing)
		}
		ref := ControllerRef(in.Existing)
		selfControls := ref != nil && in.Self.UID != "" && ref.UID == in.Self.UID
		if (d.Verdict == Update) != selfControls {
			t.Fatalf("Update iff Self is controller: got %v, self controls %v", d.Verdict, selfControls)
		}
		switch d.Verdict {
		case Create, Update:
			if d.Message != "" {
				t.Fatalf("%v with message %q", d.Verdict, d.Message)
			}
		case Adopt, Collide:
			if d.Message == "" {
				t.Fatalf("%v without message", d.Verdict)
			}
		default:
			t.Fatalf("unknown verdict %v", d.Verdict)
		}
		// Prevent never adopts from a controller that is not an older revision of the same owner.
		if d.Verdict == Adopt && (in.Protection == olmv1.CollisionProtectionPrevent || in.Protection == "") {
			c := in.Controller
			if ref == nil || !IsClusterObjectSetRef(*ref) || c == nil || in.Self.OwnerName == "" ||
				c.OwnerName != in.Self.OwnerName || c.Revision >= in.Self.Revision {
				t.Fatalf("Prevent adopted: %+v for %+v (controller %+v)", d, ref, c)
			}
		}
		// An active newer revision of the same owner is never taken over.
		if d.Verdict == Adopt && ref != nil && IsClusterObjectSetRef(*ref) && in.Controller != nil {
			c := in.Controller
			if (c.UID == "" || c.UID == ref.UID) && c.Active && in.Self.OwnerName != "" &&
				c.OwnerName == in.Self.OwnerName && c.Revision >= in.Self.Revision {
				t.Fatalf("adopted from an active revision that is not older: %+v", d)
			}
		}
	})
}

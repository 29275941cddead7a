// Package collision decides what a ClusterObjectSet revision may do with an object that may already
// exist in the cluster: create it, update it, adopt it, or leave it alone. It is pure: the caller
// looks up the existing object's metadata and its controlling ClusterObjectSet and passes them in.
//
// Messages name the kind of conflict, the protection level and the controlling owner's kind and name,
// never object content; the caller adds the object's kind, namespace and name.
package collision

import (
	"fmt"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	olmv1 "github.com/cos-externalizer/cos-externalizer/api/v1"
)

// Effective returns the collision protection in force for an object: object > phase > spec (empty
// means unset). It returns "" only when all three are unset.
func Effective(spec, phase, object olmv1.CollisionProtection) olmv1.CollisionProtection {
	switch {
	case object != "":
		return object
	case phase != "":
		return phase
	default:
		return spec
	}
}

// Revision identifies a ClusterObjectSet.
type Revision struct {
	Name      string
	UID       types.UID
	Revision  int64
	OwnerName string // its label olm.operatorframework.io/owner-name, "" when unlabelled
	Active    bool   // lifecycleState Active and not being deleted
}

// Input is everything Decide looks at.
type Input struct {
	// Protection is the effective level for this object (see Effective). Empty or unknown levels are
	// treated as Prevent, the safest.
	Protection olmv1.CollisionProtection
	// Self is the revision being reconciled. Its UID must be set: an empty UID never counts as
	// controlling anything.
	Self Revision
	// Existing is the object's metadata as it is in the cluster, nil when it does not exist.
	Existing *metav1.ObjectMeta
	// Controller is the ClusterObjectSet that is the controller owner of Existing (its controller
	// ownerReference has apiVersion olm.operatorframework.io/v1, kind ClusterObjectSet), looked up by
	// the caller; nil when Existing has no controller, the controller is not a ClusterObjectSet, or that
	// ClusterObjectSet no longer exists. It is ignored unless Existing has a controller ownerReference
	// to a ClusterObjectSet; when its UID is set and differs from that reference's UID, the controller
	// is treated as a live ClusterObjectSet of another owner.
	Controller *Revision
}

// Verdict is what to do with the object.
type Verdict int

const (
	// Create: the object does not exist.
	Create Verdict = iota
	// Update: Self already controls it.
	Update
	// Adopt: take it over (Self becomes the controller).
	Adopt
	// Collide: leave it alone; Decision.Message says why.
	Collide
)

// String returns the verdict's name.
func (v Verdict) String() string {
	switch v {
	case Create:
		return "Create"
	case Update:
		return "Update"
	case Adopt:
		return "Adopt"
	case Collide:
		return "Collide"
	default:
		return fmt.Sprintf("Verdict(%d)", int(v))
	}
}

// Decision is the outcome of Decide. Message is set for Adopt (why adopting is allowed) and Collide
// (why not), empty for Create and Update.
type Decision struct {
	Verdict Verdict
	Message string
}

// ControllerRef returns the first ownerReference of meta marked as controller, or nil.
func ControllerRef(meta *metav1.ObjectMeta) *metav1.OwnerReference {
	if meta == nil {
		return nil
	}
	for i := range meta.OwnerReferences {
		if c := meta.OwnerReferences[i].Controller; c != nil && *c {
			return &meta.OwnerReferences[i]
		}
	}
	return nil
}

// IsClusterObjectSetRef reports whether an ownerReference points at a ClusterObjectSet (any version
// of the olm.operatorframework.io group).
func IsClusterObjectSetRef(ref metav1.OwnerReference) bool {
	group, _, found := strings.Cut(ref.APIVersion, "/")
	return found && group == olmv1.GroupVersion.Group && ref.Kind == olmv1.ClusterObjectSetKind
}

// Decide applies the collision rules:
//
//   - Existing nil: Create.
//   - Self is the controller (controller ownerReference UID == Self.UID): Update.
//   - Controlled by an Active ClusterObjectSet with the same non-empty owner name: Adopt from a lower
//     revision (handover to the newer revision, whatever the protection level), Collide with a
//     higher or equal one.
//   - Controlled by an archived ClusterObjectSet with the same owner name (it is letting go): Adopt
//     under IfNoController and None; under Prevent only from a lower revision.
//   - Otherwise by protection: Prevent collides; IfNoController adopts when there is no live
//     controller (no controller ownerReference, or one to a ClusterObjectSet that no longer exists)
//     and collides otherwise; None adopts anything.
func Decide(in Input) Decision {
	if in.Existing == nil {
		return Decision{Verdict: Create}
	}
	ref := ControllerRef(in.Existing)
	if ref != nil && in.Self.UID != "" && ref.UID == in.Self.UID {
		return Decision{Verdict: Update}
	}
	p := protectionOf(in.Protection)

	// No controller at all.
	if ref == nil {
		switch p.level {
		case olmv1.CollisionProtectionPrevent:
			return p.collide("exists and is not controlled by this revision")
		default:
			return p.adopt("adopting: no controller")
		}
	}

	owner := ref.Kind + " " + ref.Name
	if !IsClusterObjectSetRef(*ref) {
		// A controller that is not a ClusterObjectSet.
		return p.foreign(owner)
	}

	c := in.Controller
	if c == nil {
		// The controlling ClusterObjectSet no longer exists: no live controller.
		switch p.level {
		case olmv1.CollisionProtectionPrevent:
			return p.collide("controlled by %s, which no longer exists, not by this revision", owner)
		default:
			return p.adopt("adopting: controlling %s no longer exists", owner)
		}
	}
	if c.UID != "" && c.UID != ref.UID {
		// The caller's lookup does not match the reference: trust neither its owner name nor its
		// state, and treat the controller as a live foreign one.
		return p.foreign(owner)
	}
	if in.Self.OwnerName != "" && c.OwnerName == in.Self.OwnerName {
		return p.sameOwner(owner, c, in.Self)
	}

	// A live ClusterObjectSet of another owner, or with no owner label (archived or not).
	state := ""
	if !c.Active {
		state = "archived "
	}
	whose := "of another owner"
	if in.Self.OwnerName == "" || c.OwnerName == "" {
		whose = "without a common owner"
	}
	switch p.level {
	case olmv1.CollisionProtectionNone:
		return p.adopt("adopting from %s%s %s", state, owner, whose)
	default:
		return p.collide("controlled by %s%s %s", state, owner, whose)
	}
}

// protection is the collision protection a decision applies: level, with an unknown or unset one
// treated as Prevent, and how its messages name it.
type protection struct {
	level olmv1.CollisionProtection
	label string
}

// protectionOf is the protection of level.
func protectionOf(level olmv1.CollisionProtection) protection {
	switch level {
	case olmv1.CollisionProtectionPrevent, olmv1.CollisionProtectionIfNoController, olmv1.CollisionProtectionNone:
		return protection{level: level, label: string(level)}
	case "":
		return protection{level: olmv1.CollisionProtectionPrevent, label: "unset, treated as Prevent"}
	default:
		return protection{level: olmv1.CollisionProtectionPrevent, label: string(level) + ", treated as Prevent"}
	}
}

func (p protection) collide(format string, args ...any) Decision {
	return Decision{Verdict: Collide, Message: fmt.Sprintf(format, args...) + " (collision protection " + p.label + ")"}
}

func (p protection) adopt(format string, args ...any) Decision {
	return Decision{Verdict: Adopt, Message: fmt.Sprintf(format, args...) + " (collision protection " + p.label + ")"}
}

// foreign decides on a live controller owner that is not a ClusterObjectSet we know: only None adopts.
func (p protection) foreign(owner string) Decision {
	switch p.level {
	case olmv1.CollisionProtectionNone:
		return p.adopt("adopting from controller %s", owner)
	default:
		return p.collide("controlled by %s", owner)
	}
}

// sameOwner decides on the controller c (owner) that is a revision of self's owner: an Active one
// hands over to a newer revision whatever the protection, an archived one is letting go.
func (p protection) sameOwner(owner string, c *Revision, self Revision) Decision {
	older := c.Revision < self.Revision
	if c.Active {
		switch {
		case older:
			return Decision{Verdict: Adopt, Message: fmt.Sprintf("taking over from older revision %s (%d)", c.Name, c.Revision)}
		case c.Revision == self.Revision:
			return Decision{Verdict: Collide, Message: fmt.Sprintf("held by revision %s (%d) of the same owner with the same revision number", c.Name, c.Revision)}
		default:
			return Decision{Verdict: Collide, Message: fmt.Sprintf("held by newer revision %s (%d)", c.Name, c.Revision)}
		}
	}
	// Archived (or being deleted) revision of the same owner: it is letting go.
	if older || p.level != olmv1.CollisionProtectionPrevent {
		return p.adopt("taking over from archived revision %s (%d)", c.Name, c.Revision)
	}
	return p.collide("controlled by archived %s (%d) of the same owner, which is not older than this revision", owner, c.Revision)
}

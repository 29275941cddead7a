package admission

import (
	"fmt"

	"k8s.io/apimachinery/pkg/util/validation/field"

	olmv1 "github.com/cos-externalizer/cos-externalizer/api/v1"
)

// The externalization policy: whether the inline objects of a ClusterObjectSet are moved into
// Secrets (Decide), for the mutating webhook, the validating webhook and kubectl cos alike.

// Mode is the externalization policy.
type Mode string

const (
	// ModeAlways externalizes every inline object.
	ModeAlways Mode = "always"
	// ModeOversized externalizes the inline objects of a ClusterObjectSet whose serialized spec is
	// over the threshold, and leaves smaller ones inline as written.
	ModeOversized Mode = "oversized"
	// ModeNever leaves every ClusterObjectSet as written.
	ModeNever Mode = "never"
)

const (
	// Annotation overrides the policy for one ClusterObjectSet: "always" or "never".
	Annotation = "cos-externalizer.io/externalize"
	// DefaultThreshold is the serialized spec size above which ModeOversized externalizes: half the
	// 256 KiB annotation limit, so client-side kubectl apply keeps working.
	DefaultThreshold = 128 << 10
)

// ParseMode parses a --externalize flag value.
func ParseMode(s string) (Mode, error) {
	switch m := Mode(s); m {
	case ModeAlways, ModeOversized, ModeNever:
		return m, nil
	}
	return "", fmt.Errorf("%q is not one of always, oversized, never", s)
}

// Decision says whether to externalize, and why (for warnings, logs and refusals).
type Decision struct {
	Externalize bool
	Reason      string
}

// Decide applies the policy (the annotation overriding the flag) to a ClusterObjectSet whose spec
// serializes to specSize bytes. An annotation with another value than always or never is a field
// error.
func Decide(mode Mode, threshold int, annotations map[string]string, specSize int, inlineObjects int) (Decision, *field.Error) {
	if v, ok := annotations[Annotation]; ok {
		switch Mode(v) {
		case ModeAlways, ModeNever:
			mode = Mode(v)
		default:
			return Decision{}, field.NotSupported(field.NewPath("metadata", "annotations").Key(Annotation), v,
				[]string{string(ModeAlways), string(ModeNever)})
		}
	}
	switch {
	case inlineObjects == 0:
		return Decision{Reason: "no inline objects"}, nil
	case mode == ModeNever:
		return Decision{Reason: "externalization is set to never"}, nil
	case mode == ModeAlways:
		return Decision{Externalize: true, Reason: "externalization is set to always"}, nil
	case specSize > threshold:
		return Decision{Externalize: true, Reason: fmt.Sprintf("spec is %d bytes, over the %d-byte threshold", specSize, threshold)}, nil
	default:
		return Decision{Reason: fmt.Sprintf("spec is %d bytes, within the %d-byte threshold", specSize, threshold)}, nil
	}
}

// CountInline returns the number of inline objects in phases.
func CountInline(phases []olmv1.ClusterObjectSetPhase) int {
	n := 0
	for _, p := range phases {
		for _, o := range p.Objects {
			if !o.IsRef() {
				n++
			}
		}
	}
	return n
}

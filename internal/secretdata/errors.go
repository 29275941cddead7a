package secretdata

import (
	"fmt"

	"k8s.io/apimachinery/pkg/types"
)

// WriteError is a failed Secret read or write.
type WriteError struct {
	Secret types.NamespacedName
	Err    error
}

func (e *WriteError) Error() string {
	return fmt.Sprintf("writing object-data Secret %s: %v", e.Secret, e.Err)
}

// Unwrap returns the client's error.
func (e *WriteError) Unwrap() error { return e.Err }

// ConflictError is an existing Secret under a name the plan needs that is not exactly ours.
type ConflictError struct {
	Secret types.NamespacedName
	// Why lists the reasons (Unusable), joined with ", ".
	Why string
}

func (e *ConflictError) Error() string {
	return fmt.Sprintf("secret %s already exists and cannot be used: %s; delete it or rename the ClusterObjectSet", e.Secret, e.Why)
}

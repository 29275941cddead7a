package secretdata

import (
	"errors"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"

	"github.com/cos-externalizer/cos-externalizer/internal/content"
)

// Reason is why a ref did not resolve.
type Reason string

// The reasons a ref does not resolve.
const (
	// SecretMissing: the Secret does not exist (the API server's NotFound).
	SecretMissing Reason = "SecretMissing"
	// SecretUnreadable: reading the Secret failed otherwise.
	SecretUnreadable Reason = "SecretUnreadable"
	// NotImmutable: the Secret is not immutable, and the resolver requires it (Config.RequireImmutable).
	NotImmutable Reason = "NotImmutable"
	// KeyMissing: the Secret has no such key.
	KeyMissing Reason = "KeyMissing"
	// DigestMismatch: the value does not hash to its content key (content.ErrDigestMismatch).
	DigestMismatch Reason = "DigestMismatch"
	// TooLarge: the value decodes to more than content.MaxDecompressedSize (content.ErrTooLarge).
	TooLarge Reason = "TooLarge"
	// OverBudget: the resolved content of the ClusterObjectSet exceeds its budget
	// (content.ErrBudgetExceeded; ResolveMemory.MaxResolvedBytes).
	OverBudget Reason = "OverBudget"
	// Busy: the budget's pool had no room in time (content.ErrBusy); a later resolution may succeed.
	Busy Reason = "Busy"
	// Corrupt: the value does not decode (bad gzip).
	Corrupt Reason = "Corrupt"
	// NotAnObject: the value decodes, but not to a Kubernetes object: not one JSON object
	// (content.ErrNotObject), or one without apiVersion or kind (ErrNotKubernetesObject).
	NotAnObject Reason = "NotAnObject"
)

// ErrNotKubernetesObject is a value that holds a JSON object without apiVersion or kind.
var ErrNotKubernetesObject = errors.New("not a Kubernetes object (apiVersion and kind are required)")

// Failure is a ref that did not resolve. Callers word it their own way from Reason, Secret and Key
// (upstream's words in the reconciler's conditions, a check line in kubectl cos inspect); Error is the
// wording of admission's warnings and kubectl cos. It never holds content, nor a value's size or
// digest.
type Failure struct {
	Reason Reason
	// Secret is the ref's Secret, its namespace defaulted.
	Secret types.NamespacedName
	// Key is the ref's data key.
	Key string
	// Err is the cause: the client's error, or content's (which hold no content); nil for KeyMissing
	// and NotImmutable.
	Err error
	// Flag names the flag of the limit reached, for OverBudget and Busy.
	Flag string
}

func (f *Failure) Error() string {
	switch f.Reason {
	case SecretMissing, SecretUnreadable:
		return fmt.Sprintf("reading Secret %s: %v", f.Secret, f.Err)
	case NotImmutable:
		return fmt.Sprintf("secret %s is not immutable", f.Secret)
	case KeyMissing:
		return fmt.Sprintf("secret %s has no key %q", f.Secret, f.Key)
	case OverBudget:
		// The budget is the ClusterObjectSet's, not this key's.
		return fmt.Sprintf("%v (the limit is %s)", f.Err, f.Flag)
	case Busy:
		return fmt.Sprintf("secret %s key %q: %v (the limit is %s)", f.Secret, f.Key, f.Err, f.Flag)
	default:
		return fmt.Sprintf("secret %s key %q: %v", f.Secret, f.Key, f.Err)
	}
}

// Unwrap returns the cause.
func (f *Failure) Unwrap() error { return f.Err }

// ReasonOf returns the Reason of the Failure in err's chain, and false when there is none.
func ReasonOf(err error) (Reason, bool) {
	var f *Failure
	if !errors.As(err, &f) {
		return "", false
	}
	return f.Reason, true
}

// readFailure is a failed read of the Secret key.
func readFailure(key types.NamespacedName, err error) *Failure {
	reason := SecretUnreadable
	if apierrors.IsNotFound(err) {
		reason = SecretMissing
	}
	return &Failure{Reason: reason, Secret: key, Err: err}
}

// valueFailure classifies an error of content.Budget.Resolve for the value key of Secret secret.
func valueFailure(secret types.NamespacedName, key string, err error, busyFlag string) *Failure {
	f := &Failure{Secret: secret, Key: key, Err: err}
	// A budget error is also ErrTooLarge: it comes first.
	switch {
	case errors.Is(err, content.ErrBudgetExceeded):
		f.Reason, f.Flag = OverBudget, "--max-resolved-bytes"
	case errors.Is(err, content.ErrBusy):
		f.Reason, f.Flag = Busy, busyFlag
	case errors.Is(err, content.ErrDigestMismatch):
		f.Reason = DigestMismatch
	case errors.Is(err, content.ErrTooLarge):
		f.Reason = TooLarge
	case errors.Is(err, content.ErrNotObject):
		f.Reason = NotAnObject
	default:
		f.Reason = Corrupt
	}
	return f
}

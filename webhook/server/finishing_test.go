package server

import (
	"context"
	"testing"

	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"
)

// handlerFunc is an admission.Handler of a function.
type handlerFunc func(context.Context, admission.Request) admission.Response

func (f handlerFunc) Handle(ctx context.Context, req admission.Request) admission.Response {
	return f(ctx, req)
}

// TestFinishingOutlivesTheManager: a request in flight when the manager stops (its context, which
// controller-runtime gives every request, is canceled) still finishes, with the context's values and
// a deadline.
func TestFinishingOutlivesTheManager(t *testing.T) {
	type key struct{}
	tests := map[string]struct {
		cancelBefore bool
	}{
		"manager running":           {},
		"manager stopped meanwhile": {cancelBefore: true},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			ctx, cancel := context.WithCancel(context.WithValue(context.Background(), key{}, "v"))
			defer cancel()
			if tc.cancelBefore {
				cancel()
			}
			var errSeen error
			var value any
			_, hasDeadline := context.Background().Deadline()
			finishing{handlerFunc(func(ctx context.Context, _ admission.Request) admission.Response {
				errSeen, value = ctx.Err(), ctx.Value(key{})
				_, hasDeadline = ctx.Deadline()
				return admission.Allowed("")
			})}.Handle(ctx, admission.Request{})
			if errSeen != nil || value != "v" || !hasDeadline {
				t.Errorf("the handler saw err %v, value %v, a deadline %t; want no error, the value and a deadline", errSeen, value, hasDeadline)
			}
		})
	}
}

package server

import (
	"context"
	"errors"
	"net/http"
)

// errCallerGone is the cause of a handler's context canceled because its HTTP caller went away.
var errCallerGone = errors.New("the caller of this admission request has gone")

// goneKey is the context key of the context that ends when the request's caller has gone.
type goneKey struct{}

// callerGone wraps h so that a handler can tell that its HTTP caller has gone (the API server timed
// the request out, or a client closed its connection) from the replica stopping: the request's
// context ends in both cases (the server's base context is the manager's), and it is the caller's
// going only while stopping, the context the manager stops with, has not ended. The request's context
// then carries a context that ends with errCallerGone as its cause (callerGoneContext); finishing
// cancels the handler's work with it, so that a handler whose caller has gone stops before it writes.
func callerGone(stopping context.Context, h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		gone, cancel := context.WithCancelCause(context.Background())
		defer cancel(nil)
		stop := context.AfterFunc(r.Context(), func() {
			if stopping.Err() == nil {
				cancel(errCallerGone)
			}
		})
		defer stop()
		h.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), goneKey{}, gone)))
	})
}

// callerGoneContext returns the context that ends when the caller of ctx's request has gone; nil
// for a context that did not come through callerGone.
func callerGoneContext(ctx context.Context) context.Context {
	gone, _ := ctx.Value(goneKey{}).(context.Context)
	return gone
}

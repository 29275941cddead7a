package server

import (
	"context"
	"net/http"
)

// callerKey is the context key of the caller's authentication.
type callerKey struct{}

// CallerAuthenticated reports whether the request that ctx belongs to came over a connection whose
// client certificate the webhook server verified (--webhook-client-ca): the caller is then the API
// server, or whoever holds a certificate the client CA signed. It is false when the server does not
// authenticate its callers, and for any context that did not come from the webhook server.
func CallerAuthenticated(ctx context.Context) bool {
	v, _ := ctx.Value(callerKey{}).(bool)
	return v
}

// WithCallerAuthentication records on each request's context whether its connection presented a
// verified client certificate, for CallerAuthenticated. The server wraps its whole mux with it.
func WithCallerAuthentication(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ok := r.TLS != nil && len(r.TLS.VerifiedChains) > 0
		h.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), callerKey{}, ok)))
	})
}

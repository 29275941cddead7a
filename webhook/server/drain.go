package server

import (
	"net/http"
	"sync/atomic"
)

// Drain tells the webhooks that their replica is about to stop. While it drains, every response closes
// the connection it came on ("Connection: close"), so the API server stops reusing its keep-alive
// connections to this replica and opens its next one through the Service, before the server closes
// its idle connections: a request sent on one of those as it closes used to fail with EOF.
type Drain struct{ on atomic.Bool }

// Start begins the drain; it never ends (the replica stops).
func (d *Drain) Start() { d.on.Store(true) }

// Draining reports whether the drain has begun; a nil Drain never drains.
func (d *Drain) Draining() bool { return d != nil && d.on.Load() }

// Wrap returns h, closing each connection once the drain has begun.
func (d *Drain) Wrap(h http.Handler) http.Handler {
	if d == nil {
		return h
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if d.Draining() {
			w.Header().Set("Connection", "close")
		}
		h.ServeHTTP(w, r)
	})
}

// Package drift decides, from a live object alone, whether it still holds what the reconciler would
// apply to it, so that a reconcile (the first after a restart or a leader failover included) skips a
// server-side apply that would change nothing, and never one that restores drift.
//
// The object carries the digest of the desired object we applied (Annotation), and server-side
// apply's managedFields say which fields are still ours: a change by anyone else at one of our fields
// (an update, a patch, a scale, a forced apply, a removal) takes the field from us. So "we own every
// field of desired, and the digest is desired's" means nothing changed our fields since we applied
// desired. Values are never compared: the API server's normalizations (defaults, quantities) never
// look like drift.
package drift

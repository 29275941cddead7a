// Package content is the pure core of externalizing ClusterObjectSet objects: the canonical JSON of
// an object, its content key, the gzip policy, the packing of objects into Secrets (named by naming.SecretName),
// and the reading side (decode, verify, parse) used by the reconciler.
//
// It has no Kubernetes client and does no I/O: callers pass plain objects and bytes in, and get Secret
// data, names and refs out. Everything it produces is deterministic: the same input gives the same
// names, keys and bytes in every run and every process of a build, on any number of cores, which is
// what lets a mutating webhook answer a dry-run exactly as it answers the real request. (Another build
// may compress differently, and so key differently, when github.com/klauspost/compress changes; refs
// are compared by what they resolve to, so that changes no outcome.)
//
// Content format (see the project's design notes):
//   - a stored value is the canonical JSON of one object, or its gzip compression (readers detect gzip
//     by the leading bytes 1f 8b and cap what they inflate);
//   - its data key is Key(stored value): base64url, no padding, of SHA-256 over the stored bytes;
//   - Secrets hold at most Options.Budget bytes of data (keys plus values) and are named
//     naming.SecretName(cosName, data).
//
// Errors of this package never contain object content: they name positions, kinds, names and sizes.
package content

// Package secretdata is the pure core of object-data Secrets, shared by every wing: the Secret written
// for a planned one (ObjectDataSecret) and whether an existing Secret may stand for it (Unusable), the
// errors of writing them (WriteError, ConflictError), and the one resolver that reads refs out of them
// (Resolver), with its typed failures (Failure) and the memory it may hold (ResolveMemory). It has no
// client: callers pass how to read a Secret (GetSecretFunc), and internal/kube/objectdata supplies one over a client.
// Nothing here puts Secret content, or the size or digest of content, in an error.
package secretdata

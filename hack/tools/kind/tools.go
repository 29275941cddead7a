//go:build tools

// Package tools pins kind, which the e2e suite on kind (make test-e2e) creates its cluster with.
package tools

import _ "sigs.k8s.io/kind"

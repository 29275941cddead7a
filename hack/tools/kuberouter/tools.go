//go:build tools

// Package tools pins kube-router (make kind-node-image builds its command into the image of the
// NetworkPolicy enforcer of the kind e2e cluster built from sources).
package tools

import _ "github.com/cloudnativelabs/kube-router/v2/cmd/kube-router"

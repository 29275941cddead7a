//go:build tools

// Package tools pins CoreDNS, built into the kind node image (make kind-node-image) at the version the
// pinned kubeadm asks for (kubeadm config images list).
package tools

import _ "github.com/coredns/coredns"

//go:build tools

// Package tools pins the commands of other modules this module builds: the control plane's, kubectl,
// kwok, and the kind node's. etcd and cert-manager's controller and cainjector are the mains of
// etcd/, cert-manager-controller/ and cert-manager-cainjector/.
package tools

import (
	_ "k8s.io/kubernetes/cmd/kube-apiserver"
	_ "k8s.io/kubernetes/cmd/kube-controller-manager"
	_ "k8s.io/kubernetes/cmd/kube-proxy"
	_ "k8s.io/kubernetes/cmd/kube-scheduler"
	_ "k8s.io/kubernetes/cmd/kubeadm"
	_ "k8s.io/kubernetes/cmd/kubectl"
	_ "k8s.io/kubernetes/cmd/kubelet"
	_ "sigs.k8s.io/kwok/cmd/kwok"
)

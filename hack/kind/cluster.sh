#!/usr/bin/env bash
# Readies the kind cluster $KIND_CLUSTER for the e2e suite on kind (make test-e2e; docs/e2e.md): creates
# it ($KIND_CONFIG, node image $KIND_IMAGE) unless it exists, writes its kubeconfig to $KIND_KUBECONFIG,
# applies $KIND_NETWORK_POLICY (kube-router, when set) and waits for it, installs cert-manager
# ($CERTMANAGER_MANIFEST) and loads the manager's image ($IMAGE_ARCHIVE).
#
# With KIND_AUTH=1 the cluster's API server authenticates to the webhooks: hack/kind/webhookauth writes
# its client certificate into $KIND_WEBHOOK_AUTH, which $KIND_CONFIG must mount, and a cluster kept
# from before must present it (one created without would have every admission refused).
set -euo pipefail
: "${KIND:?}" "${KIND_CLUSTER:?}" "${KIND_CONFIG?}" "${KIND_IMAGE?}" "${KIND_AUTH?}" "${KIND_WEBHOOK_AUTH:?}"
: "${KIND_KUBECONFIG:?}" "${CERTMANAGER_MANIFEST:?}" "${IMAGE_ARCHIVE:?}"
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
x() { echo "+ $*"; "$@"; }

command -v "$KIND" >/dev/null || {
	echo "kind is not installed; e2e on kind needs Docker and kind (the same suite runs locally: make test-e2e-local; without a registry: make test-e2e-sources)"
	exit 1
}
if [[ -n $KIND_AUTH ]]; then
	if ! grep -q 'admission-control-config-file: /etc/kubernetes/admission/admission-configuration.yaml' "$KIND_CONFIG" ||
		! grep -q "hostPath: $KIND_WEBHOOK_AUTH\$" "$KIND_CONFIG"; then
		echo "$KIND_CONFIG: no API server client certificate for the webhooks (the mount of $KIND_WEBHOOK_AUTH and the admission-control-config-file patch of test/e2e/kind/cluster.yaml); add them, or KIND_WEBHOOK_CLIENT_AUTH=0"
		exit 1
	fi
	x "${GO:-go}" run ./hack/kind/webhookauth -dir "$KIND_WEBHOOK_AUTH"
fi
if ! "$KIND" get clusters | grep -qx "$KIND_CLUSTER"; then
	x "$KIND" create cluster --name "$KIND_CLUSTER" --wait 5m ${KIND_IMAGE:+--image "$KIND_IMAGE"} ${KIND_CONFIG:+--config "$KIND_CONFIG"}
fi
mkdir -p "$(dirname "$KIND_KUBECONFIG")"
x "$KIND" export kubeconfig --name "$KIND_CLUSTER" --kubeconfig "$KIND_KUBECONFIG"
export KUBECONFIG=$KIND_KUBECONFIG
if [[ -n $KIND_AUTH ]] && ! kubectl -n kube-system get pods -l component=kube-apiserver -o jsonpath='{.items[*].spec.containers[*].command}' |
	grep -q 'admission-control-config-file=/etc/kubernetes/admission/'; then
	echo "kind cluster $KIND_CLUSTER: its API server presents no client certificate to webhooks (created before, or with another config); recreate it: $KIND delete cluster --name $KIND_CLUSTER"
	exit 1
fi
if [[ -n ${KIND_NETWORK_POLICY:-} ]]; then
	x kubectl apply --server-side -f "$KIND_NETWORK_POLICY"
	x kubectl -n kube-system rollout status daemonset/kube-router --timeout=5m
fi
x kubectl apply --server-side -f "$CERTMANAGER_MANIFEST"
x kubectl wait --for=condition=Available --timeout=5m -n cert-manager deployment --all
x "$KIND" load image-archive "$IMAGE_ARCHIVE" --name "$KIND_CLUSTER"

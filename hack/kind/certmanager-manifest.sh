#!/usr/bin/env bash
# Writes $OUT_FILE: cert-manager for the e2e suite on kind without a release download (docs/e2e.md):
# the Helm chart of the pinned cert-manager module ($CHART), rendered with the images built here
# ($IMAGE_PREFIX/cert-manager-{controller,cainjector}:$VERSION), then test/e2e/kind/certmanager's
# kustomization over it.
set -euo pipefail
: "${HELM:?}" "${KUBECTL:?}" "${CHART:?}" "${VERSION:?}" "${IMAGE_PREFIX:?}" "${OUT_FILE:?}"
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
tmp=$(mktemp -d) && trap 'rm -rf "$tmp"' EXIT
cp "$root/test/e2e/kind/certmanager/kustomization.yaml" "$tmp/"
"$HELM" template cert-manager "$CHART" --namespace cert-manager --version "$VERSION" \
	--set crds.enabled=true --set startupapicheck.enabled=false \
	--set image.repository="$IMAGE_PREFIX/cert-manager-controller" --set image.tag="$VERSION" \
	--set cainjector.image.repository="$IMAGE_PREFIX/cert-manager-cainjector" --set cainjector.image.tag="$VERSION" \
	--set image.pullPolicy=Never --set cainjector.image.pullPolicy=Never >"$tmp/cert-manager.rendered.yaml"
{
	echo "# cert-manager $VERSION for the e2e suite on kind: hack/kind/certmanager-manifest.sh (do not edit)."
	echo "apiVersion: v1"
	echo "kind: Namespace"
	echo "metadata:"
	echo "  name: cert-manager"
	echo "---"
	"$KUBECTL" kustomize "$tmp"
} >"$OUT_FILE"

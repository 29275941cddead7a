#!/usr/bin/env bash
# Installs config/$OVERLAY into the cluster of $KUBECONFIG with the manager's image $IMG (make deploy):
# hack/render-overlay.sh with $DEPLOY_COMPONENTS, $DEPLOY_ARGS and $DEPLOY_REPLICAS, applied
# server-side by $KUBECTL.
#
# An image no node can pull leaves the fail-closed webhooks refusing every inline ClusterObjectSet, so
# it deploys only an image pinned by digest (a release's), the one `make image` built into
# $IMAGE_ARCHIVE, or one said pushed (IMG_VERIFIED=1).
set -euo pipefail
: "${OVERLAY:?}" "${IMG:?}" "${IMAGE_ARCHIVE:?}" "${KIND_CLUSTER:?}" "${REGISTRY:?}" "${KUBECTL:?}"
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
archive=${IMAGE_ARCHIVE#"$root"/}

test -f "$root/config/$OVERLAY/kustomization.yaml" || { echo "no overlay config/$OVERLAY"; exit 1; }
if [[ ${IMG_VERIFIED:-} == 1 ]]; then
	echo "image $IMG: IMG_VERIFIED=1, not checked"
elif [[ $IMG == *@sha256:* ]]; then
	echo "image $IMG: pinned by digest"
elif [[ -f $IMAGE_ARCHIVE ]] && tar -xOf "$IMAGE_ARCHIVE" manifest.json 2>/dev/null | grep -qF "\"$IMG\""; then
	echo "image $IMG: built by make image into $archive; a kind cluster needs it loaded first:"
	echo "  kind load image-archive $archive --name $KIND_CLUSTER"
else
	cat <<END
deploy: image $IMG was neither built by make image nor pinned by digest: if no node can pull it, the
fail-closed webhooks refuse every inline ClusterObjectSet. Either
  build it and load it into kind:  make image IMG=$IMG && kind load image-archive $archive --name $KIND_CLUSTER
  deploy a release's image:        make deploy IMG=$REGISTRY@sha256:... (as dist/<version>/install.yaml names it)
  or push it to a registry the nodes pull from (docs/release.md: crane push, skopeo copy), then
                                   make deploy IMG=$IMG IMG_VERIFIED=1
END
	exit 1
fi

read -ra components <<<"${DEPLOY_COMPONENTS:-}"
read -ra flags <<<"${DEPLOY_ARGS:-}"
args=()
for c in "${components[@]}"; do args+=(-c "$c"); done
for f in "${flags[@]}"; do args+=(-a "$f"); done
[[ -z ${DEPLOY_REPLICAS:-} ]] || args+=(-r "$DEPLOY_REPLICAS")

msg="deploying config/$OVERLAY"
[[ -z ${DEPLOY_COMPONENTS:-} ]] || msg+=" + ${components[*]}"
msg+=" with image $IMG"
[[ -z ${DEPLOY_REPLICAS:-} ]] || msg+=" and $DEPLOY_REPLICAS replicas"
[[ -z ${DEPLOY_ARGS:-} ]] || msg+=" and flags ${flags[*]}"
# Rendered in full first, so that a bad component or flag applies nothing.
manifests=$(KUBECTL=$KUBECTL "$root/hack/render-overlay.sh" "${args[@]}" "$OVERLAY" "$IMG")
echo "$msg"
"$KUBECTL" apply --server-side --field-manager=cos-externalizer-deploy -f - <<<"$manifests"

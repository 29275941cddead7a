#!/usr/bin/env bash
# hack/release.sh STEP: the steps of make release that are programs (docs/release.md). The Makefile runs
# them in this order, around the builds it does itself (the image layout, the plugin archives, helm):
#
#   check      VERSION is vX.Y.Z[-pre]; warns when the tree has uncommitted changes
#   manifests  an install manifest per overlay of $RELEASE_OVERLAYS (install.yaml is config/default),
#              the image pinned to $REGISTRY@<the index digest of the image layout>
#   chart      the Helm chart as cos-externalizer-X.Y.Z.tgz: version and appVersion stamped,
#              image.repository $REGISTRY, reproducible under SOURCE_DATE_EPOCH, linted
#   finish     checks the image layout, then writes sha256sums.txt over everything and lists it
#
# Everything goes to $RELEASE_DIR (dist/$VERSION); $RELEASE_WORK holds what only the build needs (the
# image builder, the layout's digest). Nothing is pushed.
set -euo pipefail
: "${VERSION:?}" "${REVISION?}" "${SOURCE_DATE_EPOCH:?}" "${REGISTRY:?}" "${RELEASE_DIR:?}" "${RELEASE_WORK:?}"
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"
v=${VERSION#v}

check() {
	[[ $VERSION =~ ^v[0-9]+\.[0-9]+\.[0-9]+(-[0-9A-Za-z.-]+)?$ ]] || { echo "release needs VERSION=vX.Y.Z, not '$VERSION'"; exit 1; }
	[[ -z "$(git status --porcelain --untracked-files=no)" ]] ||
		echo "release: warning: uncommitted changes; this release is not what $REVISION builds"
}

manifests() {
	: "${RELEASE_OVERLAYS:?}" "${KUBECTL:?}"
	local digest o f
	digest=$(cat "$RELEASE_WORK/oci.digest")
	for o in $RELEASE_OVERLAYS; do
		f=install-$o.yaml
		[[ $o != default ]] || f=install.yaml
		{
			echo "# cos-externalizer $VERSION, config/$o: kubectl apply --server-side -f $f"
			KUBECTL=$KUBECTL hack/render-overlay.sh "$o" "$REGISTRY@$digest"
		} >"$RELEASE_DIR/$f"
		grep -q "image: $REGISTRY@$digest" "$RELEASE_DIR/$f" || { echo "$f: no image pinned to $REGISTRY@$digest"; exit 1; }
		! grep -n 'image: cos-externalizer' "$RELEASE_DIR/$f" || { echo "$f: an image left unpinned"; exit 1; }
		echo "wrote $f: config/$o, image $REGISTRY@$digest"
	done
}

chart() {
	: "${HELM:?}"
	local tgz=$RELEASE_DIR/cos-externalizer-$v.tgz
	mkdir -p .local
	tmp=$(mktemp -d .local/chart.XXXXXX) # not local: the EXIT trap reads it
	trap 'rm -rf "$tmp"' EXIT
	HOME=$tmp "$HELM" package charts/cos-externalizer --version "$v" --app-version "$VERSION" --destination "$tmp" >/dev/null
	tar -xmzf "$tmp/cos-externalizer-$v.tgz" -C "$tmp"
	sed -i "s|^  repository: .*|  repository: $REGISTRY|" "$tmp/cos-externalizer/values.yaml"
	grep -qx "  repository: $REGISTRY" "$tmp/cos-externalizer/values.yaml"
	tar --sort=name --mtime="@$SOURCE_DATE_EPOCH" --owner=0 --group=0 --numeric-owner --mode=u+rw,go=rX \
		-cf - -C "$tmp" cos-externalizer | gzip -n -9 >"$tgz"
	HOME=$tmp "$HELM" lint --strict "$tgz" >/dev/null
	echo "wrote cos-externalizer-$v.tgz: the chart, version $v, appVersion $VERSION"
}

finish() {
	: "${IMAGE_ARCHES:?}"
	(set -x && "$RELEASE_WORK/image-builder" check-layout -layout "$RELEASE_DIR/image" -version "$VERSION" \
		-revision "$REVISION" -sbom "$RELEASE_DIR/sbom.spdx.json" -arches "$(tr ' ' , <<<"$IMAGE_ARCHES")")
	chmod -R a+rX "$RELEASE_DIR"
	local sums
	sums=$(cd "$RELEASE_DIR" && find . -type f ! -name sha256sums.txt | sed 's|^\./||' | LC_ALL=C sort | xargs sha256sum)
	echo "$sums" >"$RELEASE_DIR/sha256sums.txt"
	echo "release $VERSION ($REVISION, SOURCE_DATE_EPOCH=$SOURCE_DATE_EPOCH) in ${RELEASE_DIR#"$root"/}:"
	(cd "$RELEASE_DIR" && find . -maxdepth 1 -type f -printf '  %-36P %s bytes\n' | LC_ALL=C sort)
	echo "  image/ (OCI image layout: $(du -sb "$RELEASE_DIR/image" | cut -f1) bytes, index $(cat "$RELEASE_WORK/oci.digest"))"
	echo "push it: docs/release.md"
}

case ${1:-} in
check | manifests | chart | finish) "$1" ;;
*) echo "usage: $0 check|manifests|chart|finish" >&2; exit 2 ;;
esac

#!/usr/bin/env bash
# Builds kubectl cos's release archives and its krew manifest into $OUT (make plugin-dist; make release
# moves them into dist/$VERSION/): for each of $PLATFORMS (os/arch ...), kubectl-cos_<os>_<arch>.tar.gz
# with the two binaries (kubectl-cos, kubectl_complete-cos, linked with $LDFLAGS) and LICENSE, and
# cos.yaml, hack/krew/cos.yaml with the version and each archive's sha256 filled in.
#
# Each archive is reproducible: tar and gzip record no owner, time or order of the machine (every
# time is $SOURCE_DATE_EPOCH), and -trimpath keeps the checkout's path out of the binaries.
set -euo pipefail
: "${VERSION:?}" "${LDFLAGS:?}" "${SOURCE_DATE_EPOCH:?}" "${PLATFORMS:?}" "${OUT:?}"
go=${GO:-go}
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"

rm -rf "$OUT" && mkdir -p "$OUT"
sed -e '/^#/d' -e "s/{{VERSION}}/$VERSION/g" hack/krew/cos.yaml >"$OUT/cos.yaml"
for p in $PLATFORMS; do
	os=${p%/*} arch=${p#*/}
	dir=$OUT/kubectl-cos_${os}_${arch}
	echo "building kubectl-cos for $os/$arch"
	mkdir -p "$dir"
	for cmd in kubectl-cos kubectl_complete-cos; do
		CGO_ENABLED=0 GOOS=$os GOARCH=$arch "$go" build -trimpath -buildvcs=false -ldflags "-s -w $LDFLAGS" -o "$dir/$cmd" "./cmd/$cmd"
	done
	cp LICENSE "$dir/LICENSE"
	tar -C "$dir" --sort=name --owner=0 --group=0 --numeric-owner --mtime="@$SOURCE_DATE_EPOCH" -cf - . | gzip -n >"$dir.tar.gz"
	rm -rf "$dir"
	sum=$(sha256sum "$dir.tar.gz" | cut -d' ' -f1)
	sed -i "s/{{SHA256_${os}_${arch}}}/$sum/" "$OUT/cos.yaml"
done
if grep -n '^[^#]*{{' "$OUT/cos.yaml"; then
	echo "hack/krew/cos.yaml names a platform PLUGIN_PLATFORMS lacks" >&2
	exit 1
fi
echo "archives and the krew manifest: ${OUT#"$root"/}"

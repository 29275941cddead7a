#!/usr/bin/env bash
# hack/tools/module-files.sh TOOL_DIR STAMP MODULE GLOB SUBDIR [MODULE GLOB SUBDIR ...]
#
# Fetches data files out of Go module zips for the tests (make testdata, make certmanager-crds): each
# MODULE at the version TOOL_DIR's go.mod pins (checked against its go.sum by the go command), and the
# files GLOB matches in it (a path relative to the module's root) copied into SUBDIR of STAMP's folder.
# The folder is filled under a temporary name and replaces the old one whole, STAMP inside it, so an
# interrupted fetch leaves no half-filled folder that looks current.
set -euo pipefail

tool_dir=$1 stamp=$(realpath -m "$2")
shift 2
(($# > 0 && $# % 3 == 0)) || { echo "usage: $0 TOOL_DIR STAMP MODULE GLOB SUBDIR [MODULE GLOB SUBDIR ...]" >&2; exit 2; }
go=${GO:-go}
dest=$(dirname "$stamp")
tmp=$dest.tmp

modules=()
for ((i = 1; i <= $#; i += 3)); do modules+=("${!i}"); done
(cd "$tool_dir" && set -x && "$go" mod download "${modules[@]}")

rm -rf "$tmp"
while (($# > 0)); do
	module=$1 glob=$2 subdir=$3
	shift 3
	dir=$(cd "$tool_dir" && "$go" list -m -f '{{.Dir}}' "$module")
	mkdir -p "$tmp/$subdir"
	echo "copying $module: $glob into ${dest##*/}/$subdir"
	# GLOB is expanded here, in the module's folder: unquoted on purpose.
	# shellcheck disable=SC2086
	(cd "$dir" && cp $glob "$tmp/$subdir/")
done
chmod -R u+w "$tmp"
touch "$tmp/$(basename "$stamp")"
rm -rf "$dest"
mv "$tmp" "$dest"

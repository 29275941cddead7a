#!/usr/bin/env bash
# hack/adopt-stamp.sh NEW_STAMP OLD_STAMP [BINARY=GO_MOD ...]
#
# Takes over a tool of bin/ stamped before stamps carried a hash of their pins, without rebuilding it.
# Then each stamp was named by the tool's version only (bin/.stamp-kube-v1.36.3) and rebuilt when a
# go.mod was newer than it, which a fresh checkout's always is. Now the Makefile names a stamp by the
# version and a hash of the files that pin the tool (bin/.stamp-kube-v1.36.3-<hash>).
#
# Touches NEW_STAMP and exits 0 when OLD_STAMP is there, no stamp of the new kind for this version is
# (a bin/ taken over once is not again: a later change of a pin the build info does not show, such as
# a local main.go, must rebuild), and every BINARY's Go build info (go version -m) names only modules
# at the version its GO_MOD requires or replaces them with; exits 1, touching nothing, otherwise (the
# Makefile then builds). With no BINARY (fetched test data: files of module zips, whose versions are
# in OLD_STAMP's name and immutable), the stamps alone decide.
set -euo pipefail

new=$1 old=$2
shift 2
[ -e "$old" ] || exit 1
for f in "${new%-*}"-*; do
	[ -e "$f" ] && exit 1
done
for pair in "$@"; do
	bin=${pair%%=*} gomod=${pair#*=}
	[ -x "$bin" ] || exit 1
	# "module version" of every require line and every replacement of go.mod.
	pinned=$(awk '
		/^\)/ { block = ""; next }
		/^(require|replace)[ \t]*\($/ { block = $1; next }
		$1 == "require" { print $2, $3; next }
		/=>/ && (block == "replace" || $1 == "replace") { split($0, r, "=>"); split(r[2], t, " "); print t[1], t[2]; next }
		block == "require" { print $1, $2 }' "$gomod")
	# "module version" the binary was built from: the replacement where there is one.
	built=$("${GO:-go}" version -m "$bin" | awk '
		($1 == "mod" || $1 == "dep") { if (m != "") print m; m = ($3 == "(devel)") ? "" : $2 " " $3; next }
		$1 == "=>" { m = $2 " " $3 }
		END { if (m != "") print m }')
	[ -n "$built" ] || exit 1
	if missing=$(grep -vxFf <(printf '%s\n' "$pinned") <<<"$built"); then
		echo "$bin: not built from $gomod ($(head -1 <<<"$missing") is not pinned there): building it" >&2
		exit 1
	fi
done
touch "$new"
echo "${new##*/}: taken over from ${old##*/} (stamped by version before stamps carried a hash of the pins)${*:+; the build info of $(printf '%s ' "${@%%=*}" | sed 's|[^ ]*/||g')matches the pins}"

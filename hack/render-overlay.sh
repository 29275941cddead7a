#!/usr/bin/env bash
# hack/render-overlay.sh [-c COMPONENT]... [-a FLAG]... [-r REPLICAS] OVERLAY IMAGE
#
# Prints config/OVERLAY as kubectl kustomize renders it ($KUBECTL, kubectl unless set) with the
# manager's image set to IMAGE (name[:tag] or name@digest; a name without either is name:latest),
# the kustomize components config/COMPONENT added over it, each FLAG added to the manager's arguments
# and its Deployment scaled to REPLICAS. make deploy applies what it prints, make release writes it.
# The kustomization that does it is a throwaway one in .local/ (kustomize wants a relative path to
# the overlay), so no committed file changes.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
kubectl=${KUBECTL:-kubectl}

components=() flags=() replicas=
while getopts c:a:r: opt; do
	case $opt in
	c) components+=("$OPTARG") ;;
	a) flags+=("$OPTARG") ;;
	r) replicas=$OPTARG ;;
	*) exit 2 ;;
	esac
done
shift $((OPTIND - 1))
(($# == 2)) || { echo "usage: $0 [-c COMPONENT]... [-a FLAG]... [-r REPLICAS] OVERLAY IMAGE" >&2; exit 2; }
overlay=$1 img=$2

test -f "$root/config/$overlay/kustomization.yaml" || { echo "no overlay config/$overlay" >&2; exit 1; }
case $img in
*@*) name=${img%%@*} ref="digest: ${img#*@}" ;;
*) if [[ ${img##*/} == *:* ]]; then name=${img%:*} ref="newTag: \"${img##*:}\""; else name=$img ref="newTag: \"latest\""; fi ;;
esac

mkdir -p "$root/.local"
tmp=$(mktemp -d "$root/.local/kustomize.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
{
	printf 'apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nresources:\n- ../../config/%s\n' "$overlay"
	printf 'images:\n- name: cos-externalizer\n  newName: %s\n  %s\n' "$name" "$ref"
	if ((${#components[@]} > 0)); then
		printf 'components:\n'
		for c in "${components[@]}"; do
			test -f "$root/config/$c/kustomization.yaml" || { echo "no component config/$c" >&2; exit 1; }
			printf -- '- ../../config/%s\n' "$c"
		done
	fi
	ops=()
	for f in "${flags[@]}"; do ops+=("    - {op: add, path: /spec/template/spec/containers/0/args/-, value: \"$f\"}"); done
	[[ -z $replicas ]] || ops+=("    - {op: replace, path: /spec/replicas, value: $replicas}")
	if ((${#ops[@]} > 0)); then
		printf 'patches:\n- target: {group: apps, kind: Deployment, name: cos-externalizer}\n  patch: |-\n'
		printf '%s\n' "${ops[@]}"
	fi
} >"$tmp/kustomization.yaml"
"$kubectl" kustomize "$tmp"

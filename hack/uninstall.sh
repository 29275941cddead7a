#!/usr/bin/env bash
# Uninstalls cos-externalizer and keeps every workload (docs/install.md#uninstall). `make undeploy`
# runs it; so can you, with Go and kubectl, from a checkout. Without a checkout, `kubectl cos
# uninstall` (or the manager's `cos-externalizer uninstall`, the Helm chart's pre-delete hook) does
# steps 1-3 below: the script runs that same uninstaller, built from its own checkout.
#
#   hack/uninstall.sh [--dry-run] [-k <kustomization dir> | -f <rendered manifests>]
#   hack/uninstall.sh --delete-workloads --yes [-k ... | -f ...]     (make undeploy-all CONFIRM=yes)
#
# The default, in this order:
#   1-3. `cos-externalizer uninstall` (internal/kube/uninstall), pointed at the manifests' namespace,
#      manager Deployment and webhook configurations: it refuses, changing nothing, when they are not
#      the install in the cluster or another install's manager runs; then the webhook configurations
#      go (they fail closed: without a manager they refuse writes), the manager's Deployment goes and
#      it waits for its pods to be gone, and our teardown finalizer is released from every
#      ClusterObjectSet without teardown (never OLM's of the same name; a ClusterObjectSet being
#      deleted is switched to orphan deletion first, so its objects stay);
#   4. the rest of the manifests go, but for the ClusterObjectSet CRD and the system namespace.
# The ClusterObjectSets, the objects they installed, their object-data Secrets, the CRD and the
# namespace stay, for OLM or a reinstall to pick up. Running it again does nothing more. It works
# with the manager already gone and with the namespace being deleted (the break-glass procedure).
#
# --delete-workloads (needs --yes) is the old `make undeploy`: every ClusterObjectSet is deleted while
# the manager runs, which TEARS DOWN EVERYTHING THEY INSTALLED (CRDs and their custom resources
# included), then all the manifests, the CRD and the namespace with the Secrets.
#
# Environment: KUBECTL (default kubectl), GO (default go), KUBECONFIG, OVERLAY (default default: -k
# config/$OVERLAY), COS_EXTERNALIZER (a cos-externalizer binary of the same version, whose `uninstall`
# runs instead of one built from this checkout).
set -euo pipefail

KUBECTL=${KUBECTL:-kubectl}
GO=${GO:-go}
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
src=(-k "$root/config/${OVERLAY:-default}")
dry=()
delete_workloads=false
yes=false

readonly crd=clusterobjectsets.olm.operatorframework.io

usage() { sed -n '2,/^set -euo/p' "${BASH_SOURCE[0]}" | sed '$d; s/^# \{0,1\}//'; }

while (($#)); do
  case $1 in
    --dry-run) dry=(--dry-run=server) ;;
    --delete-workloads) delete_workloads=true ;;
    --yes) yes=true ;;
    -k | -f) [[ $# -ge 2 ]] || { echo "uninstall: $1 needs a value" >&2; exit 2; }; src=("$1" "$2"); shift ;;
    -h | --help) usage; exit 0 ;;
    *) echo "uninstall: unknown argument $1 (see --help)" >&2; exit 2 ;;
  esac
  shift
done

if $delete_workloads && ! $yes; then
  echo "uninstall: --delete-workloads deletes every ClusterObjectSet and, through the manager's teardown," >&2
  echo "uninstall: EVERYTHING THEY INSTALLED (CRDs and their custom resources included), then the CRD and" >&2
  echo "uninstall: the namespace with the object-data Secrets. Add --yes (make undeploy-all CONFIRM=yes)." >&2
  exit 2
fi

say() { echo "uninstall: $*"; }
k() { "$KUBECTL" "$@"; }
note=""
((${#dry[@]})) && note=" (dry run: nothing is changed)"

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# The manifests, split by kind into: the webhook configurations, the manager's Deployment, what is
# kept (the CRD and the Namespace) and the rest. kubectl kustomize writes one document per object,
# separated by ---, with kind and metadata at the top level.
if [[ ${src[0]} == -k ]]; then
  k kustomize "${src[1]}" >"$tmp/all.yaml"
else
  cp "${src[1]}" "$tmp/all.yaml"
fi
awk -v dir="$tmp" '
  function flush(  f) {
    if (doc != "") {
      f = "rest"
      if (kind == "CustomResourceDefinition" || kind == "Namespace") f = "kept"
      else if (kind ~ /^(Mutating|Validating)WebhookConfiguration$/) { f = "webhooks"; print kind " " name >> (dir "/webhook-names") }
      else if (kind == "Deployment") { f = "manager"; print ns > (dir "/namespace") }
      printf "---\n%s", doc >> (dir "/" f ".yaml")
      if (kind == "CustomResourceDefinition") print name >> (dir "/crds")
    }
    doc = ""; kind = ""; name = ""; ns = ""; meta = 0
  }
  /^---$/ { flush(); next }
  /^kind: / && kind == "" { kind = $2 }
  /^metadata:/ { meta = 1 }
  /^[a-z]/ && !/^metadata:/ { meta = 0 }
  meta && /^  name: / { name = $2 }
  meta && /^  namespace: / { ns = $2 }
  { doc = doc $0 "\n" }
  END { flush() }
' "$tmp/all.yaml"
for f in webhooks manager rest kept; do touch "$tmp/$f.yaml"; done
namespace=olmv1-system
[[ -s $tmp/namespace ]] && namespace=$(head -1 "$tmp/namespace")
overlay_has_crd=false
grep -qx "$crd" "$tmp/crds" 2>/dev/null && overlay_has_crd=true
deploy=$(awk '/^metadata:/{m=1;next} /^[a-z]/{m=0} m && /^  name: /{print $2; exit}' "$tmp/manager.yaml")

mutating=$(awk '$1 == "MutatingWebhookConfiguration" {print $2; exit}' "$tmp/webhook-names" 2>/dev/null || true)
validating=$(awk '$1 == "ValidatingWebhookConfiguration" {print $2; exit}' "$tmp/webhook-names" 2>/dev/null || true)

# The uninstaller of kubectl cos and the manager's image: COS_EXTERNALIZER's binary when set (of the
# same version as the manifests), else built from this checkout.
manager=${COS_EXTERNALIZER:-}
if [[ -z $manager ]]; then
  manager=$tmp/cos-externalizer
  (cd "$root" && "$GO" build -o "$manager" ./cmd/cos-externalizer)
fi
args=("--namespace=$namespace")
[[ -n $deploy ]] && args+=("--deployment=$deploy")
[[ -n $mutating ]] && args+=("--mutating-webhook=$mutating")
[[ -n $validating ]] && args+=("--validating-webhook=$validating")
# go_uninstall runs it on the install these manifests are of; before it changes anything it refuses
# when they are not the install in the cluster (the webhook configurations call another namespace's
# Service), or when another install's manager runs.
go_uninstall() {
  if ! "$manager" uninstall "${args[@]}" "$@"; then
    echo "uninstall: nothing more was done. To uninstall another install, use its own manifests (-f of helm get" >&2
    echo "uninstall: manifest <release> -n <namespace>, -k of its overlay), or kubectl cos uninstall, which finds it." >&2
    exit 1
  fi
}

# kdelete deletes the objects of a file, taking "not found" and kinds the cluster does not serve (e.g.
# cert-manager's, with cert-manager gone) as done.
kdelete() {
  local file=$1 rc=0
  shift
  [[ -s $file ]] || return 0
  k delete -f "$file" --ignore-not-found "${dry[@]}" "$@" 2>"$tmp/err" || rc=$?
  if ((rc)); then
    if grep -v -e 'no matches for kind' -e 'ensure CRDs are installed first' -e '^Warning:' "$tmp/err" | grep -q .; then
      cat "$tmp/err" >&2
      return "$rc"
    fi
    grep -o 'no matches for kind "[^"]*" in version "[^"]*"' "$tmp/err" | sort -u | sed 's/^/uninstall: skipped, the cluster serves /; s/no matches for kind/no kind/' || true
  else
    grep '^Warning:' "$tmp/err" >&2 || true
  fi
}

cos_served() { k get crd "$crd" >/dev/null 2>&1; }

if $delete_workloads; then
  # The same checks as the default path, changing nothing.
  go_uninstall --dry-run >/dev/null
  if $overlay_has_crd && cos_served; then
    ready=$(k -n "$namespace" get deployment "$deploy" -o 'jsonpath={.status.readyReplicas}' 2>/dev/null || true)
    if [[ -z $ready || $ready == 0 ]]; then
      echo "uninstall: the manager (deployment $namespace/$deploy) is not running: nothing would tear the" >&2
      echo "uninstall: ClusterObjectSets down and their deletion would hang. Start it again (make deploy) or" >&2
      echo "uninstall: keep the workloads with the break-glass procedure (docs/install.md#break-glass)." >&2
      exit 1
    fi
    say "deleting every ClusterObjectSet; the manager tears down everything they installed$note"
    k delete clusterobjectsets --all --ignore-not-found --timeout=5m "${dry[@]}"
  fi
  say "deleting every object of the manifests, the CRD and namespace $namespace included$note"
  kdelete "$tmp/all.yaml" --timeout=5m
  say "done$note"
  exit 0
fi

# 1-3. The webhook configurations, the manager, our finalizers.
if ((${#dry[@]})); then go_uninstall --dry-run; else go_uninstall; fi

# 4. The rest, but for the CRD and the namespace.
say "deleting the rest (RBAC, Services, PodDisruptionBudget, certificates); the CRD and namespace $namespace stay$note"
kdelete "$tmp/rest.yaml" --timeout=2m

say "done$note: the CRD and namespace $namespace stay"

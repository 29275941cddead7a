#!/usr/bin/env bash
# Uninstalls cos-externalizer and keeps every workload (docs/install.md#uninstall). `make undeploy`
# runs it; so can you, with kubectl alone. Without a checkout, `kubectl cos uninstall` (or the
# manager's `cos-externalizer uninstall`, the Helm chart's pre-delete hook) does steps 1-3 below.
#
#   hack/uninstall.sh [--dry-run] [-k <kustomization dir> | -f <rendered manifests>]
#   hack/uninstall.sh --delete-workloads --yes [-k ... | -f ...]     (make undeploy-all CONFIRM=yes)
#
# The default, in this order:
#   1. the webhook configurations go (they fail closed: without a manager they refuse writes);
#   2. the manager's Deployment goes, and the script waits for its pods to be gone, so nothing
#      re-adds a finalizer or tears anything down;
#   3. our teardown finalizer (olm.operatorframework.io/teardown, added by the field manager
#      cos-externalizer) is released from every ClusterObjectSet, without teardown. A finalizer of
#      the same name that another field manager (OLM's operator-controller) owns, alone or with
#      ours, is left alone. A ClusterObjectSet already being deleted is first switched to orphan
#      deletion, so the garbage collector keeps its objects (and Secrets) when it goes;
#   4. the rest of the manifests go, but for the ClusterObjectSet CRD and the system namespace.
# The ClusterObjectSets, the objects they installed, their object-data Secrets, the CRD and the
# namespace stay, for OLM or a reinstall to pick up. Running it again does nothing more. It works
# with the manager already gone and with the namespace being deleted (the break-glass procedure).
#
# --delete-workloads (needs --yes) is the old `make undeploy`: every ClusterObjectSet is deleted while
# the manager runs, which TEARS DOWN EVERYTHING THEY INSTALLED (CRDs and their custom resources
# included), then all the manifests, the CRD and the namespace with the Secrets.
#
# Environment: KUBECTL (default kubectl), KUBECONFIG, OVERLAY (default default: -k config/$OVERLAY).
set -euo pipefail

KUBECTL=${KUBECTL:-kubectl}
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
src=(-k "$root/config/${OVERLAY:-default}")
dry=()
delete_workloads=false
yes=false

readonly finalizer=olm.operatorframework.io/teardown
readonly our_manager=cos-externalizer
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

# Before anything changes: are these manifests the install in the cluster? The webhook
# configurations call the Service of the install they belong to; deleting them for another install
# would leave that one's manager running without webhooks. And a manager of another install, running,
# would put the finalizers back.
touch "$tmp/webhook-names"
while read -r kind name; do
  k get "$kind" "$name" --ignore-not-found \
    -o go-template='{{range .webhooks}}{{with .clientConfig.service}}{{.namespace}}/{{.name}}{{"\n"}}{{end}}{{end}}' || true
done <"$tmp/webhook-names" | sort -u >"$tmp/called"
if [[ -s $tmp/called ]] && ! cut -d/ -f1 "$tmp/called" | grep -qx "$namespace"; then
  echo "uninstall: these manifests install into namespace $namespace, but the webhook configurations call" >&2
  echo "uninstall: Service $(paste -sd, "$tmp/called"): that is the install they belong to, and deleting them would" >&2
  echo "uninstall: leave its manager running without webhooks. Nothing was changed. Uninstall that install with" >&2
  echo "uninstall: its own manifests (-f of helm get manifest <release> -n <namespace>, -k of its overlay), or" >&2
  echo "uninstall: with kubectl cos uninstall, which finds it." >&2
  exit 1
fi
if [[ -n $deploy ]]; then
  {
    k get deployments -A -l app.kubernetes.io/part-of=cos-externalizer,app.kubernetes.io/component=manager \
      -o go-template='{{range .items}}{{.metadata.namespace}}/{{.metadata.name}} {{.spec.replicas}}{{"\n"}}{{end}}' || true
    k get deployments -A --field-selector "metadata.name=$deploy" \
      -o go-template='{{range .items}}{{.metadata.namespace}}/{{.metadata.name}} {{.spec.replicas}}{{"\n"}}{{end}}' || true
  } | sort -u | while read -r key replicas; do
    if [[ $key != "$namespace/$deploy" ]] && ((replicas > 0)); then echo "$key"; fi
  done >"$tmp/others"
  if [[ -s $tmp/others ]]; then
    other=$(head -1 "$tmp/others")
    echo "uninstall: uninstalling deployment $namespace/$deploy, but deployment $(paste -sd, "$tmp/others") runs a" >&2
    echo "uninstall: manager as well: it would put the finalizers back and keep reconciling. Nothing was changed." >&2
    echo "uninstall: Scale it to 0 first (kubectl -n ${other%%/*} scale deployment ${other#*/} --replicas=0) and run this" >&2
    echo "uninstall: again, or uninstall that install instead if it is the one these manifests are of." >&2
    exit 1
  fi
fi

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

ns_phase=$(k get namespace "$namespace" -o 'jsonpath={.status.phase}' 2>/dev/null || echo Absent)

if $delete_workloads; then
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

if [[ $ns_phase == Terminating ]]; then
  say "namespace $namespace is being deleted: the object-data Secrets in it go with it (the"
  say "ClusterObjectSets and their objects stay, but cannot be rolled out again from those Secrets);"
  say "this script does not wait for the namespace"
fi

# 1. The webhook configurations.
say "deleting the webhook configurations$note"
kdelete "$tmp/webhooks.yaml"

# 2. The manager: foreground deletion returns once its pods are gone.
say "deleting the manager and waiting for its pods to be gone$note"
wait=(--cascade=foreground --wait=true --timeout=5m)
((${#dry[@]})) && wait=()
kdelete "$tmp/manager.yaml" "${wait[@]}"

# 3. Our finalizers. For each ClusterObjectSet: name, live or deleting, the teardown finalizer's index
# (- if absent), the field managers that own it.
released=0 orphaned=0 others=() unowned=()
if cos_served; then
  template='{{range .items}}{{.metadata.name}}{{"\t"}}{{if .metadata.deletionTimestamp}}deleting{{else}}live{{end}}{{"\t"}}'
  template+='{{$idx := "-"}}{{range $i, $f := .metadata.finalizers}}{{if eq $f "'$finalizer'"}}{{$idx = $i}}{{end}}{{end}}{{$idx}}{{"\t"}}'
  template+='{{range .metadata.managedFields}}{{$m := .manager}}{{with .fieldsV1}}{{with index . "f:metadata"}}{{with index . "f:finalizers"}}'
  template+='{{range $k, $v := .}}{{if eq $k "v:\"'$finalizer'\""}}{{$m}},{{end}}{{end}}{{end}}{{end}}{{end}}{{end}}{{"\n"}}{{end}}'
  for pass in 1 2 3 4 5; do
    k get clusterobjectsets --show-managed-fields -o "go-template=$template" >"$tmp/sets"
    failed=0 pending=0 others=() unowned=()
    while IFS=$'\t' read -r name state idx managers; do
      [[ -n $name && $idx != - ]] || continue
      if [[ $managers != "$our_manager," ]]; then
        if [[ -z $managers ]]; then
          unowned+=("$name")
        else
          others+=("$name (${managers%,})")
        fi
        continue
      fi
      pending=1
      if [[ $state == deleting ]]; then
        # Orphan deletion first: once the finalizers are gone, the garbage collector removes the
        # ClusterObjectSet from its objects' owners instead of deleting them.
        say "clusterobjectset $name is being deleted: its objects are kept (orphan deletion)$note"
        k delete clusterobjectset "$name" --cascade=orphan --wait=false "${dry[@]}" >/dev/null || { failed=1; continue; }
        orphaned=$((orphaned + 1))
      fi
      if k patch clusterobjectset "$name" --type=json --field-manager=cos-externalizer-uninstall "${dry[@]}" \
        -p '[{"op":"test","path":"/metadata/finalizers/'"$idx"'","value":"'$finalizer'"},{"op":"remove","path":"/metadata/finalizers/'"$idx"'"}]' >/dev/null; then
        say "clusterobjectset $name: released our finalizer$note"
        released=$((released + 1))
      else
        failed=1
      fi
    done <"$tmp/sets"
    # Nothing of ours left, or a dry run (which changes nothing to look at again).
    if ((!pending)) || ((${#dry[@]})); then break; fi
    if ((failed == 0)); then continue; fi
    say "some ClusterObjectSets changed meanwhile: trying again"
  done
  if ((pending)) && ((${#dry[@]} == 0)); then
    echo "uninstall: our finalizer is still on some ClusterObjectSets after 5 passes; run this script again" >&2
    exit 1
  fi
  for s in "${others[@]}"; do say "clusterobjectset $s: the finalizer is another controller's; left to it"; done
  for s in "${unowned[@]}"; do
    say "clusterobjectset $s: no field manager owns the finalizer (managedFields cleared), left; if no other"
    say "  controller holds it: kubectl patch clusterobjectset $s --type=json -p '[{\"op\":\"remove\",\"path\":\"/metadata/finalizers/<index>\"}]'"
  done
else
  say "the cluster serves no ClusterObjectSets: no finalizer to release"
fi

# 4. The rest, but for the CRD and the namespace.
say "deleting the rest (RBAC, Services, PodDisruptionBudget, certificates); the CRD and namespace $namespace stay$note"
kdelete "$tmp/rest.yaml" --timeout=2m

sets=0 secrets=0
cos_served && sets=$(k get clusterobjectsets -o 'go-template={{range .items}}{{if not .metadata.deletionTimestamp}}{{.metadata.name}}{{"\n"}}{{end}}{{end}}' | wc -l)
[[ $ns_phase != Absent ]] && secrets=$(k -n "$namespace" get secrets -l olm.operatorframework.io/revision-name -o name 2>/dev/null | wc -l)
# plural 1 finalizer: "1 finalizer"; plural 2 finalizer: "2 finalizers".
plural() { if (($1 == 1)); then echo "1 $2"; else echo "$1 $2s"; fi; }
say "done$note: $(plural "$released" finalizer) released ($orphaned from ClusterObjectSets being deleted, whose objects stay);"
say "kept: $(plural $((sets)) ClusterObjectSet) and the objects they installed, $(plural $((secrets)) 'object-data Secret') in $namespace, the CRD and the namespace"

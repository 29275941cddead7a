#!/usr/bin/env bash
# cos-pod-network: the pod network of a node of the kind image hack/kind/build-node-image.sh builds
# (make test-e2e-sources; docs/e2e.md), installed there as /usr/local/bin/cos-pod-network and run by
# systemd. It does for the bridge CNI what kind's kindnetd does (kindnetd cannot be built here):
#   - once the controller-manager has given this Node its pod range (spec.podCIDR), it writes the CNI
#     config: a bridge with host-local addresses of that range (until then the kubelet reports the
#     network not ready, so no Pod starts without it);
#   - it routes every other node's pod range through that node's InternalIP, and exempts pod-to-pod
#     traffic between nodes from the bridge plugin's masquerading, so a Pod's address is what a Pod of
#     another node sees (NetworkPolicies select Pods by their addresses).
# It reads its own Node with the kubelet's credentials, and the other Nodes too once the control-plane
# node's copy (the one with admin.conf) has let the group system:nodes list them (the Node authorizer
# lets a kubelet read only its own Node). It repeats every 2 s, so a node that joins later is routed too.
# Each step is idempotent.
set -u

kubeconfig=/etc/kubernetes/kubelet.conf
conf=/etc/cni/net.d/10-bridge.conflist
node=$(hostname)

# write_conf CIDR: the CNI config for this node's pod range, replaced only when it differs.
write_conf() {
	local want
	want=$(printf '%s\n' \
		'{' \
		'  "cniVersion": "1.0.0",' \
		'  "name": "kind-bridge",' \
		'  "plugins": [' \
		'    {"type": "bridge", "bridge": "cni0", "isGateway": true, "ipMasq": true, "hairpinMode": true,' \
		"     \"ipam\": {\"type\": \"host-local\", \"ranges\": [[{\"subnet\": \"$1\"}]], \"routes\": [{\"dst\": \"0.0.0.0/0\"}]}}," \
		'    {"type": "portmap", "capabilities": {"portMappings": true}},' \
		'    {"type": "loopback"}' \
		'  ]' \
		'}')
	[[ -f $conf && "$(cat "$conf")" == "$want" ]] && return
	printf '%s\n' "$want" >"$conf.tmp" && mv "$conf.tmp" "$conf"
	echo "cos-pod-network: $conf for $1"
}

# let_nodes_list: the RBAC that lets every kubelet list the Nodes (their pod ranges and addresses).
let_nodes_list() {
	kubectl --kubeconfig /etc/kubernetes/admin.conf apply -f - >/dev/null <<-'EOF'
		apiVersion: rbac.authorization.k8s.io/v1
		kind: ClusterRole
		metadata:
		  name: cos-pod-network
		rules:
		- apiGroups: [""]
		  resources: [nodes]
		  verbs: [get, list]
		---
		apiVersion: rbac.authorization.k8s.io/v1
		kind: ClusterRoleBinding
		metadata:
		  name: cos-pod-network
		roleRef:
		  apiGroup: rbac.authorization.k8s.io
		  kind: ClusterRole
		  name: cos-pod-network
		subjects:
		- apiGroup: rbac.authorization.k8s.io
		  kind: Group
		  name: system:nodes
	EOF
}

allowed=
while :; do
	if [[ -z $allowed && -s /etc/kubernetes/admin.conf ]] && let_nodes_list; then
		allowed=1
		echo "cos-pod-network: the nodes may list the Nodes"
	fi
	if [[ -s $kubeconfig ]]; then
		own=$(kubectl --kubeconfig "$kubeconfig" get node "$node" -o jsonpath='{.spec.podCIDR}' 2>/dev/null) || own=
		[[ -n $own ]] && write_conf "$own"
		nodes=$(kubectl --kubeconfig "$kubeconfig" get nodes -o \
			jsonpath='{range .items[*]}{.metadata.name} {.spec.podCIDR} {.status.addresses[?(@.type=="InternalIP")].address}{"\n"}{end}' 2>/dev/null) || nodes=
		while read -r name cidr addr; do
			[[ -n $own && $name != "$node" && -n $cidr && -n $addr ]] || continue
			if [[ "$(ip route show "$cidr")" != *"via $addr "* ]]; then
				ip route replace "$cidr" via "$addr" && echo "cos-pod-network: $cidr via $addr ($name)"
			fi
			iptables -t nat -C POSTROUTING -s "$own" -d "$cidr" -j RETURN 2>/dev/null ||
				iptables -t nat -I POSTROUTING 1 -s "$own" -d "$cidr" -j RETURN
		done <<<"$nodes"
	fi
	sleep 2
done

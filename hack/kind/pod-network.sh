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
# It reads the Nodes with the kubelet's own credentials and repeats every 2 s, so a node that joins
# later is routed too. Each step is idempotent.
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

own=
while :; do
	if [[ -s $kubeconfig ]]; then
		nodes=$(kubectl --kubeconfig "$kubeconfig" get nodes -o \
			jsonpath='{range .items[*]}{.metadata.name} {.spec.podCIDR} {.status.addresses[?(@.type=="InternalIP")].address}{"\n"}{end}' 2>/dev/null) || nodes=
		while read -r name cidr addr; do
			[[ $name == "$node" && -n $cidr ]] && { own=$cidr; write_conf "$cidr"; }
		done <<<"$nodes"
		while read -r name cidr addr; do
			[[ -n $own && $name != "$node" && -n $cidr && -n $addr ]] || continue
			ip route replace "$cidr" via "$addr"
			iptables -t nat -C POSTROUTING -s "$own" -d "$cidr" -j RETURN 2>/dev/null ||
				iptables -t nat -I POSTROUTING 1 -s "$own" -d "$cidr" -j RETURN
		done <<<"$nodes"
	fi
	sleep 2
done

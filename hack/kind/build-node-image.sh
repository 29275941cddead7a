#!/usr/bin/env bash
# Builds, with no image pulled from anywhere, the kind node image of the e2e suite on kind (make
# kind-node-image; docs/e2e.md) and every image a cluster of it runs, into the local Docker engine:
#
#   cos-kind-base:<debian suite>   kind's base image (images/base of the pinned kind module): a Debian
#                                  root filesystem by debootstrap from the apt mirror, with Debian's
#                                  systemd, containerd, runc and CNI plugins, and kind's own files
#   registry.k8s.io/...            kube-apiserver, -controller-manager, -scheduler, kube-proxy, etcd,
#                                  CoreDNS and pause, from the binaries make built from Go modules
#   $KUBEROUTER_IMAGE              kube-router (its network policy controller enforces NetworkPolicies)
#   $NODE_IMAGE                    the node: the base, kubelet, kubeadm and kubectl, the images above
#                                  imported into its containerd (what `kind build node-image` does;
#                                  that command would pull kindnetd and the storage provisioner, whose
#                                  sources no registry here serves), and cos-pod-network
#                                  (hack/kind/pod-network.sh: the bridge CNI's config and the routes
#                                  between nodes, what kindnetd does)
#
# The Makefile passes the binaries' paths and versions; this script only assembles. Each step is
# skipped when its output exists with the same inputs (a stamp of their hashes).
set -euo pipefail

: "${OUT:?}" "${KIND_MODULE_DIR:?}" "${KUBE_MODULE_DIR:?}" "${KUBE_VERSION:?}" "${KUBE_BIN:?}" "${NODE_BIN:?}"
: "${ETCD_BIN:?}" "${ETCD_TAG:?}" "${COREDNS_BIN:?}" "${COREDNS_TAG:?}" "${PAUSE_TAG:?}" "${NODE_IMAGE:?}" "${POD_NETWORK_SCRIPT:?}"
SUITE=${DEBIAN_SUITE:-bookworm}
MIRROR=${DEBIAN_MIRROR:-http://deb.debian.org/debian}
DOCKER=${DOCKER:-docker}
BASE_IMAGE=cos-kind-base:$SUITE
mkdir -p "$OUT"

log() { echo "kind-node-image: $*" >&2; }

# stamp NAME INPUT...: succeeds (step skipped) when $OUT/NAME.stamp holds the hash of the inputs.
stamp_ok() { local name=$1; shift; [[ -f $OUT/$name.stamp && "$(cat "$OUT/$name.stamp")" == "$(hash_inputs "$@")" ]]; }
stamp_set() { local name=$1; shift; hash_inputs "$@" >"$OUT/$name.stamp"; }
hash_inputs() { for x in "$@"; do if [[ -f $x ]]; then sha256sum "$x" | cut -d' ' -f1; else echo "$x"; fi; done | sha256sum | cut -d' ' -f1; }
image_exists() { "$DOCKER" image inspect "$1" >/dev/null 2>&1; }

# The packages of kind's images/base/Dockerfile, with Debian's containerd, runc and CNI plugins in place
# of the ones kind builds from source.
NODE_PACKAGES=systemd,dbus,conntrack,iptables,nftables,iproute2,ethtool,util-linux,mount,kmod,libseccomp2,pigz,fuse-overlayfs,bash,ca-certificates,curl,jq,procps,containerd,runc,containernetworking-plugins
KIND_FILES=$KIND_MODULE_DIR/images/base/files
# Bumped when a step below changes what it makes, so that step runs again.
RECIPE=1

# debootstrap_into DIR PACKAGES: a minbase Debian root filesystem from the apt mirror.
debootstrap_into() {
	local dir=$1 packages=$2
	rm -rf "$dir.tmp" && mkdir -p "$dir.tmp"
	log "debootstrap $SUITE into ${dir#"$OUT"/} ($packages)"
	debootstrap --variant=minbase --include="$packages" "$SUITE" "$dir.tmp" "$MIRROR" >"$dir.log" 2>&1 ||
		{ tail -20 "$dir.log" >&2; return 1; }
	rm -rf "$dir.tmp"/var/cache/apt/archives/*.deb "$dir.tmp"/var/lib/apt/lists/* "$dir.tmp"/usr/share/doc/* "$dir.tmp"/usr/share/man/*
	rm -rf "$dir" && mv "$dir.tmp" "$dir"
}

# docker_build TAG DIR: builds DIR/Dockerfile (FROM scratch or a local image: nothing is pulled).
# The legacy builder (no BuildKit in Debian's Docker) warns that it is deprecated on every build: its
# output is shown only when the build fails.
docker_build() {
	local out
	out=$(DOCKER_BUILDKIT=0 "$DOCKER" build -q --pull=false -t "$1" "$2" 2>&1) || { echo "$out" >&2; return 1; }
}

### 1. kind's base image.
base_rootfs=$OUT/rootfs-node
if ! stamp_ok base "$SUITE" "$NODE_PACKAGES" "$KIND_FILES/usr/local/bin/entrypoint" "$KIND_FILES/etc/containerd/config.toml" "pod-network-in-node-step" "recipe-$RECIPE" ||
	! image_exists "$BASE_IMAGE"; then
	debootstrap_into "$base_rootfs" "$NODE_PACKAGES"
	R=$base_rootfs
	# kind's files, as its Dockerfile copies them.
	install -m 0755 "$KIND_FILES"/usr/local/bin/* "$R/usr/local/bin/"
	mkdir -p "$R/kind" "$R/LICENSES" "$R/etc/containerd" "$R/etc/default" "$R/etc/sysctl.d" "$R/etc/systemd/system/kubelet.service.d"
	cp -r "$KIND_FILES/kind/." "$R/kind/" && chmod 0755 "$R/kind" "$R/kind/bin" "$R"/kind/bin/*
	cp "$KIND_FILES/etc/crictl.yaml" "$R/etc/"
	cp "$KIND_FILES"/etc/containerd/* "$R/etc/containerd/"
	cp "$KIND_FILES"/etc/default/* "$R/etc/default/"
	cp "$KIND_FILES"/etc/sysctl.d/* "$R/etc/sysctl.d/"
	cp "$KIND_FILES"/etc/systemd/system/*.service "$KIND_FILES"/etc/systemd/system/*.slice "$R/etc/systemd/system/"
	cp "$KIND_FILES"/etc/systemd/system/kubelet.service.d/* "$R/etc/systemd/system/kubelet.service.d/"
	chroot "$R" /bin/bash -ec '
		find /lib/systemd/system/sysinit.target.wants/ -name systemd-tmpfiles-setup.service -delete
		rm -f /lib/systemd/system/multi-user.target.wants/* /etc/systemd/system/*.wants/* \
			/lib/systemd/system/local-fs.target.wants/* /lib/systemd/system/sockets.target.wants/*udev* \
			/lib/systemd/system/sockets.target.wants/*initctl* /lib/systemd/system/basic.target.wants/*
		echo ReadKMsg=no >> /etc/systemd/journald.conf
		ln -sf /usr/lib/systemd/systemd /sbin/init
		systemctl enable kubelet.service containerd.service undo-mount-hacks.service >/dev/null 2>&1
		systemctl mask systemd-binfmt.service >/dev/null 2>&1
		mkdir -p /etc/kubernetes/manifests'
	# Where kind's units and containerd's configuration look for Debian's binaries.
	ln -sf /usr/bin/containerd "$R/usr/local/bin/containerd"
	mkdir -p "$R/opt/cni" && rm -rf "$R/opt/cni/bin" && ln -s /usr/lib/cni "$R/opt/cni/bin"
	# The node container lacks CAP_SYS_RESOURCE (docs/e2e.md), so nothing in it may lower an
	# oom_score_adj: not containerd's unit, and containerd clamps the containers' scores to its own (what
	# kind itself does for rootless nodes).
	mkdir -p "$R/etc/systemd/system/containerd.service.d"
	printf '[Service]\n# Lowering oom_score_adj needs CAP_SYS_RESOURCE, which the node container lacks (docs/e2e.md).\nOOMScoreAdjust=0\n' \
		>"$R/etc/systemd/system/containerd.service.d/20-no-oom-adjust.conf"
	sed -i 's/restrict_oom_score_adj = false/restrict_oom_score_adj = true/' "$R/etc/containerd/config.toml"
	# The containers' base OCI spec, as kind's Dockerfile makes it (product_uuid mounted by a hook).
	chroot "$R" /bin/sh -ec "ctr oci spec | jq '.hooks.createContainer[.hooks.createContainer| length] |= . + {\"path\": \"/kind/bin/mount-product-files.sh\"}' | jq 'del(.process.rlimits)' > /etc/containerd/cri-base.json"
	sed -i "s#sandbox_image = \"registry.k8s.io/pause:[^\"]*\"#sandbox_image = \"registry.k8s.io/pause:$PAUSE_TAG\"#" "$R/etc/containerd/config.toml"
	# The pod network: the bridge plugin, configured by cos-pod-network (step 3).
	mkdir -p "$R/etc/cni/net.d"
	log "importing $BASE_IMAGE"
	tar --numeric-owner -C "$R" -c . | "$DOCKER" import - "$BASE_IMAGE-rootfs" >/dev/null
	ctx=$(mktemp -d) && trap 'rm -rf "$ctx"' EXIT
	printf 'FROM %s\nENV container=docker\nSTOPSIGNAL SIGRTMIN+3\nENTRYPOINT ["/usr/local/bin/entrypoint", "/sbin/init"]\n' "$BASE_IMAGE-rootfs" >"$ctx/Dockerfile"
	docker_build "$BASE_IMAGE" "$ctx"
	"$DOCKER" rmi "$BASE_IMAGE-rootfs" >/dev/null
	stamp_set base "$SUITE" "$NODE_PACKAGES" "$KIND_FILES/usr/local/bin/entrypoint" "$KIND_FILES/etc/containerd/config.toml" "pod-network-in-node-step" "recipe-$RECIPE"
fi

### 2. The component images.
# The binaries are Go's default builds, linked against glibc: each image is the binary over glibc from
# the base's own Debian (ld.so and libc.so.6, all they load), plus passwd for non-root users.
glibc=$OUT/rootfs-glibc
rm -rf "$glibc" && mkdir -p "$glibc/lib64" "$glibc/lib/x86_64-linux-gnu" "$glibc/etc" "$glibc/tmp"
# shellcheck disable=SC2012 # ls of fixed library names; the first is the one.
arch_lib=$(cd "$base_rootfs" && ls -d lib/*-linux-gnu | head -1)
mkdir -p "$glibc/$arch_lib" && cp -L "$base_rootfs/$arch_lib/libc.so.6" "$glibc/$arch_lib/"
# shellcheck disable=SC2012,SC2015 # ls of fixed library names; lib64's loader, else the arch folder's.
ld=$(cd "$base_rootfs" && ls lib64/ld-linux-*.so.* 2>/dev/null || ls "$arch_lib"/ld-linux-*.so.* | head -1)
mkdir -p "$glibc/$(dirname "$ld")" && cp -L "$base_rootfs/$ld" "$glibc/$ld"
printf 'root:x:0:0:root:/root:/sbin/nologin\nnonroot:x:65532:65532:nonroot:/home/nonroot:/sbin/nologin\n' >"$glibc/etc/passwd"
printf 'root:x:0:\nnonroot:x:65532:\n' >"$glibc/etc/group"
chmod 1777 "$glibc/tmp"
cp "$base_rootfs/etc/nsswitch.conf" "$glibc/etc/" 2>/dev/null || true

# component TAG BINARY PATH [ROOTFS [USER]]: an image of BINARY at PATH over ROOTFS (default: glibc),
# run as USER (default: root, as the upstream control-plane images).
component() {
	local tag=$1 bin=$2 path=$3 rootfs=${4:-$glibc} user=${5:-0}
	if stamp_ok "image-${tag//[\/:]/_}" "$bin" "$rootfs" "$user" "recipe-$RECIPE" && image_exists "$tag"; then return; fi
	log "image $tag"
	local ctx
	ctx=$(mktemp -d)
	mkdir -p "$ctx/root"
	cp -a "$rootfs/." "$ctx/root/"
	mkdir -p "$ctx/root/$(dirname "$path")" && cp "$bin" "$ctx/root/$path" && chmod 0755 "$ctx/root/$path"
	printf 'FROM scratch\nCOPY root/ /\nUSER %s\nENTRYPOINT ["%s"]\n' "$user" "$path" >"$ctx/Dockerfile"
	docker_build "$tag" "$ctx"
	rm -rf "$ctx"
	stamp_set "image-${tag//[\/:]/_}" "$bin" "$rootfs" "$user" "recipe-$RECIPE"
}

component "registry.k8s.io/kube-apiserver:$KUBE_VERSION" "$KUBE_BIN/kube-apiserver" /usr/local/bin/kube-apiserver
component "registry.k8s.io/kube-controller-manager:$KUBE_VERSION" "$KUBE_BIN/kube-controller-manager" /usr/local/bin/kube-controller-manager
component "registry.k8s.io/kube-scheduler:$KUBE_VERSION" "$KUBE_BIN/kube-scheduler" /usr/local/bin/kube-scheduler
component "registry.k8s.io/etcd:$ETCD_TAG" "$ETCD_BIN" /usr/local/bin/etcd
component "registry.k8s.io/coredns/coredns:$COREDNS_TAG" "$COREDNS_BIN" /coredns

# pause: Kubernetes' own pause.c (build/pause of the pinned module), linked statically as upstream does.
pause=$OUT/pause
if ! stamp_ok pause-bin "$KUBE_MODULE_DIR/build/pause/linux/pause.c" "$PAUSE_TAG" || [[ ! -x $pause ]]; then
	gcc -Os -Wall -Werror -static -DVERSION="v$PAUSE_TAG" -o "$pause" "$KUBE_MODULE_DIR/build/pause/linux/pause.c"
	strip "$pause"
	stamp_set pause-bin "$KUBE_MODULE_DIR/build/pause/linux/pause.c" "$PAUSE_TAG"
fi
empty=$OUT/rootfs-empty && mkdir -p "$empty"
component "registry.k8s.io/pause:$PAUSE_TAG" "$pause" /pause "$empty"

# kube-proxy programs iptables: its image is a Debian root filesystem with iptables and conntrack. The
# iptables mode (legacy or nft) is picked at start the way kind's entrypoint picks the node's.
proxy_rootfs=$OUT/rootfs-kube-proxy
if ! stamp_ok proxy-rootfs "$SUITE" iptables,conntrack,kmod "recipe-$RECIPE" || [[ ! -d $proxy_rootfs ]]; then
	debootstrap_into "$proxy_rootfs" iptables,conntrack,kmod
	cat >"$proxy_rootfs/usr/local/bin/iptables-mode" <<-'EOF'
		#!/bin/sh
		# Picks the iptables backend the node uses: the one with more rules (kind's entrypoint does the same).
		legacy=$( (iptables-legacy-save || true; ip6tables-legacy-save || true) 2>/dev/null | grep -c '^-' || true)
		nft=$( (timeout 5 iptables-nft-save || true; timeout 5 ip6tables-nft-save || true) 2>/dev/null | grep -c '^-' || true)
		mode=nft; [ "${legacy:-0}" -gt "${nft:-0}" ] && mode=legacy
		for t in iptables ip6tables; do update-alternatives --set "$t" "/usr/sbin/$t-$mode" >/dev/null; done
	EOF
	chmod 0755 "$proxy_rootfs/usr/local/bin/iptables-mode"
	stamp_set proxy-rootfs "$SUITE" iptables,conntrack,kmod "recipe-$RECIPE"
fi
proxy_wrapper=$OUT/kube-proxy-wrapper
# The binary's hash in the wrapper: the image's stamp hashes the wrapper, not the root filesystem.
printf '#!/bin/sh\n# kube-proxy.bin %s\n/usr/local/bin/iptables-mode\nexec /usr/local/bin/kube-proxy.bin "$@"\n' \
	"$(sha256sum <"$NODE_BIN/kube-proxy" | cut -d' ' -f1)" >"$proxy_wrapper"
proxy_full=$OUT/rootfs-kube-proxy-full
if ! stamp_ok proxy-full "$NODE_BIN/kube-proxy" "$proxy_wrapper" "$OUT/proxy-rootfs.stamp" || [[ ! -d $proxy_full ]]; then
	rm -rf "$proxy_full" && cp -a "$proxy_rootfs" "$proxy_full"
	cp "$NODE_BIN/kube-proxy" "$proxy_full/usr/local/bin/kube-proxy.bin"
	stamp_set proxy-full "$NODE_BIN/kube-proxy" "$proxy_wrapper" "$OUT/proxy-rootfs.stamp"
fi
component "registry.k8s.io/kube-proxy:$KUBE_VERSION" "$proxy_wrapper" /usr/local/bin/kube-proxy "$proxy_full"

# kube-router, whose network policy controller alone runs (test/e2e/kind/kube-router.yaml): it
# programs iptables and ipsets, so its image is a Debian root filesystem with both, and it picks the
# node's iptables backend at start as kube-proxy's does. The probe Pods of the suite run it too (bash).
if [[ -n ${KUBEROUTER_BIN:-} ]]; then
	: "${KUBEROUTER_IMAGE:?}"
	netpol_rootfs=$OUT/rootfs-kube-router
	if ! stamp_ok netpol-rootfs "$SUITE" iptables,ipset,conntrack,kmod,iproute2 "$proxy_rootfs/usr/local/bin/iptables-mode" "recipe-$RECIPE" || [[ ! -d $netpol_rootfs ]]; then
		debootstrap_into "$netpol_rootfs" iptables,ipset,conntrack,kmod,iproute2
		install -m 0755 "$proxy_rootfs/usr/local/bin/iptables-mode" "$netpol_rootfs/usr/local/bin/iptables-mode"
		stamp_set netpol-rootfs "$SUITE" iptables,ipset,conntrack,kmod,iproute2 "$proxy_rootfs/usr/local/bin/iptables-mode" "recipe-$RECIPE"
	fi
	cp "$KUBEROUTER_BIN" "$netpol_rootfs/usr/local/bin/kube-router.bin"
	netpol_wrapper=$OUT/kube-router-wrapper
	# The binary's hash in the wrapper: the image's stamp hashes the wrapper, not the root filesystem.
	printf '#!/bin/sh\n# kube-router.bin %s\n/usr/local/bin/iptables-mode\nexec /usr/local/bin/kube-router.bin "$@"\n' \
		"$(sha256sum <"$KUBEROUTER_BIN" | cut -d' ' -f1)" >"$netpol_wrapper"
	component "$KUBEROUTER_IMAGE" "$netpol_wrapper" /usr/local/bin/kube-router "$netpol_rootfs"
fi

# cert-manager's controller and cainjector, from its library (hack/tools/controlplane; its commands'
# modules are not served), as non-root as its chart wants them: preloaded, so no pull is tried.
if [[ -n ${CERTMANAGER_BIN:-} ]]; then
	: "${CERTMANAGER_VERSION:?}" "${CERTMANAGER_IMAGE_PREFIX:?}"
	component "$CERTMANAGER_IMAGE_PREFIX/cert-manager-controller:$CERTMANAGER_VERSION" "$CERTMANAGER_BIN/cert-manager-controller" /app/cmd/controller/controller "$glibc" 65532
	component "$CERTMANAGER_IMAGE_PREFIX/cert-manager-cainjector:$CERTMANAGER_VERSION" "$CERTMANAGER_BIN/cert-manager-cainjector" /app/cmd/cainjector/cainjector "$glibc" 65532
fi

### 3. The node image: the base, the node binaries, the images in its containerd.
images=(
	"registry.k8s.io/kube-apiserver:$KUBE_VERSION" "registry.k8s.io/kube-controller-manager:$KUBE_VERSION"
	"registry.k8s.io/kube-scheduler:$KUBE_VERSION" "registry.k8s.io/kube-proxy:$KUBE_VERSION"
	"registry.k8s.io/etcd:$ETCD_TAG" "registry.k8s.io/coredns/coredns:$COREDNS_TAG" "registry.k8s.io/pause:$PAUSE_TAG"
)
if [[ -n ${KUBEROUTER_BIN:-} ]]; then
	images+=("$KUBEROUTER_IMAGE")
fi
if [[ -n ${CERTMANAGER_BIN:-} ]]; then
	images+=("$CERTMANAGER_IMAGE_PREFIX/cert-manager-controller:$CERTMANAGER_VERSION" "$CERTMANAGER_IMAGE_PREFIX/cert-manager-cainjector:$CERTMANAGER_VERSION")
fi
ids=$(for i in "${images[@]}" "$BASE_IMAGE"; do "$DOCKER" image inspect -f '{{.Id}}' "$i"; done)
if stamp_ok node "$ids" "$NODE_BIN/kubelet" "$NODE_BIN/kubeadm" "$KUBE_BIN/kubectl" "$POD_NETWORK_SCRIPT" "$NODE_IMAGE" && image_exists "$NODE_IMAGE"; then
	log "$NODE_IMAGE is up to date"
	exit 0
fi
log "assembling $NODE_IMAGE"
build=cos-kind-build-$$
"$DOCKER" rm -f "$build" >/dev/null 2>&1 || true
trap '"$DOCKER" rm -f "$build" >/dev/null 2>&1 || true' EXIT
"$DOCKER" run -d --init --name "$build" --entrypoint=sleep --security-opt seccomp=unconfined "$BASE_IMAGE" infinity >/dev/null
for b in "$NODE_BIN/kubelet" "$NODE_BIN/kubeadm" "$KUBE_BIN/kubectl"; do
	"$DOCKER" cp "$b" "$build:/usr/bin/$(basename "$b")"
done
"$DOCKER" exec "$build" sh -c "chmod 0755 /usr/bin/kubelet /usr/bin/kubeadm /usr/bin/kubectl && mkdir -p /kind && echo $KUBE_VERSION > /kind/version"
# The pod network: cos-pod-network (hack/kind/pod-network.sh) writes the bridge CNI's config for the
# node's pod range and routes the other nodes' ranges (what kindnetd does), as a systemd service.
"$DOCKER" cp "$POD_NETWORK_SCRIPT" "$build:/usr/local/bin/cos-pod-network"
printf '%s\n' '[Unit]' "Description=The node's pod network for the bridge CNI (what kindnetd does)" \
	'[Service]' 'ExecStart=/usr/local/bin/cos-pod-network' 'Restart=always' 'RestartSec=1' \
	'[Install]' 'WantedBy=multi-user.target' | "$DOCKER" exec -i "$build" sh -c 'cat >/etc/systemd/system/cos-pod-network.service'
"$DOCKER" exec "$build" sh -c 'chmod 0755 /usr/local/bin/cos-pod-network && mkdir -p /etc/systemd/system/multi-user.target.wants /etc/cni/net.d &&
	ln -sf /etc/systemd/system/cos-pod-network.service /etc/systemd/system/multi-user.target.wants/cos-pod-network.service'
"$DOCKER" exec "$build" bash -c 'nohup containerd </dev/null >/tmp/containerd.log 2>&1 &'
# shellcheck disable=SC2016 # expands in the node's shell, not here.
"$DOCKER" exec "$build" bash -c 'for _ in $(seq 100); do [ -S /run/containerd/containerd.sock ] && exit 0; sleep 0.1; done; cat /tmp/containerd.log; exit 1'
"$DOCKER" save "${images[@]}" | "$DOCKER" exec -i "$build" ctr --namespace=k8s.io images import \
	--label=io.cri-containerd.pinned=pinned --all-platforms --no-unpack --digests - >/dev/null
"$DOCKER" exec "$build" ctr --namespace=k8s.io images list -q | sort | grep -v '^sha256:' >&2
"$DOCKER" exec "$build" pkill containerd
"$DOCKER" exec "$build" sh -c 'while pgrep -x containerd >/dev/null; do sleep 0.1; done; rm -rf /tmp/* /var/log/*.log'
"$DOCKER" commit --change 'ENTRYPOINT [ "/usr/local/bin/entrypoint", "/sbin/init" ]' "$build" "$NODE_IMAGE" >/dev/null
stamp_set node "$ids" "$NODE_BIN/kubelet" "$NODE_BIN/kubeadm" "$KUBE_BIN/kubectl" "$POD_NETWORK_SCRIPT" "$NODE_IMAGE"
log "built $NODE_IMAGE"

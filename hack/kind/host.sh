#!/usr/bin/env bash
# Readies this machine to run kind for make test-e2e-sources (make kind-host): installs Docker and
# debootstrap from apt when either is missing, and starts dockerd in the background when no Docker
# engine answers (log .local/dockerd.log, pid .local/dockerd.pid).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."

if ! command -v dockerd >/dev/null || ! command -v debootstrap >/dev/null; then
	echo "installing docker.io and debootstrap from apt"
	apt-get update -qq
	DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends docker.io debootstrap >/dev/null
fi
mkdir -p .local
docker info >/dev/null 2>&1 && exit 0
echo "starting dockerd (log: .local/dockerd.log; stop it with: kill \$(cat .local/dockerd.pid))"
nohup dockerd --storage-driver=overlay2 >.local/dockerd.log 2>&1 &
echo $! >.local/dockerd.pid
for _ in $(seq 60); do
	docker info >/dev/null 2>&1 && exit 0
	sleep 1
done
tail -20 .local/dockerd.log
exit 1

#!/usr/bin/env bash
# Install and start what the netns/docker targets and network faults need (Debian/Ubuntu, as root):
# iproute2 (ip, tc), nftables, util-linux (nsenter), docker.io; start dockerd when it is not running.
# Idempotent: safe to run before every CI job.
set -euo pipefail

if [ "$(id -u)" -ne 0 ]; then
  echo "needs root: sudo $0" >&2
  exit 2
fi

missing=()
command -v ip >/dev/null || missing+=(iproute2)
command -v nft >/dev/null || missing+=(nftables)
command -v nsenter >/dev/null || missing+=(util-linux)
command -v dockerd >/dev/null || missing+=(docker.io)
if [ "${#missing[@]}" -gt 0 ]; then
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}"
fi
python -c "import docker" 2>/dev/null || pip install -q docker

if ! docker info >/dev/null 2>&1; then
  dockerd > /tmp/dockerd.log 2>&1 &
  for _ in $(seq 1 60); do
    docker info >/dev/null 2>&1 && break
    sleep 0.5
  done
  docker info >/dev/null 2>&1 || { echo "dockerd did not start; see /tmp/dockerd.log" >&2; exit 1; }
fi

chaos doctor

#!/usr/bin/env bash
# build.sh [TAG]: build lbd's container image without any registry.
#   1. a Debian 12 base from Debian's packages (docker/rootfs.sh, debootstrap),
#      imported with `docker import` as dplb-base:bookworm (kept: later builds
#      reuse it; DPLB_REBUILD_BASE=1 rebuilds it);
#   2. lbd and lbctl built here (go build), copied onto it by docker/Dockerfile.
# Needs root (debootstrap), Go and a Docker engine (`docker info`).
set -euo pipefail
cd "$(dirname "$0")/.."
tag=${1:-dplb:latest}
base=dplb-base:bookworm
if ! docker info >/dev/null 2>&1; then
	echo "build.sh: no Docker engine answers (docker info failed): cannot build the image" >&2
	exit 1
fi
if [[ -n ${DPLB_REBUILD_BASE:-} ]] || ! docker image inspect "$base" >/dev/null 2>&1; then
	root=$(mktemp -d)
	trap 'rm -rf "$root"' EXIT
	bash docker/rootfs.sh "$root/fs"
	tar -C "$root/fs" -c . | docker import -c 'ENV LANG=C.UTF-8' - "$base"
fi
ctx=$(mktemp -d)
trap 'rm -rf "$ctx" ${root:+"$root"}' EXIT
mkdir -p "$ctx/bin" "$ctx/conf"
go build -trimpath -o "$ctx/bin/lbd" ./cmd/lbd
go build -trimpath -o "$ctx/bin/lbctl" ./cmd/lbctl
cp conf/lbd.example.yaml "$ctx/conf/"
docker build --pull=false -f docker/Dockerfile -t "$tag" "$ctx"

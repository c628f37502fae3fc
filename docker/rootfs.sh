#!/usr/bin/env bash
# rootfs.sh DIR [MIRROR]: build a minimal Debian 12 (bookworm) root file
# system in DIR from Debian's packages with debootstrap, holding what lbd
# needs at run time (DPDK 22.11's libraries, iproute2). No registry, no
# base image: docker/build.sh imports it as the image's base. Root only.
# MIRROR defaults to the first Debian mirror of this host's apt sources.
set -euo pipefail
dir=${1:?usage: rootfs.sh DIR [MIRROR]}
mirror=${2:-}
if [[ -z $mirror ]]; then
	mirror=$(grep -hoE '^(URIs:|deb) +https?://[^ ]+/debian/?( |$)' /etc/apt/sources.list.d/*.sources /etc/apt/sources.list 2>/dev/null |
		grep -oE 'https?://[^ ]+' | head -n1 || true)
	mirror=${mirror:-http://deb.debian.org/debian}
fi
# lbd's libraries (debootstrap installs no Recommends, so name them), the
# mempool driver, the PMDs for common NICs and the virtual devices, and
# dpdk for dpdk-devbind.py.
include=dpdk,iproute2,ca-certificates,libnuma1,librte-eal23,librte-ethdev23,librte-mbuf23,librte-mempool23
include+=,librte-ring23,librte-net23,librte-bus-pci23,librte-bus-vdev23,librte-mempool-ring23,librte-net-ring23
include+=,librte-net-af-packet23,librte-net-memif23,librte-net-tap23,librte-net-i40e23,librte-net-ice23
include+=,librte-net-ixgbe23,librte-net-mlx5-23
command -v debootstrap >/dev/null || { echo "rootfs.sh: debootstrap is not installed (apt-get install debootstrap)" >&2; exit 1; }
mkdir -p "$dir"
debootstrap --variant=minbase --include="$include" bookworm "$dir" "$mirror"
# Smaller and reproducible enough: no apt lists, caches or logs.
rm -rf "$dir"/var/lib/apt/lists/* "$dir"/var/cache/apt/*.bin "$dir"/var/cache/apt/archives/*.deb "$dir"/var/log/*

#!/usr/bin/env bash
# setup.sh: prepare a Debian 12 machine (run as root) for building and
# running dplb: install DPDK 22.11 and the tools the end-to-end tests and
# the demo use (chromium: the console's browser test; debootstrap: the
# container image's base; keepalived: VRRP for the active/backup failover
# test, which runs its own keepalived in the test's namespaces; vsftpd:
# the FTP helper's test, which runs its own in the real servers'
# namespaces; curl is its FTP client; bird2: the BGP router of the
# scale-out test, run in its own namespace), reserve
# 2 MB hugepages and mount hugetlbfs.
# Idempotent: it only does what is missing and says what it did. Loads no
# kernel module.
set -euo pipefail
export DEBIAN_FRONTEND=noninteractive

PACKAGES=(dpdk dpdk-dev libdpdk-dev pkg-config iproute2 iputils-ping ethtool curl procps chromium debootstrap keepalived vsftpd bird2)
HUGEPAGES=${DPLB_HUGEPAGES:-512}       # 2 MB pages wanted at least
HUGE_SYSFS=/sys/kernel/mm/hugepages/hugepages-2048kB/nr_hugepages
HUGE_MNT=/dev/hugepages

say() { printf 'setup: %s\n' "$*"; }
warn() { printf 'setup: WARNING: %s\n' "$*" >&2; }

if [[ $(id -u) -ne 0 ]]; then
	echo "setup: must run as root" >&2
	exit 1
fi

# 1. packages
missing=()
for p in "${PACKAGES[@]}"; do
	if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q '^install ok installed$'; then
		missing+=("$p")
	fi
done
if ((${#missing[@]} > 0)); then
	say "installing ${missing[*]}"
	apt-get update -q
	apt-get install -y -q --no-install-recommends "${missing[@]}"
else
	say "packages already installed: ${PACKAGES[*]}"
fi
# The package enables keepalived.service; on this machine keepalived only
# runs inside the failover test's namespaces, with the test's own config.
if [[ " ${missing[*]:-} " == *" keepalived "* ]] && command -v systemctl >/dev/null; then
	systemctl disable --now keepalived.service >/dev/null 2>&1 || true
	say "keepalived.service disabled (the failover test starts its own keepalived)"
fi
# Likewise vsftpd.service: the FTP test starts vsftpd in its namespaces.
if [[ " ${missing[*]:-} " == *" vsftpd "* ]] && command -v systemctl >/dev/null; then
	systemctl disable --now vsftpd.service >/dev/null 2>&1 || true
	say "vsftpd.service disabled (the FTP test starts its own vsftpd)"
fi
# Likewise bird.service: bird only runs as the scale-out test's router.
if [[ " ${missing[*]:-} " == *" bird2 "* ]] && command -v systemctl >/dev/null; then
	systemctl disable --now bird.service >/dev/null 2>&1 || true
	say "bird.service disabled (the scale-out test starts its own bird)"
fi
if pkg-config --exists libdpdk; then
	say "DPDK $(pkg-config --modversion libdpdk) (pkg-config libdpdk)"
else
	warn "pkg-config does not find libdpdk"
	exit 1
fi

# 2. hugepages (only the demo and production need them; tests use --no-huge)
huge_ok=1
if [[ -w $HUGE_SYSFS ]]; then
	have=$(cat "$HUGE_SYSFS")
	if ((have < HUGEPAGES)); then
		if echo "$HUGEPAGES" >"$HUGE_SYSFS" 2>/dev/null; then
			now=$(cat "$HUGE_SYSFS")
			say "2 MB hugepages: $have -> $now reserved"
			if ((now < HUGEPAGES)); then
				warn "only $now of $HUGEPAGES hugepages could be reserved (memory fragmented?)"
				huge_ok=0
			fi
		else
			warn "cannot write $HUGE_SYSFS"
			huge_ok=0
		fi
	else
		say "2 MB hugepages: $have already reserved (>= $HUGEPAGES)"
	fi
else
	warn "$HUGE_SYSFS is missing or read-only (container?)"
	huge_ok=0
fi
mkdir -p "$HUGE_MNT"
if mountpoint -q "$HUGE_MNT"; then
	say "hugetlbfs already mounted at $HUGE_MNT"
elif mount -t hugetlbfs nodev "$HUGE_MNT" 2>/dev/null; then
	say "mounted hugetlbfs at $HUGE_MNT"
else
	warn "cannot mount hugetlbfs at $HUGE_MNT"
	huge_ok=0
fi
if ((huge_ok)); then
	say "done"
else
	warn "hugepages are not ready: run lbd with 'eal: {huge_pages: false}' (demo: -hugepages=false); tests do not need them"
fi

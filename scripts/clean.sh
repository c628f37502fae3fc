#!/usr/bin/env bash
# clean.sh: remove what a crashed end-to-end test or demo left behind (run as
# root): network namespaces named dplb-*, with the processes still running
# in them; links named dp-* in the root namespace (e2e/topo's names); DPDK
# hugepage files /dev/hugepages/dplb* and the runtime directories of the
# tests, demo and perf runs (/var/run/dpdk/dplb-e2e-*, dplb-demo-*,
# dplbtest*, dplb-perf-*, lbgen-*) that no running process maps.
set -uo pipefail

say() { printf 'clean: %s\n' "$*"; }

if [[ $(id -u) -ne 0 ]]; then
	echo "clean: must run as root" >&2
	exit 1
fi

n=0
for ns in $(ip netns list 2>/dev/null | awk '{print $1}' | grep '^dplb-'); do
	pids=$(ip netns pids "$ns" 2>/dev/null)
	for pid in $pids; do
		kill -KILL "$pid" 2>/dev/null && say "killed pid $pid in $ns"
	done
	if ip netns del "$ns"; then
		say "deleted namespace $ns"
		n=$((n + 1))
	fi
done

for link in $(ip -o link show 2>/dev/null | awk -F': ' '{print $2}' | sed 's/@.*//' | grep '^dp-'); do
	if ip link del "$link" 2>/dev/null; then
		say "deleted link $link"
		n=$((n + 1))
	fi
done

in_use() { grep -qsF "$1" /proc/[0-9]*/maps; }
for f in /dev/hugepages/dplb* /var/run/dpdk/dplb-e2e-* /var/run/dpdk/dplb-demo-* \
	/var/run/dpdk/dplbtest* /var/run/dpdk/dplb-perf-* /var/run/dpdk/lbgen-*; do
	[[ -e $f ]] || continue
	if in_use "$f"; then
		say "kept $f: mapped by a running process"
		continue
	fi
	if rm -rf -- "$f"; then
		say "removed $f"
		n=$((n + 1))
	fi
done
say "$n item(s) removed"

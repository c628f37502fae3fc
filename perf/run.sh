#!/usr/bin/env bash
# perf/run.sh: the perf run on this machine (issue #7). Builds lbd, lbctl,
# lbgen and perfrun into a temporary directory, then runs perfrun from the
# repository root: the generator looped back on itself, dpdk-testpmd as a
# zero-work forwarder (two-way and one-way), and lbd in VS/NAT, VS/DR and
# VS/TUN with 1k and 1M flows, new connections and 2/4 worker lcores, NAT66
# and DR over IPv6 (nat6, dr6) beside NAT and DR, each at
# a series of offered loads.
# perfrun gives lbd and lbgen one steering key (random per run, or
# -steering-key), so the multi-lcore cases send each flow on its owner's queue.
# Writes perf/results/<date>.md, .json and .svg plots. Needs root and DPDK 22.11
# (make setup); uses --no-huge unless PERF_ARGS contains -huge.
#
#   perf/run.sh                                  # defaults: 500k..2M pps and max, 1 s per step, 3 rounds (~6 min)
#   perf/run.sh -long                            # 8 loads, 3 s per step (~20 min)
#   perf/run.sh -rates 500k,max -duration 5s     # any perfrun flag
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="/usr/local/go/bin:$PATH"
[ "$(id -u)" = 0 ] || { echo "perf/run.sh: needs root (DPDK)" >&2; exit 1; }
bin="$(mktemp -d /tmp/dplb-perf-bin.XXXXXX)"
# DPDK leaves its runtime directories behind: remove this run's (and the
# temporary binaries) on the way out.
cleanup() {
	rm -rf "$bin"
	for d in /var/run/dpdk/dplb-perf-* /var/run/dpdk/lbgen-*; do
		[[ -e $d ]] && ! grep -qsF "$d" /proc/[0-9]*/maps && rm -rf -- "$d"
	done
	return 0
}
trap cleanup EXIT
for c in lbd lbctl lbgen; do go build -o "$bin/$c" "./cmd/$c"; done
go build -o "$bin/perfrun" ./perf/cmd/perfrun
"$bin/perfrun" -lbd "$bin/lbd" -lbctl "$bin/lbctl" -lbgen "$bin/lbgen" -out perf/results "$@"

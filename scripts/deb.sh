#!/usr/bin/env bash
# deb.sh [OUTDIR]: build dplb's Debian package (make deb) into OUTDIR
# (default bin/): lbd, lbctl and lbgen, the example configuration as
# /etc/dplb/lbd.yaml (its socket open to group dplb), the systemd unit,
# lbctl's bash completion and the man pages. nfpm runs through `go run`
# at a pinned version (from the Go module proxy or the module cache).
set -euo pipefail
cd "$(dirname "$0")/.."
NFPM=github.com/goreleaser/nfpm/v2/cmd/nfpm@v2.44.1
out=${1:-bin}
mkdir -p "$out"
out=$(cd "$out" && pwd)
STAGE=$(mktemp -d)
trap 'rm -rf "$STAGE"' EXIT
export STAGE
export DPLB_VERSION=${DPLB_VERSION:-0.0.0~git$(git rev-parse --short HEAD 2>/dev/null || echo unknown)}

for c in lbd lbctl lbgen; do
	go build -trimpath -o "$STAGE/$c" "./cmd/$c"
done
# The packaged configuration: the example, with lbctl open to group dplb.
sed -e 's/^\(  socket_mode: \)0600 /\10660 /' -e 's/^\(  group: \)"" /\1dplb /' \
	conf/lbd.example.yaml >"$STAGE/lbd.yaml"
grep -q '^  group: dplb ' "$STAGE/lbd.yaml" || { echo "deb.sh: control.group not set in the packaged lbd.yaml" >&2; exit 1; }
# Man pages; lbd.yaml(5) carries the annotated example verbatim.
gzip -9n <deploy/debian/lbd.8 >"$STAGE/lbd.8.gz"
gzip -9n <deploy/debian/lbctl.8 >"$STAGE/lbctl.8.gz"
{
	cat deploy/debian/lbd.yaml.5.head
	sed -e 's/─/-/g' -e 's/\\/\\e/g' -e 's/^[.'"'"']/\\\&&/' conf/lbd.example.yaml
	cat deploy/debian/lbd.yaml.5.tail
} | gzip -9n >"$STAGE/lbd.yaml.5.gz"

# nfpm expands ${VAR} in some fields only: fill the paths in first.
sed -e "s|\${STAGE}|$STAGE|g" -e "s|\${DPLB_VERSION}|$DPLB_VERSION|g" deploy/debian/nfpm.yaml >"$STAGE/nfpm.yaml"
go run "$NFPM" pkg --packager deb --config "$STAGE/nfpm.yaml" --target "$out/"
ls "$out"/dplb_*.deb

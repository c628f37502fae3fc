# dplb: build, test and demo. Everything that needs root (DPDK, namespaces)
# expects to run as root; `make setup` installs what is missing first.

export PATH := /usr/local/go/bin:$(PATH)
# Every build trims the build machine's paths, as the Debian package's and
# the image's do (scripts/deb.sh, docker/build.sh): one set of compiler
# flags, so that the package tests reuse what the build compiled instead
# of compiling lbd and its dependencies again.
export GOFLAGS := -trimpath $(GOFLAGS)
GO      ?= go
BIN     := bin
LBD     := $(BIN)/lbd
LBCTL   := $(BIN)/lbctl
HELPER  := $(BIN)/nshelper

.PHONY: all build setup test unit e2e demo bench perf pgo fuzz vet clean deb

all: build

build:
	$(GO) build -o $(LBD) ./cmd/lbd
	$(GO) build -o $(LBCTL) ./cmd/lbctl
	$(GO) build -o $(HELPER) ./e2e/nshelper

# Debian packages (DPDK 22.11, iproute2, ethtool, ...) and hugepages.
setup:
	bash scripts/setup.sh

# The whole suite: pure-Go units, DPDK bindings and the dataplane on virtual
# devices (--no-huge), and lbd end to end between namespaces; then the
# dataplane and control plane again under the race detector (lcores share
# nothing but their rings), and the dataplane's no-allocation tests compiled
# as lbd is, with its profile (inlining decides what escapes).
test: setup vet
	$(GO) test -count=1 -parallel 4 -timeout 18m ./...
	$(GO) test -race -count=1 -timeout 10m ./lcore/... ./ctl/...
	$(GO) test -count=1 -pgo=$(CURDIR)/cmd/lbd/default.pgo -run 'DoesNotAllocate|DoNotAllocate|NoAllocs|CausesNoGC' ./lcore/...

unit: vet
	$(GO) test -count=1 -short ./...

e2e: setup
	$(GO) test -count=1 -parallel 4 -timeout 10m -v ./e2e/...

vet:
	@test -z "$$(gofmt -l $$(git ls-files '*.go'))" || { gofmt -l $$(git ls-files '*.go'); echo 'gofmt needed'; exit 1; }
	$(GO) vet ./...

# lbd on its embedded default: a client and two web servers in namespaces.
# DEMOARGS=-console=10m keeps it running with its browser console forwarded
# to https://127.0.0.1:9443/ (login demo / demo).
demo: setup build
	$(GO) run ./e2e/cmd/demo -lbd $(LBD) -lbctl $(LBCTL) -nshelper $(HELPER) $(DEMOARGS)

# The Debian package (nfpm): lbd, lbctl, lbgen, /etc/dplb/lbd.yaml, the
# systemd unit, bash completion, man pages; into bin/.
deb:
	bash scripts/deb.sh $(BIN)

bench:
	$(GO) test -run '^$$' -bench . -benchmem ./lcore/... ./dpdk/...

# Profile-guided optimisation: go build compiles lbd with cmd/lbd/default.pgo,
# a CPU profile of the dataplane's benchmarks (the per-packet paths of NAT,
# DR, TUN and FullNAT, SYN cookies, new connections and expiry at scale, 1M
# flows). Refresh it when the packet path changes (about a minute).
PGO_BENCH := BenchmarkNATPacket$$|BenchmarkDRPacket|BenchmarkTUNPacket|BenchmarkFullNATPacket|BenchmarkSynCookie|BenchmarkNATHandshakeAtScale|BenchmarkDRNewConnectionAtScale|BenchmarkTUNNewConnectionAtScale|BenchmarkNATFlowScale
pgo:
	$(GO) test -count=1 -run '^$$' -bench '$(PGO_BENCH)' -benchtime 2s -o $(BIN)/lcore-pgo.test -cpuprofile $(CURDIR)/cmd/lbd/default.pgo ./lcore/
	rm -f $(BIN)/lcore-pgo.test

# A perf run over memif on this machine: lbgen against lbd (NAT, DR, TUN;
# 1k and 1M flows; new connections; 1, 2 and 4 lcores; NAT66 and DR over
# IPv6), testpmd and a loop,
# at increasing loads, the cases the targets read in three rounds (about six
# minutes; a markdown report, JSON and plots in perf/results).
perf: setup
	bash perf/run.sh

fuzz:
	$(GO) test -run '^$$' -fuzz FuzzParse -fuzztime 30s ./lcore/hdr

clean:
	rm -rf $(BIN)
	bash scripts/clean.sh

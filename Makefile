# Every entry point of the project. Tool versions are pinned here; binaries are built from the Go
# module proxy into a version-keyed cache outside the clone (test/tools/build-binaries.sh) and
# linked into bin/, so a fresh clone on a warm machine reuses them and an empty machine builds them.

KUBERNETES_VERSION ?= 1.36.4
ETCD_VERSIONS      ?= 3.6.8 3.7.3
HELM_VERSION       ?= 3.22.0
CONTROLLER_TOOLS_VERSION ?= 0.23.0
# The S3-compatible server the backup tests upload to (test/s3server).
VERSITYGW_VERSION  ?= 1.8.0
# promtool, for the unit tests of the chart's alert rules (test/helm TestAlertRules); Prometheus
# 3.X.Y is Go module v0.X.Y. About 8 minutes to build cold on 2 cores.
PROMETHEUS_MODULE_VERSION ?= 0.316.0

SHELL := /bin/bash
.SHELLFLAGS := -o pipefail -ec

REPO := $(abspath $(dir $(lastword $(MAKEFILE_LIST))))
BIN  := $(REPO)/bin
export ETCD_CONDUCTOR_BIN_DIR := $(BIN)
BUILD := $(REPO)/test/tools/build-binaries.sh
# The binary `make build` writes is the one the tests, the demo and the benchmark run (member-agent
# sidecars, the Helm-installed manager): nothing compiles it a second time with other flags.
export ETCD_CONDUCTOR_BINARY := $(BIN)/etcd-conductor
# Every stage prints one line with its time and the total since make started (test/tools/stage.sh).
export ETCD_CONDUCTOR_MAKE_START ?= $(shell date +%s)
STAGE := $(REPO)/test/tools/stage.sh

# make test must stay well under CI's 90 minutes.
TEST_TIMEOUT ?= 35m
# The e2e stage is one package; -p 1 keeps a second from joining it when E2E_PACKAGES grows.
GO_TEST_FLAGS ?= -p 1

.PHONY: all build image host-deps tools generate verify-generate vet test test-unit soak matrix cluster-up cluster-down demo bench bench-smoke bench-fleet bench-scope bench-go bench-backup bench-liveness bench-seed clean

all: build

# The commit the binary is built from, for `etcd-conductor version` and the manager's start-up log.
VERSION_PKG := github.com/etcd-conductor/etcd-conductor/internal/version
GIT_COMMIT  := $(shell git rev-parse HEAD 2>/dev/null)
GIT_DIRTY   := $(shell git diff --quiet HEAD 2>/dev/null || echo true)
BUILD_LDFLAGS := -X $(VERSION_PKG).commit=$(GIT_COMMIT) -X $(VERSION_PKG).modified=$(GIT_DIRTY)

build:
	@$(STAGE) build env CGO_ENABLED=0 go build -trimpath -ldflags '$(BUILD_LDFLAGS)' -o $(BIN)/etcd-conductor ./cmd/etcd-conductor

# The operator image, without a Docker daemon or a base image (tools/imagebuild): the binary
# cross-compiled as `make build` compiles it for each platform, FROM scratch, an OCI archive with
# a multi-platform index (docker load, kind load image-archive, ctr import). Reproducible: every
# timestamp is the commit's. The helm e2e and the demo run the chart from this archive.
IMAGE_PLATFORMS ?= linux/amd64 linux/arm64
IMAGE_ARCHIVE   := $(BIN)/etcd-conductor-image.tar
IMAGE_CREATED   := $(shell git log -1 --format=%ct 2>/dev/null || echo 0)
IMAGE_VERSION   := $(shell sed -n 's/^const Version = "\(.*\)"/\1/p' internal/version/version.go)

# make test and make demo run the image on this machine only: they pack this platform's binary
# alone, which spares a fresh machine the cross-compilation of every dependency (5–6 minutes on
# 2 cores). `make image` on its own builds every platform of IMAGE_PLATFORMS.
HOST_PLATFORM := linux/$(shell go env GOARCH)
test demo: IMAGE_PLATFORMS = $(HOST_PLATFORM)

image:
	@$(STAGE) image bash -ec '$(foreach p,$(IMAGE_PLATFORMS),\
	  CGO_ENABLED=0 GOOS=$(word 1,$(subst /, ,$(p))) GOARCH=$(word 2,$(subst /, ,$(p))) go build -trimpath -ldflags "$(BUILD_LDFLAGS)" -o $(BIN)/image/$(subst /,-,$(p))/etcd-conductor ./cmd/etcd-conductor;) \
	  go run ./tools/imagebuild -out $(IMAGE_ARCHIVE) -version $(IMAGE_VERSION) -revision "$(GIT_COMMIT)" -created $(IMAGE_CREATED) \
	    $(foreach p,$(IMAGE_PLATFORMS),-binary $(p)=$(BIN)/image/$(subst /,-,$(p))/etcd-conductor)'

host-deps: ## The node simulator needs iproute2 and iptables (network namespaces, partitions).
	@command -v ip >/dev/null && command -v iptables >/dev/null || \
	  (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq iproute2 iptables >/dev/null)

tools: host-deps ## Build/link every external binary the tests and the demo run.
	@$(STAGE) "tools (first run ~14m)" bash -ec '$(BUILD) controller-gen $(CONTROLLER_TOOLS_VERSION); \
	  $(foreach v,$(ETCD_VERSIONS),$(BUILD) etcd $(v);) \
	  $(BUILD) kubernetes $(KUBERNETES_VERSION); $(BUILD) helm $(HELM_VERSION); \
	  $(BUILD) versitygw $(VERSITYGW_VERSION); $(BUILD) promtool $(PROMETHEUS_MODULE_VERSION)'

# The manager's RBAC rules, generated from the +kubebuilder:rbac markers of the code that makes the
# calls; the chart renders them (files/rbac/*/role.yaml), so the markers are the one source.
RBAC_DIR := charts/etcd-conductor/files/rbac

generate: ## Regenerate deepcopy code, the CRD and the RBAC rules (committed under charts/).
	$(BUILD) controller-gen $(CONTROLLER_TOOLS_VERSION)
	$(BIN)/controller-gen object paths=./internal/api/...
	$(BIN)/controller-gen crd paths=./internal/api/druid/... output:crd:artifacts:config=charts/etcd-conductor/files/crds
	@# Controllers: a ClusterRole, or a Role in each watched namespace.
	$(BIN)/controller-gen rbac:roleName=manager paths=./internal/operator/controller/... output:rbac:artifacts:config=$(RBAC_DIR)/manager
	@# Leader election: a Role in the release namespace.
	$(BIN)/controller-gen rbac:roleName=leader-election paths=./internal/operator output:rbac:artifacts:config=$(RBAC_DIR)/leader-election
	@# Metrics authentication and authorization: cluster-scoped reviews, always a ClusterRole.
	$(BIN)/controller-gen rbac:roleName=metrics-auth paths=./internal/operator/metricsserving output:rbac:artifacts:config=$(RBAC_DIR)/metrics-auth
	@# The member report policy's check: cluster-scoped reads, always a ClusterRole.
	$(BIN)/controller-gen rbac:roleName=report-auth paths=./internal/operator/reportauth output:rbac:artifacts:config=$(RBAC_DIR)/report-auth

verify-generate: generate ## Fail when the committed generated files are stale.
	git diff --exit-code -- internal/api charts/etcd-conductor/files/crds $(RBAC_DIR)
	@test -z "$$(git status --porcelain -- internal/api charts/etcd-conductor/files/crds $(RBAC_DIR))" || \
	  (git status --porcelain -- internal/api charts/etcd-conductor/files/crds $(RBAC_DIR); echo "generated files not committed"; exit 1)

# test/bench/plot is its own Go module (the plotting library stays out of the operator's go.mod).
PLOT_MODULE := test/bench/plot

# An untidy go.mod (a product import marked // indirect, a requirement nothing needs) fails here:
# any -mod=mod build would rewrite it.
vet:
	@$(STAGE) tidy go mod tidy -diff
	@$(STAGE) vet go vet ./...
	@$(STAGE) vet-plot go vet -C $(PLOT_MODULE) ./...

# Packages whose tests need no binaries (pure logic, decoders, planners), and the others but e2e
# (test/tools/packages.sh). Unit packages build and run side by side; the others one at a time.
UNIT_PACKAGES = $$(test/tools/packages.sh unit)
INTEGRATION_PACKAGES = $$(test/tools/packages.sh integration)
# Within an integration package, the tests that mostly wait (test/integration's on its shared
# control plane, each with an operator confined to its namespace) run this many at a time.
INTEGRATION_PARALLEL ?= 4
# Integration packages built and run this many at a time: one package's compilation and waits
# overlap another's run (each starts its own control plane, etcd members and node-simulator
# bridge, on ports and subnets it picks free). One at a time, the stage took 18.5 min, 4 of them
# compiling.
INTEGRATION_PACKAGES_AT_ONCE ?= 2

test-unit: ## Tests that need no binaries: pure logic, decoders, the planner's properties.
	go test $(UNIT_PACKAGES)
	go test -C $(PLOT_MODULE) ./...

E2E_PACKAGES := ./test/e2e/...
# The e2e tests that mostly wait (probes, grace periods, a store that is down) run this many at a
# time, each with an operator of its own (inParallel); the rollout scenarios, whose figures are
# quorum loss and write gaps, run one at a time before them.
E2E_PARALLEL ?= 6

test: tools build image vet ## Everything: unit, integration (real kube-apiserver), etcd (real mTLS members), e2e, chart.
	@$(STAGE) unit go test -timeout $(TEST_TIMEOUT) $(UNIT_PACKAGES)
	@$(STAGE) integration go test -timeout $(TEST_TIMEOUT) -p $(INTEGRATION_PACKAGES_AT_ONCE) -parallel $(INTEGRATION_PARALLEL) $(INTEGRATION_PACKAGES)
	@$(STAGE) plot go test -C $(PLOT_MODULE) ./...
	@# -v so that every scenario's figures (quorum loss, write gap, leader changes, duration) show.
	@$(STAGE) e2e go test -timeout $(TEST_TIMEOUT) $(GO_TEST_FLAGS) -parallel $(E2E_PARALLEL) -v $(E2E_PACKAGES)

# make soak COUNT=10: the e2e fault scenarios COUNT times each in one stack (every run in a fresh
# namespace), then min/median/max of each figure per scenario. Not part of make test: ~15 min a
# round. SOAK_RUN narrows it, e.g. SOAK_RUN='TestRolloutOneMemberDead|TestRolloutOneMemberHung'.
# The whole operation × fault matrix (TestMatrix with E2E_MATRIX=all) is part of it: each round
# adds ~25 min; the matrix's table prints once at the end with every round's cell.
# TestRestoreThroughStoreOutage restores through each of STORE_OUTAGES (503 SlowDown to delta
# reads for that long; ~5 min plus the outage each), e.g. STORE_OUTAGES=1h for the long one.
COUNT    ?= 10
SOAK_RUN ?= TestRollout|TestMatrix|TestRestoreThroughStoreOutage|TestStorageClassChangedFiveMembers
STORE_OUTAGES ?= 2m,6m
soak: tools build
	@$(STAGE) "soak x$(COUNT)" env E2E_MATRIX=all E2E_SOAK=1 E2E_STORE_OUTAGES=$(STORE_OUTAGES) go test -timeout $$(( $(COUNT) * 80 ))m -p 1 -count $(COUNT) -v -run '$(SOAK_RUN)' $(E2E_PACKAGES)

# make matrix: every cell of the operation × fault matrix (test/e2e/matrix_test.go) once, then one
# table (rows operations, columns faults; docs/fault-matrix.md). make test runs its cheap cells.
# MATRIX_RUN narrows it, e.g. MATRIX_RUN='TestMatrix/rollout/'; MATRIX_COUNT repeats it.
MATRIX_RUN   ?= TestMatrix
MATRIX_COUNT ?= 1
matrix: tools build
	@$(STAGE) "matrix x$(MATRIX_COUNT)" env E2E_MATRIX=all go test -timeout $$(( $(MATRIX_COUNT) * 60 ))m -p 1 -count $(MATRIX_COUNT) -v -run '$(MATRIX_RUN)' $(E2E_PACKAGES)

CLUSTER_DIR ?= $(REPO)/.cluster

cluster-up: tools build ## Start etcd + kube-apiserver + kube-controller-manager detached; prints export KUBECONFIG=...
	go run ./test/localcluster/cmd/localcluster up --dir $(CLUSTER_DIR) $(if $(FEATURE_GATES),--feature-gates $(FEATURE_GATES))

cluster-down: ## Stop the processes recorded in the dir and remove it.
	go run ./test/localcluster/cmd/localcluster down --dir $(CLUSTER_DIR)

demo: tools build image
	@$(STAGE) demo go run ./test/demo

BENCH_OUT ?= $(REPO)/test/bench/results

bench: tools build ## Rollout benchmark: 3/5/7 members, every strategy side by side (REPS=3; ~70 min, REPS=1 ~25 min). BENCH_ARGS adds flags.
	@$(STAGE) bench go run ./test/bench -reps $(or $(REPS),3) -out $(BENCH_OUT) $(BENCH_ARGS)
	@$(STAGE) plot go run -C $(PLOT_MODULE) . -dir $(BENCH_OUT)

# Fleet benchmark (issue 15): N Etcds on the local control plane, the manager of BEFORE (a git ref,
# built and cached by commit) and of the current tree side by side; FLEET_N=100,300,1000.
FLEET_N      ?= 100,300
FLEET_BEFORE ?= a25b047
bench-fleet: tools build ## Fleet benchmark: convergence, restart cost, requests per Etcd, RSS/CPU, before | after.
	@$(STAGE) bench-fleet go run ./test/bench/fleet/cmd/fleetbench -n $(FLEET_N) -before '$(FLEET_BEFORE)' -out $(BENCH_OUT) $(FLEET_FLAGS)

# Scope benchmark: the manager's cache holds only the pods and Leases with the managed-by label.
# SCOPE_N unrelated pods and as many Leases on a local control plane; the manager's heap and RSS
# before and after, beside the same cache without the selectors (docs/benchmarks.md). ~3 min.
SCOPE_N ?= 20000
bench-scope: tools build ## Scope benchmark: manager memory vs. SCOPE_N unrelated pods and Leases, beside an unscoped cache.
	@$(STAGE) bench-scope go run ./test/bench/fleet/cmd/scopebench -n $(SCOPE_N) $(SCOPE_FLAGS)

BENCH_SMOKE_OUT ?= $(or $(TMPDIR),/tmp)/etcd-conductor-bench-smoke

bench-smoke: tools build ## The benchmark's path end to end in ~3 min: 3 members, one dead, RollingUpdate and ours, once.
	@$(STAGE) bench-smoke go run ./test/bench -reps 1 -idle 2s -scenarios 3-one-dead -strategies rolling-update,ondelete-direct -out $(BENCH_SMOKE_OUT)

bench-go: tools ## Go benchmarks: the planner (3/5/7 members), member queries, a warm reconcile (0 handshakes), restore throughput.
	go test -run '^$$' -bench . -benchtime 100x ./internal/decide/rollout/ ./etcdclient/ ./test/bench/reconcile/
	@# Restore throughput (MB/s) and peak disk against the keyspace size (64 MiB, 256 MiB, 1 GiB;
	@# uncompressed and gzip); each run restores a real snapshot. 1 GiB fills for minutes and needs
	@# ~10 GB of disk. RESTORE_BENCH narrows it, e.g. RESTORE_BENCH='Restore/keyspace=64MiB'.
	go test -run '^$$' -bench '$(or $(RESTORE_BENCH),.)' -benchtime 3x -timeout 90m ./internal/member/restore/

# Full snapshot throughput in MB/s against the keyspace size (4, 16, 64 MiB; the restore
# benchmark's 64 MiB reads beside it): a real etcd member over mTLS and a real S3 server (versitygw); under a minute.
# make bench-go runs it too.
bench-backup: tools
	go test -run '^$$' -bench . -benchtime 3x ./test/bench/backup/
bench-go: bench-backup

# The liveness and readiness probes against a defragmentation of 256 MiB and 1 GiB databases (half
# free): the longest stall a healthy member goes through must fail no liveness probe. A few minutes.
bench-liveness: tools
	go test -run '^$$' -bench . -benchtime 1x -timeout 30m ./test/bench/liveness/

# Seeding a joining member (issue #28, docs/benchmarks.md): scale-out 3→5 on real etcd members at
# each keyspace size, joining members empty (today), with the snapshot's database alone, and seeded
# as the init step seeds them (database + WAL at its consistent index), side by side in one
# table. 200 MB and 1 GB take ~5 min and ~8 GB under SEED_TMP.
SEED_SIZES ?= 200,1024
SEED_TMP   ?= $(or $(TMPDIR),/tmp)
bench-seed: tools
	go test -run TestScaleOutSeeding -count=1 -v -timeout 60m ./test/bench/seedjoin -args -seedjoin.sizes=$(SEED_SIZES) -seedjoin.tmp=$(SEED_TMP)

clean: cluster-down
	rm -rf $(BIN) .cluster

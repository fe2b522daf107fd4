# meshd: prioritized, multi-revision leader election for mesh control planes.
#
#   make demo              the main job: a local control plane and several meshd processes
#   make demo-multicluster two local control planes, one meshd per cluster, each the other's remote
#   make test              unit and integration tests (builds the local control plane first)
#   make build             the meshd binary into bin/, stamped with version and commit
#   make image             the container image, built in Go without a daemon:
#                          bin/meshd-image.tar (docker/podman load) and bin/meshd-oci/
#                          (an amd64 and arm64 index; IMAGE_ARCHS to change)
#   make chart             render the Helm chart into deploy/meshd.yaml
#   make test-tools        tests of the separate modules in tools/ (image, chart, monitoring, kube scripts)
#   make lint              gofmt and go vet
#   make test-unit         tests that need no API server
#   make test-integration  tests against a real kube-apiserver and etcd on 127.0.0.1
#   make fuzz              longer fuzzing of every decoder and a longer simulation
#   make sim               the deterministic simulation: fixed ranges and fresh seeds
#   make sim-long          a search of at least 1,000,000 schedules, in parallel chunks
#   make bench             benchmarks against client-go's elector, written to docs/benchmarks.md
#   make bench-compare     the benchmark of BASE and of the working tree, one after the other:
#                          docs/bench-compare.md side by side, and docs/benchmarks.md
#   make chaos             faults injected into several meshd processes; checks safety and liveness

GO       ?= go
BIN      := $(CURDIR)/bin
VERSION  ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo devel)
COMMIT   ?= $(shell git rev-parse HEAD 2>/dev/null || echo unknown)
# main.* for "meshd version", monitoring.* for meshd_build_info.
LDFLAGS  := -X main.version=$(VERSION) -X main.commit=$(COMMIT) \
	-X github.com/meshd-io/meshd/internal/monitoring.buildVersion=$(VERSION) \
	-X github.com/meshd-io/meshd/internal/monitoring.buildCommit=$(COMMIT)
ARCH     ?= $(shell $(GO) env GOARCH)
# The image is tagged with the chart's appVersion, the tag the chart runs
# by default: "make image" and "helm install" agree without --set. The
# binary inside still reports VERSION and COMMIT (meshd version).
CHART_APP_VERSION := $(shell sed -n 's/^appVersion: *"\{0,1\}\([^"]*\)"\{0,1\}$$/\1/p' deploy/charts/meshd/Chart.yaml)
IMAGE    ?= meshd:$(CHART_APP_VERSION)
IMAGE_ARCHS ?= amd64 arm64
comma := ,
empty :=
space := $(empty) $(empty)
IMAGE_BINARIES = $(subst $(space),$(comma),$(foreach a,$(IMAGE_ARCHS),$(a)=$(BIN)/linux_$(a)/meshd))
FUZZTIME ?= 30s
CHAOS_DURATION ?= 3m
CHAOS_SEED ?= 0
# Random schedules of the deterministic simulation: make test runs SIM_SEEDS
# from seed 1, and SIM_SESSION_SEEDS of session mode; make fuzz runs
# SIM_FUZZ_SEEDS and SIM_FUZZ_SESSION_SEEDS more from SIM_FUZZ_SEED on.
# A schedule of session mode takes about twice as long as a classic one
# (heartbeats), so the budgets keep the time of 10000 classic schedules.
# A budget of 0 skips its mode.
SIM_SEEDS ?= 6000
SIM_SESSION_SEEDS ?= 2000
SIM_FUZZ_SEEDS ?= 30000
SIM_FUZZ_SESSION_SEEDS ?= 10000
SIM_FUZZ_SEED ?= 10001
# Every make test also searches: SIM_FRESH_SEEDS classic and
# SIM_FRESH_SESSION_SEEDS session schedules from a base seed drawn anew each
# run (printed; set SIM_FRESH_BASE to replay a run's whole fresh range).
SIM_FRESH_SEEDS ?= 4000
SIM_FRESH_SESSION_SEEDS ?= 2000
# Drawn once per make run (a simple variable: every use sees the same seed).
ifndef SIM_FRESH_BASE
SIM_FRESH_BASE := $(shell od -An -N4 -tu4 /dev/urandom | tr -d ' ')
endif
# make sim-long: SIM_LONG_SEEDS classic and SIM_LONG_SESSION_SEEDS session
# schedules from SIM_LONG_BASE, in chunks of SIM_LONG_CHUNK run SIM_LONG_JOBS
# at a time; the summary goes to docs/reliability.md.
SIM_LONG_SEEDS ?= 700000
SIM_LONG_SESSION_SEEDS ?= 300000
SIM_LONG_BASE ?= 100000001
SIM_LONG_CHUNK ?= 20000
SIM_LONG_JOBS ?= $(shell nproc)
SIM_TEST := $(GO) test -count=1 -timeout 2h -run 'TestSimulation$$' ./internal/testing/sim
# Packages whose tests need no API server.
UNIT_PKGS := ./pkg/... ./internal/testing/kubetest/... ./internal/testing/sim/... ./internal/testing/faultproxy/... ./internal/ledger/... ./internal/lockstatus/... ./internal/monitoring/...

include mk/kube.mk

.PHONY: all build image image-name chart test test-unit test-integration test-tools lint fuzz fuzz-decoders sim sim-long demo bench bench-compare chaos clean

all: build

build:
	$(GO) build -ldflags "$(LDFLAGS)" -o $(BIN)/meshd ./cmd/meshd

# A static linux binary in an image of its own: no base image, no daemon.
# One image per architecture of IMAGE_ARCHS, from the same sources: the OCI
# layout holds their index (push it with crane), the tarball the image of
# this machine's ARCH (docker load reads one platform).
image:
	@for a in $(IMAGE_ARCHS); do \
		echo "meshd for linux/$$a"; \
		CGO_ENABLED=0 GOOS=linux GOARCH=$$a $(GO) build -trimpath -ldflags "-s -w $(LDFLAGS)" -o $(BIN)/linux_$$a/meshd ./cmd/meshd || exit 1; \
	done
	cd tools/image && $(GO) run . -binaries $(IMAGE_BINARIES) -arch $(ARCH) -tag $(IMAGE) \
		-version $(VERSION) -revision $(COMMIT) -o $(BIN)/meshd-image.tar -layout $(BIN)/meshd-oci

# The reference "make image" tags its image with.
image-name:
	@echo $(IMAGE)

# deploy/meshd.yaml is the chart rendered with its default values; a test
# in tools/helm fails when it is stale.
chart:
	cd tools/helm && $(GO) run ./cmd/render -chart ../../deploy/charts/meshd -o ../../deploy/meshd.yaml

# The separate modules: the image builder (builds a static meshd and runs it
# from the unpacked image), the chart (renders it with Helm's library and
# runs two revisions of meshd on a real API server with the chart's RBAC)
# the local control plane's scripts, and monitoring (the alerts evaluated by
# Prometheus's rule engine; the dashboard, the alerts and docs/metrics.md
# against /metrics of a running meshd), and the example that gates a
# controller-runtime manager by an election.
test-tools: kube-bins
	cd tools/kube && $(GO) test -count=1 .
	cd tools/monitoring && $(GO) test -count=1 ./...
	cd examples/controller-runtime && $(GO) test -race -count=1 ./...
	cd tools/image && $(GO) test -count=1 ./...
	cd tools/helm && $(GO) test -race -count=1 ./...

lint:
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi
	$(GO) vet ./...
	@# The separate modules at once: each vet is mostly one chain of packages.
	@status=0; pids=; \
	for mod in tools/image:./... tools/helm:./... tools/kube:. tools/monitoring:./... examples/controller-runtime:./...; do \
		dir=$${mod%%:*}; pkgs=$${mod#*:}; \
		(cd $$dir && $(GO) vet $$pkgs || { echo "go vet failed in $$dir"; exit 1; }) & pids="$$pids $$!"; \
	done; \
	for pid in $$pids; do wait $$pid || status=1; done; exit $$status

test-unit:
	$(GO) test -race -count=1 $(UNIT_PKGS)

test-integration: kube-bins
	$(GO) test -race -count=1 ./internal/... ./test/...

# The README's test command: lint, every test (the simulation's named
# scenarios and a small budget of its schedules under the race detector),
# the tools' modules, the simulation's full budget without the race
# detector, and a short fuzzing pass of every decoder. The pass is a count
# of inputs, not a duration: a duration that runs out while a worker is
# busy can end the pass with "context deadline exceeded" and no finding.
#
# The packages whose tests take longest are named first, so that they start
# first; three test binaries run at once (-p 3), as those spend most of
# their time waiting for leases and processes rather than computing.
SLOW_TEST_PKGS := ./test/reliability ./test/e2e ./test/integration ./pkg/election/elector
test: lint kube-bins
	$(GO) test -race -count=1 -p 3 $(SLOW_TEST_PKGS) ./...
	$(MAKE) --no-print-directory test-tools
	$(MAKE) --no-print-directory sim
	$(MAKE) --no-print-directory fuzz-decoders FUZZTIME=10000x

# The simulation's fixed budget: SIM_SEEDS random schedules from seed 1,
# and SIM_SESSION_SEEDS schedules of session mode; then fresh schedules from
# a base seed drawn for this run. The four runs go at the same time (one
# test binary; each run's output is printed whole once all have ended). A
# failing seed prints its replay command.
sim:
	@echo "sim: fresh schedules from base seed $(SIM_FRESH_BASE) (replay this range: make sim SIM_FRESH_BASE=$(SIM_FRESH_BASE))"
	@GO=$(GO) $(CURDIR)/hack/sim-budget.sh "classic 1 $(SIM_SEEDS)" "sessions 1 $(SIM_SESSION_SEEDS)" \
		"classic $(SIM_FRESH_BASE) $(SIM_FRESH_SEEDS)" "sessions $(SIM_FRESH_BASE) $(SIM_FRESH_SESSION_SEEDS)"

# A long search of the simulation, in parallel chunks. On 2 cores the
# default budget (700,000 classic and 300,000 session schedules) took 90
# minutes, other tests running beside it for a third of that. Writes its
# summary into docs/reliability.md.
sim-long:
	@SEEDS=$(SIM_LONG_SEEDS) SESSION_SEEDS=$(SIM_LONG_SESSION_SEEDS) BASE=$(SIM_LONG_BASE) \
		CHUNK=$(SIM_LONG_CHUNK) JOBS=$(SIM_LONG_JOBS) GO=$(GO) $(CURDIR)/hack/sim-long.sh docs/reliability.md

# Longer fuzzing of every decoder, and a longer simulation budget.
fuzz: fuzz-decoders
	@if [ "$(SIM_FUZZ_SEEDS)" -gt 0 ]; then $(SIM_TEST) -sim.seeds=$(SIM_FUZZ_SEEDS) -sim.seed=$(SIM_FUZZ_SEED); fi
	@if [ "$(SIM_FUZZ_SESSION_SEEDS)" -gt 0 ]; then $(SIM_TEST) -sim.mode=sessions -sim.seeds=$(SIM_FUZZ_SESSION_SEEDS) -sim.seed=$(SIM_FUZZ_SEED); fi

fuzz-decoders:
	@for pkg in $$(grep -rl --include='*_test.go' '^func Fuzz' pkg internal | xargs -n1 dirname | sort -u); do \
		for target in $$(sed -n 's/^func \(Fuzz[A-Za-z0-9_]*\)(.*/\1/p' $$pkg/*_test.go); do \
			echo "fuzz $$target in ./$$pkg for $(FUZZTIME)"; \
			$(GO) test -run='^$$' -fuzz="^$$target$$" -fuzztime=$(FUZZTIME) ./$$pkg || exit 1; \
		done; \
	done

demo: kube-bins build
	@VERSION=$(VERSION) COMMIT=$(COMMIT) $(CURDIR)/hack/demo.sh

.PHONY: demo-multicluster
demo-multicluster: kube-bins build
	@$(CURDIR)/hack/demo-multicluster.sh

# Reports, not tests: about 20 minutes on 2 cores; run it on an idle machine.
bench: kube-bins
	$(GO) run ./internal/tools/cmd/bench -out docs/benchmarks.md

# Twice make bench's time: BASE's benchmark from a worktree under .cache,
# then the working tree's. BASE is the code before the core was split into
# plug-ins (the commit its issue measured).
BASE ?= d59a6c8
bench-compare: kube-bins
	$(GO) run ./internal/tools/cmd/benchcompare -base $(BASE) -out docs/bench-compare.md -head-out docs/benchmarks.md

chaos: kube-bins build
	$(GO) run ./internal/tools/cmd/chaos -meshd $(BIN)/meshd -duration $(CHAOS_DURATION) -seed $(CHAOS_SEED) -pods

clean:
	rm -rf $(BIN)

# meshd: prioritized, multi-revision leader election for mesh control planes.
#
#   make demo              the main job: a local control plane and several meshd processes
#   make test              unit and integration tests (builds the local control plane first)
#   make build             the meshd binary into bin/
#   make lint              gofmt and go vet
#   make test-unit         tests that need no API server
#   make test-integration  tests against a real kube-apiserver and etcd on 127.0.0.1
#   make fuzz              longer fuzzing of every decoder

GO       ?= go
BIN      := $(CURDIR)/bin
FUZZTIME ?= 30s
# Packages whose tests need no API server.
UNIT_PKGS := ./pkg/... ./internal/kubetest/... ./internal/ledger/... ./internal/lockstatus/... ./internal/monitoring/...

include mk/kube.mk

.PHONY: all build test test-unit test-integration lint fuzz demo clean

all: build

build:
	$(GO) build -o $(BIN)/meshd ./cmd/meshd

lint:
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi
	$(GO) vet ./...

test-unit:
	$(GO) test -race -count=1 $(UNIT_PKGS)

test-integration: kube-bins
	$(GO) test -race -count=1 ./internal/... ./test/...

# The README's test command: lint, every test, and a short fuzzing pass.
test: lint kube-bins
	$(GO) test -race -count=1 ./...
	$(MAKE) --no-print-directory fuzz FUZZTIME=5s

fuzz:
	@for target in $$($(GO) test -list '^Fuzz' ./pkg/... 2>/dev/null | grep '^Fuzz'); do \
		pkg=$$(grep -rl "func $$target(" pkg --include='*_test.go' | head -1 | xargs dirname); \
		echo "fuzz $$target in ./$$pkg for $(FUZZTIME)"; \
		$(GO) test -run='^$$' -fuzz="^$$target$$" -fuzztime=$(FUZZTIME) ./$$pkg || exit 1; \
	done

demo: kube-bins build
	@$(CURDIR)/hack/demo.sh

clean:
	rm -rf $(BIN)

#!/usr/bin/env bash
# Runs the meshd demo (docs/demo.md): a throwaway local control plane and
# four meshd processes, walked through default-revision changes, a crash and
# a graceful stop. Needs only Go; "make demo" runs it.
#
# Usage: hack/demo.sh [demo flags]   e.g. -plain, -ttl 6s, -keep (see -help)
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"

# Both steps are quick when nothing changed: build.sh keeps binaries whose
# inputs are unchanged, and go build reuses its cache. meshd is stamped as
# "make build" stamps it (make demo passes VERSION and COMMIT), so that
# "meshd version" and meshd_build_info name the build.
tools/kube/build.sh
version="${VERSION:-$(git describe --tags --always --dirty 2>/dev/null || echo devel)}"
commit="${COMMIT:-$(git rev-parse HEAD 2>/dev/null || echo unknown)}"
go build -ldflags "-X main.version=$version -X main.commit=$commit \
	-X github.com/meshd-io/meshd/internal/monitoring.buildVersion=$version \
	-X github.com/meshd-io/meshd/internal/monitoring.buildCommit=$commit" -o bin/meshd ./cmd/meshd

# Built rather than "go run" so that its exit status (0, 1 on a failed step,
# 130 on Ctrl-C) is what this script returns.
go build -o .cache/demo/demo ./internal/tools/cmd/demo

export KUBE_BIN_DIR="$root/.cache/kube/bin"
exec .cache/demo/demo -meshd "$root/bin/meshd" "$@"

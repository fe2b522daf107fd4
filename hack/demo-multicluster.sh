#!/usr/bin/env bash
# Runs the two-cluster chapter of the meshd demo (docs/multicluster.md): two
# throwaway local control planes, one meshd per cluster, each the other's
# remote. Needs only Go; "make demo-multicluster" runs it.
#
# Usage: hack/demo-multicluster.sh [flags]   e.g. -ttl 6s, -keep (see -help)
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"

tools/kube/build.sh
go build -o bin/meshd ./cmd/meshd
go build -o .cache/demo/demo-multicluster ./internal/tools/cmd/demo-multicluster

export KUBE_BIN_DIR="$root/.cache/kube/bin"
exec .cache/demo/demo-multicluster -meshd "$root/bin/meshd" "$@"

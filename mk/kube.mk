# Kubernetes control plane for tests and local development: etcd and
# kube-apiserver built from Go modules (tools/kube), run on 127.0.0.1.
#
#   make kube-bins     build the binaries into .cache/kube/bin (slow only the first time)
#   make cluster-up    run a control plane in the background; prints export KUBECONFIG=...
#                      (CLUSTER_FLAGS=-coordinated: serve LeaseCandidates, for coordinated modes)
#   make cluster-down  stop it and remove its state
#
# KUBE_BIN_DIR is exported so that tests using internal/testing/testcluster find the
# binaries when run through make.

KUBE_BIN_DIR := $(CURDIR)/.cache/kube/bin
export KUBE_BIN_DIR

.PHONY: kube-bins cluster-up cluster-down

kube-bins:
	@$(CURDIR)/tools/kube/build.sh

cluster-up: kube-bins
	@CLUSTER_FLAGS="$(CLUSTER_FLAGS)" $(CURDIR)/tools/kube/cluster.sh up

cluster-down:
	@$(CURDIR)/tools/kube/cluster.sh down

#!/usr/bin/env bash
# Starts or stops the local development control plane (internal/tools/cmd/localcluster)
# in the background. Used by "make cluster-up" and "make cluster-down".
#
# Usage: tools/kube/cluster.sh up|down
#
# State lives in .cache/cluster at the repository root: pid, localcluster.log,
# kubeconfig, ready (written by localcluster once the kubeconfig works) and data/.
# The binaries come from $KUBE_BIN_DIR or .cache/kube/bin (make kube-bins).
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/../.." && pwd)"
dir="$root/.cache/cluster"
pidfile="$dir/pid"
logfile="$dir/localcluster.log"
ready="$dir/ready"
ready_timeout="${CLUSTER_READY_TIMEOUT:-240}"
stop_timeout=60

# running succeeds if the pidfile names a live localcluster process.
running() {
	[[ -f "$pidfile" ]] || return 1
	local pid
	pid="$(cat "$pidfile")"
	[[ "$pid" =~ ^[0-9]+$ ]] || return 1
	kill -0 "$pid" 2>/dev/null || return 1
	tr '\0' ' ' <"/proc/$pid/cmdline" 2>/dev/null | grep -q localcluster
}

usage() {
	cat "$ready"
	cat <<EOF
Control plane is up on 127.0.0.1 (log: .cache/cluster/localcluster.log).
Run the export line above in your shell (or: eval "\$(cat .cache/cluster/ready)").
Contexts: meshd-local (admin, system:masters) and meshd-local-meshd-restricted-1..3
(no RBAC until you bind some). No controllers run. Stop it with: make cluster-down
EOF
}

up() {
	if running && [[ -f "$ready" ]]; then
		cat "$ready"
		return 0
	fi
	if ! running; then
		if [[ -e "$dir" ]]; then
			echo "removing stale state in .cache/cluster"
			rm -rf "$dir"
		fi
		mkdir -p "$dir"
		echo "building internal/tools/cmd/localcluster"
		(cd "$root" && go build -o "$dir/localcluster" ./internal/tools/cmd/localcluster)
		echo "starting the control plane in the background"
		nohup "$dir/localcluster" -dir "$dir" >"$logfile" 2>&1 </dev/null &
		echo $! >"$pidfile"
	else
		echo "control plane is starting (pid $(cat "$pidfile")); waiting for it"
	fi

	local deadline=$((SECONDS + ready_timeout))
	while [[ ! -f "$ready" ]]; do
		if ! running; then
			echo "localcluster exited before it was ready; tail of .cache/cluster/localcluster.log:" >&2
			tail -n 40 "$logfile" >&2 || true
			rm -f "$pidfile"
			return 1
		fi
		if ((SECONDS >= deadline)); then
			echo "control plane not ready after ${ready_timeout}s; tail of .cache/cluster/localcluster.log:" >&2
			tail -n 40 "$logfile" >&2 || true
			echo "(it is still running; make cluster-down stops it)" >&2
			return 1
		fi
		sleep 0.5
	done
	usage
}

down() {
	if running; then
		local pid
		pid="$(cat "$pidfile")"
		echo "stopping localcluster (pid $pid)"
		kill -TERM "$pid"
		local deadline=$((SECONDS + stop_timeout))
		while kill -0 "$pid" 2>/dev/null; do
			if ((SECONDS >= deadline)); then
				echo "localcluster did not stop within ${stop_timeout}s; killing it" >&2
				# Its children are killed with it (parent-death signal).
				kill -KILL "$pid" 2>/dev/null || true
				break
			fi
			sleep 0.2
		done
	else
		echo "control plane is not running"
	fi
	rm -rf "$dir"
}

case "${1:-}" in
up) up ;;
down) down ;;
*)
	echo "usage: $0 up|down" >&2
	exit 2
	;;
esac

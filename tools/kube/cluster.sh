#!/usr/bin/env bash
# Starts or stops the local development control plane (internal/tools/cmd/localcluster)
# in the background. Used by "make cluster-up" and "make cluster-down".
#
# Usage: tools/kube/cluster.sh up|down
#
# State lives in .cache/cluster at the repository root (CLUSTER_DIR overrides
# it): pid, localcluster.log, kubeconfig, ready (written by localcluster once
# the kubeconfig works) and data/. The binaries come from $KUBE_BIN_DIR or
# .cache/kube/bin (make kube-bins). LOCALCLUSTER names a prebuilt localcluster
# to run instead of building one; CLUSTER_FLAGS are added to its flags
# (-coordinated: serve LeaseCandidates for meshd's coordinated modes).
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/../.." && pwd)"
dir="${CLUSTER_DIR:-$root/.cache/cluster}"
pidfile="$dir/pid"
logfile="$dir/localcluster.log"
ready="$dir/ready"
ready_timeout="${CLUSTER_READY_TIMEOUT:-240}"
stop_timeout=60

# starttime prints when process $1 started, in clock ticks since boot (field
# 22 of /proc/<pid>/stat, after the command name in parentheses), or nothing
# where there is no /proc. With the pid it names one process for good: a pid
# reused by another process has another start time. Unlike the command line
# it is set at fork, so a process that has not exec'd yet is recognised too.
starttime() {
	local stat
	stat="$(cat "/proc/$1/stat" 2>/dev/null)" || return 0
	stat="${stat##*) }"
	# Fields from 3 (state) on: the start time is the 20th of them.
	set -- $stat
	echo "${20:-}"
}

# running succeeds if the pidfile names a live process that this script
# started: the same pid and the same start time.
running() {
	[[ -f "$pidfile" ]] || return 1
	local pid started
	read -r pid started <"$pidfile" || true
	[[ "${pid:-}" =~ ^[0-9]+$ ]] || return 1
	kill -0 "$pid" 2>/dev/null || return 1
	[[ "$(starttime "$pid")" == "${started:-}" ]]
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
		local bin="${LOCALCLUSTER:-}"
		if [[ -z "$bin" ]]; then
			echo "building internal/tools/cmd/localcluster"
			bin="$dir/localcluster"
			(cd "$root" && go build -o "$bin" ./internal/tools/cmd/localcluster)
		fi
		echo "starting the control plane in the background"
		# shellcheck disable=SC2086 # CLUSTER_FLAGS is a list of flags
		nohup "$bin" -dir "$dir" ${CLUSTER_FLAGS:-} >"$logfile" 2>&1 </dev/null &
		local pid=$!
		echo "$pid $(starttime "$pid")" >"$pidfile"
	else
		echo "control plane is starting (pid $(cut -d' ' -f1 "$pidfile")); waiting for it"
	fi

	local deadline=$((SECONDS + ready_timeout))
	while [[ ! -f "$ready" ]]; do
		if ! running; then
			echo "localcluster exited before it was ready; tail of $logfile:" >&2
			tail -n 40 "$logfile" >&2 || true
			# The pidfile stays: a process that is gone leaves nothing to
			# stop, and make cluster-down removes the state.
			return 1
		fi
		if ((SECONDS >= deadline)); then
			echo "control plane not ready after ${ready_timeout}s; tail of $logfile:" >&2
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
		pid="$(cut -d' ' -f1 "$pidfile")"
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

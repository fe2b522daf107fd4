#!/usr/bin/env bash
# Runs the simulation's budget of `make test`: every argument is one run,
# "MODE FIRST-SEED COUNT" (a count of 0 skips it). The test binary is built
# once and the runs go at the same time, each into its own file; the files
# are printed in the order given once every run has ended. The exit status
# is 1 when any run failed.
#
# Environment: GO (the go command).
#
# Usage: hack/sim-budget.sh "classic 1 6000" "sessions 1 2000" ...
set -euo pipefail

: "${GO:=go}"
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT

(cd "$root" && "$GO" test -c -o "$work/sim.test" ./internal/testing/sim)

pids=()
n=0
for run in "$@"; do
	read -r mode first count <<<"$run"
	n=$((n + 1))
	if [[ "$count" -le 0 ]]; then
		echo "sim: $mode from seed $first: skipped (count $count)" >"$work/out-$n"
		continue
	fi
	(cd "$root/internal/testing/sim" && exec "$work/sim.test" -test.run 'TestSimulation$' -test.v -test.timeout 2h \
		-sim.mode="$mode" -sim.seed="$first" -sim.seeds="$count") >"$work/out-$n" 2>&1 &
	pids+=("$!")
done

status=0
for pid in "${pids[@]}"; do
	wait "$pid" || status=1
done
for i in $(seq 1 "$n"); do
	cat "$work/out-$i"
done
exit "$status"

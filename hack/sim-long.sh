#!/usr/bin/env bash
# Runs a long search of the deterministic simulation in parallel chunks and
# writes its summary into the given markdown file, between the markers
# <!-- sim-long begin --> and <!-- sim-long end --> (appended if absent).
#
# Environment: SEEDS and SESSION_SEEDS (schedules of each mode), BASE (first
# seed of both ranges), CHUNK (schedules per test process), JOBS (processes
# at once), GO (the go command).
#
# Usage: hack/sim-long.sh docs/reliability.md
set -euo pipefail

out_doc="${1:?usage: $0 FILE.md}"
: "${SEEDS:=700000}" "${SESSION_SEEDS:=300000}" "${BASE:=100000001}" "${CHUNK:=20000}" "${JOBS:=2}" "${GO:=go}"

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT

commit=$(cd "$root" && git rev-parse --short HEAD 2>/dev/null || echo unknown)
if [[ -n "$(cd "$root" && git status --porcelain -- pkg internal go.mod go.sum 2>/dev/null | head -1)" ]]; then
	commit="$commit (with uncommitted changes)"
fi
echo "sim-long: building the simulation's test binary at $commit"
(cd "$root" && "$GO" test -c -o "$work/sim.test" ./internal/testing/sim)

# One line per chunk: mode first-seed count.
plan() {
	local mode="$1" total="$2" first="$BASE" left="$2"
	while [[ "$left" -gt 0 ]]; do
		local n=$((left < CHUNK ? left : CHUNK))
		echo "$mode $first $n"
		first=$((first + n))
		left=$((left - n))
	done
}
# Session chunks first: they are the slower ones, and the ones that have
# found the most violations, so a find comes early.
{
	plan sessions "$SESSION_SEEDS"
	plan classic "$SEEDS"
} >"$work/plan"

chunks=$(wc -l <"$work/plan")
echo "sim-long: $SEEDS classic and $SESSION_SEEDS session schedules from seed $BASE, $chunks chunks, $JOBS at a time"
start=$(date +%s)
# Each chunk's output goes to its own file; a chunk with a violation fails,
# which xargs reports at the end, after every chunk has run.
set +e
(cd "$root/internal/testing/sim" && xargs -P "$JOBS" -L 1 sh -c '
	mode=$1 first=$2 n=$3
	"$0" -test.run "TestSimulation\$" -test.v -test.timeout 3h -sim.mode="$mode" -sim.seed="$first" -sim.seeds="$n" \
		>"'"$work"'/out-$mode-$first" 2>&1
	status=$?
	echo "sim-long: $mode seeds $first..$((first + n - 1)) done (exit $status)"
	exit $status
' "$work/sim.test" <"$work/plan")
status=$?
set -e
elapsed=$(($(date +%s) - start))

# Sum the chunks' summary lines, per mode:
#   classic: N schedules (seeds A..B) in T: S steps, W terms of work; F failed
summary() {
	local mode="$1"
	cat "$work"/out-"$mode"-* 2>/dev/null | awk -v mode="$mode" '
		$0 ~ mode": [0-9]+ schedules" {
			for (i = 1; i <= NF; i++) {
				if ($i == "schedules") n += $(i-1)
				if ($i == "steps,") s += $(i-1)
				if ($i == "terms") w += $(i-1)
				if ($i == "failed") f += $(i-1)
			}
			chunks++
		}
		END { printf "%d %d %d %d %d\n", n, s, w, f, chunks }'
}
read -r cn cs cw cf cc < <(summary classic)
read -r sn ss sw sf sc < <(summary sessions)
failing=$(cat "$work"/out-* | { grep -o 'seed [0-9]* broke [0-9]* invariant' || true; } | awk '{print $2}' | sort -n | uniq | head -50 | tr '\n' ' ')
planned_chunks=$chunks
ran_chunks=$((cc + sc))


section="$work/section.md"
{
	echo "<!-- sim-long begin -->"
	echo "### The long search (\`make sim-long\`)"
	echo
	echo "Run on $(date -u +%Y-%m-%d) at commit $commit, $(nproc) CPUs, $JOBS processes at once:"
	echo "\`make sim-long SIM_LONG_SEEDS=$SEEDS SIM_LONG_SESSION_SEEDS=$SESSION_SEEDS SIM_LONG_BASE=$BASE\`."
	echo
	echo "| mode | schedules | seeds | steps | terms of work | violations |"
	echo "|---|---:|---|---:|---:|---:|"
	echo "| classic | $cn | $BASE..$((BASE + SEEDS - 1)) | $cs | $cw | $cf |"
	echo "| sessions | $sn | $BASE..$((BASE + SESSION_SEEDS - 1)) | $ss | $sw | $sf |"
	echo "| total | $((cn + sn)) | | $((cs + ss)) | $((cw + sw)) | $((cf + sf)) |"
	echo
	echo "Wall time: ${elapsed} s ($ran_chunks of $planned_chunks chunks reported)."
	if [[ -n "$failing" ]]; then
		echo "Failing seeds: $failing"
	fi
	echo "<!-- sim-long end -->"
} >"$section"

doc="$root/$out_doc"
if grep -q '<!-- sim-long begin -->' "$doc"; then
	awk -v sec="$section" '
		/<!-- sim-long begin -->/ { while ((getline line < sec) > 0) print line; skip = 1; next }
		/<!-- sim-long end -->/ { skip = 0; next }
		!skip { print }' "$doc" >"$work/doc" && cp "$work/doc" "$doc"
else
	{ echo; cat "$section"; } >>"$doc"
fi
cat "$section"
if [[ "$status" -ne 0 || "$ran_chunks" -ne "$planned_chunks" ]]; then
	echo "sim-long: some chunks failed; their output:" >&2
	grep -l -- '--- FAIL' "$work"/out-* 2>/dev/null | head -5 | while read -r f; do tail -40 "$f" >&2; done
	exit 1
fi

#!/usr/bin/env bash
# The goals' measure (make bench-median): BENCH_RUNS runs of the load
# harness with the arguments given (make passes bench-quick's), each
# writing its JSON summary, then the medians and spreads of every figure
# and every goal's ratio to its floor (bin/benchmedian), printed and saved
# as MEDIAN_DIR/median.md.
#
#   BIN          the agentdock binary measured ("after"), default bin/agentdock
#   BEFORE_BIN   optional: an older binary ("before"), run alternately with
#                BIN so that both see the same hour of a shared machine
#   BENCH_RUNS   runs of each binary (default 5)
#   MEDIAN_DIR   where the runs' JSON and reports go (default bench-median;
#                emptied first)
#
# Run it on a quiet machine: the harness, the servers and redis-server
# share its cores, and anything else running moves the figures.
set -euo pipefail
cd "$(dirname "$0")/.."

bin=${BIN:-bin/agentdock}
before=${BEFORE_BIN:-}
runs=${BENCH_RUNS:-5}
out=${MEDIAN_DIR:-bench-median}
case $runs in '' | *[!0-9]* | 0)
	echo "bench-median: BENCH_RUNS=$runs: want a whole number of runs, at least 1" >&2
	exit 2
	;;
esac
for b in bin/loadtest bin/relay bin/benchmedian "$bin" ${before:+"$before"}; do
	if [ ! -x "$b" ]; then
		echo "bench-median: $b is not an executable (make bench-bins builds the harness's)" >&2
		exit 2
	fi
done

rm -rf "$out"
started="$(date -u '+%Y-%m-%d %H:%M UTC'), $(nproc) cores, load average before the runs $(cut -d' ' -f1-3 /proc/loadavg)"
sets=()
labels=(after)
if [ -n "$before" ]; then labels=(before after); fi
for label in "${labels[@]}"; do
	mkdir -p "$out/$label"
	sets+=("$label=$out/$label")
done

for i in $(seq 1 "$runs"); do
	for label in "${labels[@]}"; do
		b=$bin
		if [ "$label" = before ]; then b=$before; fi
		echo "bench-median: run $i of $runs, $label ($b)" >&2
		bin/loadtest -bin "$b" -relay-bin bin/relay "$@" \
			-json "$out/$label/run-$i.json" -o "$out/$label/run-$i.md" >"$out/$label/run-$i.log" 2>&1 || {
			echo "bench-median: run $i of $label failed; its output:" >&2
			cat "$out/$label/run-$i.log" >&2
			exit 1
		}
	done
done

{
	echo "$runs run(s) per binary of: bin/loadtest $*"
	echo "$started"
	echo
	bin/benchmedian "${sets[@]}"
} | tee "$out/median.md"

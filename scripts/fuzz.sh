#!/usr/bin/env bash
# Runs every fuzz target of the project, one after the other.
#
#   scripts/fuzz.sh 60s     each target for 60 seconds (make fuzz)
#   scripts/fuzz.sh smoke   each target for a fixed number of inputs (make test)
#
# The smoke run counts inputs instead of seconds because Go 1.26's fuzzing
# coordinator can report a bare "context deadline exceeded" when a -fuzztime
# duration ends while a worker is mid-input (go.dev/issue/75804, fixed in Go
# 1.27). A count has no deadline to race, so CI cannot fail on it; on a slower
# machine the smoke run just takes longer. The counts give each target about
# three seconds on the machine of BENCHMARKS.md: targets in packages that pull
# in gin, OpenTelemetry or langchaingo run about ten times slower, because the
# fuzzer instruments every package the test binary links.
#
# A timed run can still meet the race. A real finding always writes its input
# under testdata/fuzz and says "Failing input written to"; a failure without
# one whose only complaint is the deadline is reported as the race, and the
# target's seeds and testdata/fuzz inputs are then replayed without fuzzing.
set -uo pipefail
cd "$(dirname "$0")/.."

budget=${1:?usage: scripts/fuzz.sh <duration>|smoke}
GO=${GO:-go}

# package, target, inputs for the smoke run.
targets=(
	"./orchestration FuzzConditions 30000"
	"./orchestration FuzzNearest 20000"
	"./orchestration FuzzTrail 20000"
	"./template FuzzLoad 40000"
	"./guardrail FuzzPIIStream 6000"
	"./guardrail FuzzRegexStream 12000"
	"./scenario FuzzParse 30000"
	"./server/internal/wire FuzzChatBody 40000"
	"./server/internal/wire FuzzParseEventID 40000"
	"./server/internal/wire FuzzOpenAIBodies 30000"
	"./session/redisstore FuzzParseRedisURL 20000"
	"./session FuzzCursor 20000"
	"./spend FuzzParsePrices 30000"
	"./server/internal/wire FuzzApprovalAnswers 30000"
	"./server/internal/wire FuzzDecodeCompaction 20000"
	"./llmorch/provider FuzzOpenAIStream 6000"
	"./llmorch/provider FuzzAnthropicStream 6000"
	"./llmorch/provider FuzzTextChunk 40000"
	"./llmorch/mockllm FuzzDecodeRequest 20000"
	"./llmorch/offline FuzzArguments 3000"
	"./tools FuzzExecuteArguments 20000"
	"./tools FuzzLimitResult 20000"
	"./tools/mcp FuzzCutCall 5000"
	"./transcript/internal/format FuzzParse 30000"
	"./cmd/server FuzzParseConfigFile 3000"
	"./tools/mcp/mcpconfig FuzzParse 30000"
	"./server/a2a FuzzRequest 5000"
	"./server/agui FuzzInput 5000"
	"./server/mcpserver FuzzRequestState 6000"
	"./server/mcpserver FuzzPlainToolsList 20000"
	"./internal/netguard FuzzCheckURL 20000"
)

log=$(mktemp)
trap 'rm -f "$log"' EXIT

for t in "${targets[@]}"; do
	read -r pkg name count <<<"$t"
	if [ "$budget" = smoke ]; then
		# Minimising a new interesting input can take longer than the whole
		# smoke run; a crasher is still saved, just not shrunk.
		args=(-fuzztime "${count}x" -fuzzminimizetime=0)
		echo "fuzzing $name in $pkg for $count inputs"
	else
		args=(-fuzztime "$budget")
		echo "fuzzing $name in $pkg for $budget"
	fi
	start=$SECONDS
	"$GO" test -run '^$' -fuzz "^${name}\$" "${args[@]}" "$pkg" >"$log" 2>&1
	rc=$?
	if [ $rc -eq 0 ]; then
		grep 'execs:' "$log" | tail -1
		echo "ok $name ($((SECONDS - start)) s)"
		continue
	fi
	cat "$log"
	if grep -q 'context deadline exceeded' "$log" &&
		! grep -q -e 'Failing input written' -e 'panic:' -e '_test.go:[0-9]*:' "$log"; then
		echo "$name: the fuzzing coordinator stopped on its own deadline (go.dev/issue/75804), no input failed; replaying its seeds and testdata/fuzz inputs"
		if "$GO" test -count=1 -run "^${name}\$" "$pkg"; then
			continue
		fi
	fi
	echo "FAIL $name in $pkg"
	exit 1
done

# The two commands a new machine needs: `make run` and `make test`.
GO      ?= go
# Each module is built and tested as itself: the product (this directory)
# and the load harness (loadtest/, its own module). go.work joins them for
# editors and ad-hoc commands; make leaves it out, so that the product never
# builds with a version the harness alone asks for, and the same commands
# work with or without go.work.
export GOWORK := off
BIN     := bin/agentdock
PKGS    := ./...
# Packages with goroutines of their own: tested again under the race detector.
RACE    := ./internal/... ./session/... ./agent/... ./llmorch/... ./tools/... ./server/... ./turnlog/... ./responses/... ./telemetry/... ./transcript/...
FUZZTIME ?= 60s

.PHONY: all build run test test-go test-race test-loadtest test-sim test-e2e test-conformance test-protocols mcp-servers bench bench-go bench-load bench-soak bench-quick bench-median bench-bins bench-cache lint fuzz fuzz-short docker-check faults clean

all: build

# The same command as the Dockerfile's build stage (make docker-check).
# nomsgpack leaves out gin's MessagePack binding, which the server never
# uses: 6.3 MB of the binary (docs/deploying.md, "The binary's size").
build:
	GOWORK=off CGO_ENABLED=0 $(GO) build -tags nomsgpack -trimpath -buildvcs=false -ldflags="-s -w" -o $(BIN) ./cmd/server

# Starts the server on :8080 with its embedded defaults: the memory store and,
# without a provider key, the offline model.
run: build
	./$(BIN) serve

test: lint test-go test-race test-loadtest test-sim fuzz-short docker-check test-e2e test-conformance test-protocols

# scripts/testsummary runs go test -json and prints each package's line,
# the output of failed tests, one line per skipped test with its reason,
# and a count: a test that skips for lack of redis-server or Chromium is
# seen, without -v's flood of passes.
test-go: mcp-servers
	GO=$(GO) $(GO) run ./scripts/testsummary -count=1 $(PKGS)

test-race: mcp-servers
	GO=$(GO) $(GO) run ./scripts/testsummary -count=1 -race $(RACE)

# The load harness's own tests (its module is not under the product's
# ./...): short runs of the harness, the relay and tracewait against the
# binary of make build and a real redis-server.
test-loadtest: build
	cd loadtest && AGENTDOCK_BIN=../$(BIN) $(GO) test -count=1 ./...

# The real MCP servers from npm that the MCP tests run (tools/mcp, faults,
# cmd/server), installed from their lockfile as e2e does. Without npm the
# tests skip with a reason; in CI they fail instead.
mcp-servers:
	@if command -v npm >/dev/null; then cd tools/mcp/testdata/servers && npm ci --no-audit --no-fund --loglevel=error; \
	else echo "npm not found: the MCP tests will skip (see tools/mcp/testdata/servers)"; fi

# The acceptance commands of the orchestration contract, through the binary,
# and the templates' transcripts (docs/testing.md): the shipped templates'
# in templates/*/tests, AgentDock's (which reference ../shared) in
# transcript/testdata/agentdock, and the routing example's.
test-sim: build
	@if [ -d ../shared/spec/scenarios ]; then \
		./$(BIN) simulate -q ../shared/spec/scenarios/*.json scenario/testdata/*.json && \
		./$(BIN) validate -q ../shared/fixtures/agentdock-templates/*/template.json templates/ examples/routing/template.json && \
		./$(BIN) test -q templates/ transcript/testdata/agentdock transcript/testdata/parallel examples/routing; \
	elif [ "$$CI" = true ]; then echo "../shared is required in CI" >&2; exit 1; \
	else echo "skipping simulate/validate/test of ../shared: not beside the project"; \
		./$(BIN) simulate -q scenario/testdata/*.json && ./$(BIN) validate -q templates/ examples/routing/template.json && \
		./$(BIN) test -q templates/ examples/routing; fi

# examples/mount is built too: the page's test under a path prefix runs it.
test-e2e: build
	CGO_ENABLED=0 $(GO) build -trimpath -buildvcs=false -ldflags="-s -w" -o bin/example-mount ./examples/mount
	@if [ -f e2e/package.json ]; then cd e2e && npm ci --no-audit --no-fund --loglevel=error && AGENTDOCK_BIN=../$(BIN) EXAMPLE_MOUNT_BIN=../bin/example-mount node --test; fi

# The protocols' own tools against the binary (protocols/README.md): the
# official A2A JS client (two replicas on a redis-server of its own), AG-UI's
# HttpAgent, MCP's conformance suite (run with bun from npm) and the MCP
# TypeScript SDK over stdio, and the docs' client examples.
test-protocols: build
	@if [ -f protocols/package.json ]; then cd protocols && npm ci --no-audit --no-fund --loglevel=error && AGENTDOCK_BIN=../bin/agentdock node --test; fi

# Public test suites of the APIs the server speaks, unchanged, against the
# binary on a scripted model: the Open Responses compliance suite from
# ../shared/conformance/openresponses on bun (an npm package, conformance/
# installs it from its lockfile). It prints the counts.
test-conformance: build
	@if [ -f conformance/package.json ]; then cd conformance && npm ci --no-audit --no-fund --loglevel=error && AGENTDOCK_BIN=../$(BIN) node --test; fi

# Everything BENCHMARKS.md reports, about 30 minutes on 2 cores with nothing
# else running: the Go benchmarks, the load harness against the goals
# (load.md) and a soak per store (soak.md, one CSV of samples per store).
# bench-quick is a short run of the harness, and bench-median the goals'
# measure: BENCH_RUNS (5) bench-quick runs and the median and spread of
# each figure and of each ratio to its floor, as a table for BENCHMARKS.md
# (bench-median/median.md); BEFORE_BIN=path/to/an/older/agentdock alternates
# its runs with that binary's and puts both in the table. The harness
# targets measure the plain relay of loadtest/cmd/relay (the floor), and
# the same relay keeping its sessions in Redis (relay-redis, the floor for
# the Redis store), beside the runtime with each store, in the same run, and
# write the figures and the runtime's ratios to the relay to BENCH_JSON;
# PROFILE_DIR=dir also saves CPU, heap and goroutine profiles of every
# server there, and execution traces of the paced phases (bin/tracewait
# DIR/*.trace.pprof: where turns wait; with -paths, where model requests and
# first tokens wait, hop by hop). LOADTEST_ARGS adds harness flags to any of
# them (e.g. '-duration 1s', '-server-env GODEBUG=...').
SOAK ?= 10m
SOAK_STORES ?= memory,redis
PROFILE_DIR ?=
LOADTEST_ARGS ?=
BENCH_RUNS ?= 5
BEFORE_BIN ?=
MEDIAN_DIR ?= bench-median
QUICK_ARGS := -streams 50 -duration 5s -ramp 1s -idle 200 -instant-streams 20 -command-turns 20
HARNESS = bin/loadtest -bin $(BIN) -relay-bin bin/relay
bench: bench-go bench-load bench-soak bench-cache

bench-go:
	$(GO) test -run '^$$' -bench . -benchmem -count=1 ./orchestration ./guardrail ./session/... ./llmorch/... ./tools/... ./turnlog/... ./agent ./server ./server/mcpserver ./telemetry
	$(GO) test -run '^$$' -bench StopAcrossReplicas -benchtime=200x -count=1 ./faults

# The harness, the relay (built as make build builds agentdock, so that the
# two compare) and the tools that read the harness's output, from the
# loadtest module.
bench-bins: build
	cd loadtest && CGO_ENABLED=0 $(GO) build -trimpath -buildvcs=false -ldflags="-s -w" -o ../bin/relay ./cmd/relay
	cd loadtest && $(GO) build -o ../bin/ ./cmd/loadtest ./cmd/tracewait ./cmd/benchmedian

# What a provider's prompt cache makes of the runtime's requests, per tool
# filtering mode: bytes and tokens, not times, so it runs in seconds and
# gives the same table on any machine (BENCHMARKS.md, "Prompt cache").
bench-cache:
	cd loadtest && $(GO) run ./cmd/promptcache -runs 3

bench-load: BENCH_JSON ?= load.json
bench-load: bench-bins
	$(HARNESS) -o load.md -json $(BENCH_JSON) $(if $(PROFILE_DIR),-profile $(PROFILE_DIR)) $(LOADTEST_ARGS)

bench-soak: bench-bins
	$(HARNESS) -soak $(SOAK) -streams 100 -stores $(SOAK_STORES) -o soak.md -soak-csv . $(LOADTEST_ARGS)

bench-quick: BENCH_JSON ?= bench-quick.json
bench-quick: bench-bins
	$(HARNESS) $(QUICK_ARGS) -json $(BENCH_JSON) $(if $(PROFILE_DIR),-profile $(PROFILE_DIR)) $(LOADTEST_ARGS)

bench-median: bench-bins
	BENCH_RUNS=$(BENCH_RUNS) BEFORE_BIN=$(BEFORE_BIN) MEDIAN_DIR=$(MEDIAN_DIR) BIN=$(BIN) \
		scripts/bench-median.sh $(QUICK_ARGS) $(LOADTEST_ARGS)

# The fault tests with their slow variants (Redis killed after each frame
# of a turn, many stalled clients); the fast ones run in make test (test-go).
faults:
	AGENTDOCK_SLOW_FAULTS=1 $(GO) test -count=1 -timeout 60m -v ./faults/

lint:
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "gofmt would change:"; echo "$$out"; exit 1; fi
	$(GO) vet $(PKGS)
	cd loadtest && $(GO) vet ./...

# Every fuzz target (template JSON, scenario files, transcripts, chat request bodies,
# Last-Event-ID values, provider streams, tool arguments, config files) for
# FUZZTIME each; fuzz-short, part of make test, gives each a fixed number of
# inputs instead (scripts/fuzz.sh says why).
fuzz:
	GO=$(GO) scripts/fuzz.sh $(FUZZTIME)

fuzz-short:
	GO=$(GO) scripts/fuzz.sh smoke

# The Dockerfile builds the same binary as make build (checked without Docker).
docker-check:
	scripts/docker-check.sh

clean:
	rm -rf bin

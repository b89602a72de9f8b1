#!/usr/bin/env bash
# Checks that the Dockerfile's build stage builds the same binary as
# `make build`, without Docker: it runs the stage's `go build` command here,
# with its output redirected, and compares the two binaries byte for byte.
set -euo pipefail
cd "$(dirname "$0")/.."
stage=$(awk '/^FROM .* AS build/{on=1; next} /^FROM /{on=0} on' Dockerfile)
cmd=$(printf '%s\n' "$stage" | sed -n 's/^RUN \(.*go build .*\)$/\1/p')
if [ -z "$cmd" ]; then
	echo "docker-check: no 'RUN ... go build' in the Dockerfile's build stage" >&2
	exit 1
fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
docker_cmd=${cmd//\/out\/agentdock/$tmp/docker-agentdock}
echo "build stage: $docker_cmd"
bash -c "$docker_cmd"
make --no-print-directory build >/dev/null
# The binary leaves out what the server never uses (docs/deploying.md, "The
# binary's size"): gin's MessagePack binding, by the nomsgpack tag.
if go version -m bin/agentdock | grep -q 'github.com/ugorji/go/codec'; then
	echo "docker-check: bin/agentdock links gin's MessagePack binding (github.com/ugorji/go/codec): build it with -tags nomsgpack" >&2
	exit 1
fi
if cmp -s "$tmp/docker-agentdock" bin/agentdock; then
	echo "docker-check: the build stage and make build produce the same binary ($(sha256sum bin/agentdock | cut -c1-16))"
else
	echo "docker-check: the build stage and make build produce different binaries" >&2
	exit 1
fi

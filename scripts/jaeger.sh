#!/usr/bin/env bash
# scripts/jaeger.sh
#
# Prints the path of the Jaeger v2 binary the Jaeger test runs (make test-jaeger,
# internal/jaegertest), building it first when it is not there yet. The version is
# the one internal/jaegertest/tool/go.mod pins (a module of its own, so that taskd's
# go.mod does not depend on Jaeger); the binary is kept in
# ${XDG_CACHE_HOME:-$HOME/.cache}/taskd/jaeger-VERSION/jaeger, so only the first run
# builds it (with $GO, else go; minutes on a fresh module cache, then nothing).
set -euo pipefail

tool=$(cd "$(dirname "$0")/../internal/jaegertest/tool" && pwd)
version=$(awk '$1 == "github.com/jaegertracing/jaeger" { sub(/^v/, "", $2); print $2 }' "$tool/go.mod")
if [[ -z $version ]]; then
	echo "jaeger.sh: no github.com/jaegertracing/jaeger in $tool/go.mod" >&2
	exit 1
fi
dir=${XDG_CACHE_HOME:-$HOME/.cache}/taskd/jaeger-$version
bin=$dir/jaeger

if [[ ! -x $bin ]]; then
	echo "building Jaeger $version into $dir (once)" >&2
	mkdir -p "$dir"
	start=$SECONDS
	# Built beside, then moved in place: an interrupted build leaves no binary behind.
	(cd "$tool" && "${GO:-go}" build -o "$bin.tmp" github.com/jaegertracing/jaeger/cmd/jaeger)
	mv "$bin.tmp" "$bin"
	echo "built Jaeger $version in $((SECONDS - start))s" >&2
fi
echo "$bin"

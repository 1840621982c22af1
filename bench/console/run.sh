#!/bin/sh
# The console with 1,000 limits (docs/console.md, BENCHMARKS.md): load time
# to fully drawn, payload bytes, and refresh time, in headless Chromium.
# Usage: sh bench/console/run.sh [BUILD_DIR]
# Environment: BENCH_LIMITS (1000), BENCH_BACKEND (memory), BENCH_RUNS (5).
# Needs Chromium and `npm ci` in tests/console (scripts/install-test-deps.sh, run by
# `make test` and `make bench`).
set -eu
BUILD=${1:-build}
HERE=$(cd "$(dirname "$0")" && pwd)
if [ ! -x "$BUILD/llmlimitd" ]; then
    echo "bench/console/run.sh: $BUILD/llmlimitd is not built (run make first)" >&2
    exit 1
fi
uptime
exec node "$HERE/measure.mjs" --binary "$BUILD/llmlimitd" --limits "${BENCH_LIMITS:-1000}" \
    --backend "${BENCH_BACKEND:-memory}" --runs "${BENCH_RUNS:-5}"

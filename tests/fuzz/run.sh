#!/bin/sh
# Runs every libFuzzer harness of a fuzz build for SECONDS seconds each,
# starting from the committed seed corpus (copied, so the committed one is not
# touched). Fails on the first crash; the crashing input is left in
# BUILD/fuzz-artifacts/ to be added to tests/fuzz/regressions/<harness>/.
# Usage: run.sh BUILD_DIR SECONDS
set -eu
build=${1:?usage: run.sh BUILD_DIR SECONDS}
seconds=${2:?usage: run.sh BUILD_DIR SECONDS}
here=$(cd "$(dirname "$0")" && pwd)
mkdir -p "$build/fuzz-artifacts"
# fuzz_registry rewrites limits.json with fsync on every input: use a tmpfs.
if [ -z "${TMPDIR:-}" ] && [ -d /dev/shm ] && [ -w /dev/shm ]; then
    export TMPDIR=/dev/shm
fi
for harness in $(ls "$here/corpus"); do
    binary="$build/fuzz_$harness"
    [ -x "$binary" ] || { echo "missing $binary (make fuzz)"; exit 1; }
    work="$build/fuzz-corpus/$harness"
    mkdir -p "$work"
    dict=""
    [ -f "$here/$harness.dict" ] && dict="-dict=$here/$harness.dict"
    echo "== fuzz_$harness for ${seconds}s"
    ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
        "$binary" -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 -print_final_stats=1 \
        -artifact_prefix="$build/fuzz-artifacts/$harness-" $dict "$work" "$here/corpus/$harness" \
        2>"$build/fuzz-$harness.log" || {
        tail -n 60 "$build/fuzz-$harness.log"
        echo "fuzz_$harness FAILED: input in $build/fuzz-artifacts/"
        exit 1
    }
    grep -E "stat::number_of_executed_units|cov:" "$build/fuzz-$harness.log" | tail -n 2
done
echo "fuzz-run: every harness ran ${seconds}s without a crash"

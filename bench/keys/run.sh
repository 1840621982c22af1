#!/bin/sh
# The Keys API's benchmark (figures printed, nothing asserted): gateway chat
# calls/s with 10 and with 100,000 keys of the Keys API (wrk and the
# project's generator, through bench/gateway/run.sh with
# bench/keys/gateway_hook.sh), then creates one after another and from
# several connections at once, and the time from a revoke to the key's first
# refusal (bench/keys/admin.py).
# Usage: sh bench/keys/run.sh [BUILD_DIR]
# Environment: those of bench/gateway/run.sh (BENCH_DURATION, BENCH_CONNECTIONS,
#   BENCH_ROUNDS, ...), BENCH_KEYS_COUNTS (10,100000), BENCH_KEYS_BACKEND
#   (sqlite: the creates' and revokes' backend), BENCH_KEYS_CREATES (10000),
#   BENCH_KEYS_CONNECTIONS (1,8,32: one run of the creates per count),
#   BENCH_KEYS_REVOKES (20).
set -eu
BUILD=${1:-build}
HERE=$(cd "$(dirname "$0")" && pwd)
BENCH_TARGETS=${BENCH_TARGETS:-keys} BENCH_GATEWAY_HOOK="$HERE/gateway_hook.sh" \
    sh "$HERE/../gateway/run.sh" "$BUILD"
python3 "$HERE/admin.py" --binary "$BUILD/llmlimitd" --backend "${BENCH_KEYS_BACKEND:-sqlite}" \
    --creates "${BENCH_KEYS_CREATES:-10000}" --connections "${BENCH_KEYS_CONNECTIONS:-1,8,32}" \
    --revokes "${BENCH_KEYS_REVOKES:-20}"

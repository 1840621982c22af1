#!/bin/sh
# `make bench`: the benchmarks of llmlimit, figures printed, nothing kept.
#   1. bench_backend: the memory and sqlite backends alone (no HTTP).
#   2. llmlimitd on the memory backend, driven over HTTP by `llmlimit bench`
#      with an RPM + TPM + monthly budget set: reserve and reserve+complete
#      at 50 connections, then the batch endpoint with 64 reserves per
#      request. Each run gets a fresh server, so none inherits another's holds.
# Usage: sh bench/run.sh BUILD_DIR
# Environment: BENCH_DURATION (seconds per run, 10), BENCH_CONNECTIONS (50),
#   BENCH_THREADS (load generator threads, 1), BENCH_BATCH_SIZE (64),
#   BENCH_WINDOW_SECONDS (of the rolling limits, 2),
#   BENCH_WRK=1 to also measure the reserve run with wrk (bench/wrk_reserve.lua),
#   BENCH_BACKEND (memory; sqlite for the durable default),
#   BENCH_IDS (uuidv7; random for UUIDv4-like lease ids),
#   BENCH_ONLY=reserve to run the HTTP reserve run alone (no backend-alone runs),
#   BENCH_ALERTS=1 to give the three limits alerts (docs/alerts.md; needs curl),
#   scanned every BENCH_ALERT_SCAN_MS (1000): the scanner's cost to the reserves.
set -eu

BUILD=${1:-build}
DURATION=${BENCH_DURATION:-10}
CONNECTIONS=${BENCH_CONNECTIONS:-50}
THREADS=${BENCH_THREADS:-1}
BATCH_SIZE=${BENCH_BATCH_SIZE:-64}
WINDOW=${BENCH_WINDOW_SECONDS:-2}
BACKEND=${BENCH_BACKEND:-memory}
ONLY=${BENCH_ONLY:-}
IDS=${BENCH_IDS:-uuidv7}
ALERTS=${BENCH_ALERTS:-0}
ALERT_SCAN_MS=${BENCH_ALERT_SCAN_MS:-1000}
HERE=$(cd "$(dirname "$0")" && pwd)
SERVER="$BUILD/llmlimitd"
CLI="$BUILD/llmlimit"
KEYS="bench:llm:rpm,bench:llm:tpm,bench:team:usd:month"
AMOUNTS="1,500,2500" # one request, 500 tokens, 2500 usd_micros

for binary in "$SERVER" "$CLI"; do
    if [ ! -x "$binary" ]; then
        echo "bench/run.sh: $binary is not built (run make first)" >&2
        exit 1
    fi
done

WORK=$(mktemp -d -t llmlimit-bench-XXXXXX)
SERVER_PID=""

stop_server() {
    if [ -n "$SERVER_PID" ]; then
        kill "$SERVER_PID" 2>/dev/null || true
        wait "$SERVER_PID" 2>/dev/null || true
        SERVER_PID=""
    fi
}

cleanup() {
    stop_server
    rm -rf "$WORK"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# Starts llmlimitd on a free loopback port and defines the limits; sets URL.
start_server() {
    rm -rf "$WORK/data"
    mkdir -p "$WORK/data"
    : >"$WORK/server.log"
    "$SERVER" --listen 127.0.0.1:0 --backend "$BACKEND" --data-dir "$WORK/data" \
        --alert-scan-ms "$ALERT_SCAN_MS" 2>"$WORK/server.log" &
    SERVER_PID=$!
    tries=0
    while ! grep -aq 'llmlimitd listening on' "$WORK/server.log"; do
        tries=$((tries + 1))
        if [ "$tries" -gt 100 ] || ! kill -0 "$SERVER_PID" 2>/dev/null; then
            echo "bench/run.sh: llmlimitd did not start:" >&2
            cat "$WORK/server.log" >&2
            exit 1
        fi
        sleep 0.1
    done
    URL="http://$(grep -ao 'llmlimitd listening on [0-9.]*:[0-9]*' "$WORK/server.log" |
        head -n 1 | sed 's/.* //')"
    # Capacities far above what a run can use: every reserve is decided on
    # its merits and allowed. The windows (and the budget timeout, 5 s at
    # least) are short so that holds expire as fast as they are taken: the
    # steady state of a long run, with expiry work in every reserve. With
    # 60 s windows a run over a million reserves/s would reach the memory
    # backend's bound on live holds (MEM_HOLDS_MAX, about 16.7 million)
    # within seconds, and every reserve after it would fail.
    "$CLI" --url "$URL" --compact limits put --key bench:llm:rpm --kind rolling \
        --capacity 1000000000000 --window-seconds "$WINDOW" --unit requests >/dev/null
    "$CLI" --url "$URL" --compact limits put --key bench:llm:tpm --kind rolling \
        --capacity 1000000000000000 --window-seconds "$WINDOW" --unit tokens >/dev/null
    "$CLI" --url "$URL" --compact limits put --key bench:team:usd:month --kind budget \
        --capacity 1000000000000000 --period month --timeout-seconds 5 \
        --unit usd_micros >/dev/null
    if [ "$ALERTS" = 1 ]; then
        # The same limits with alerts: the rolling ones fire once (full to
        # 1% for a window), the budget's runout is computed at every scan.
        for definition in \
            '"key":"bench:llm:rpm","kind":"rolling","capacity":1000000000000,"window_seconds":'"$WINDOW"',"unit":"requests","alerts":[{"at_percent":1},{"at_percent":80}]' \
            '"key":"bench:llm:tpm","kind":"rolling","capacity":1000000000000000,"window_seconds":'"$WINDOW"',"unit":"tokens","alerts":[{"at_percent":1},{"at_percent":80}]' \
            '"key":"bench:team:usd:month","kind":"budget","capacity":1000000000000000,"period":"month","timeout_seconds":5,"unit":"usd_micros","alerts":[{"at_percent":80},{"runout_before_period_end":true}]'; do
            curl -sf -X PUT "$URL/v1/admin/limits" -d "{$definition}" >/dev/null
        done
    fi
}

# run_bench TITLE MODE [EXTRA FLAGS...]
run_bench() {
    title=$1
    mode=$2
    shift 2
    echo
    echo "== $title"
    start_server
    "$CLI" --url "$URL" bench --mode "$mode" --keys "$KEYS" --amounts "$AMOUNTS" --ids "$IDS" \
        --connections "$CONNECTIONS" --threads "$THREADS" --duration "$DURATION" "$@" ||
        echo "(the run reported errors)"
    stop_server
}

# The reserve run again with wrk (BENCH_WRK=1), to check the generator is not the bottleneck.
run_wrk() {
    if [ "${BENCH_WRK:-0}" = 1 ] && command -v wrk >/dev/null 2>&1; then
        echo
        echo "== wrk, the same reserve, $CONNECTIONS connections (cross-check of the generator)"
        start_server
        (cd "$HERE" && BENCH_KEYS="$KEYS" BENCH_AMOUNTS="$AMOUNTS" \
            wrk -t1 -c"$CONNECTIONS" -d"${DURATION}s" --latency -s wrk_reserve.lua "$URL")
        stop_server
    fi
}

if [ "$ONLY" = reserve ]; then
    run_bench "HTTP reserve, $CONNECTIONS connections, $BACKEND" reserve
    run_wrk
    exit 0
fi

if [ -x "$BUILD/bench_backend" ]; then
    echo "== backends alone (bench_backend)"
    "$BUILD/bench_backend"
fi

run_bench "HTTP reserve, $CONNECTIONS connections, $BACKEND" reserve
run_bench "HTTP reserve + complete, $CONNECTIONS connections, $BACKEND" reserve-complete
run_bench "HTTP reserve batch, $BATCH_SIZE per request, $CONNECTIONS connections, $BACKEND" batch \
    --batch-size "$BATCH_SIZE"

run_wrk

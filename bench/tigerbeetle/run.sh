#!/bin/sh
# The tigerbeetle backend against the hand-written alternative, side by side
# on the same machine: each run gets a freshly formatted single-replica
# TigerBeetle 0.15.3 (data file on tmpfs), then either the tigerbeetle-node
# peer (bench/tigerbeetle/peer.mjs: 3 linked pending transfers per call) or
# llmlimitd --backend tigerbeetle driven over HTTP by `llmlimit bench` (an
# RPM + TPM + monthly budget per reserve). Runs alternate, PAIRS times.
# Figures printed, nothing kept.
# Usage: TIGERBEETLE_BIN=/path/to/tigerbeetle sh bench/tigerbeetle/run.sh [BUILD_DIR]
# Environment: BENCH_PAIRS (3), BENCH_DURATION (10), BENCH_CONNECTIONS (200),
#   BENCH_SESSIONS (--tb-sessions, 1), BENCH_ADDRESS_FILE_DIR (/dev/shm),
#   BENCH_FRONT_ENDS (1: llmlimitd processes on the cluster, connections split
#   between them).
set -eu

BUILD=${1:-build}
PAIRS=${BENCH_PAIRS:-3}
DURATION=${BENCH_DURATION:-10}
CONNECTIONS=${BENCH_CONNECTIONS:-200}
SESSIONS=${BENCH_SESSIONS:-1}
FRONT_ENDS=${BENCH_FRONT_ENDS:-1}
SHM=${BENCH_ADDRESS_FILE_DIR:-/dev/shm}
HERE=$(cd "$(dirname "$0")" && pwd)
TB=${TIGERBEETLE_BIN:-}
[ -n "$TB" ] && [ -x "$TB" ] || { echo "bench/tigerbeetle/run.sh: set TIGERBEETLE_BIN" >&2; exit 1; }
[ -d "$HERE/node_modules/tigerbeetle-node" ] ||
    npm ci --prefix "$HERE" --no-audit --no-fund --loglevel=error >&2

WORK=$(mktemp -d "$SHM/llmlimit-bench-tb-XXXXXX")
PIDS=""
cleanup() {
    for pid in $PIDS; do kill "$pid" 2>/dev/null || true; wait "$pid" 2>/dev/null || true; done
    rm -rf "$WORK"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

free_port() {
    python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0))
print(s.getsockname()[1])'
}

# A fresh cluster; sets TB_ADDRESS.
start_cluster() {
    stop_all
    rm -f "$WORK/0.tigerbeetle"
    "$TB" format --cluster=0 --replica=0 --replica-count=1 "$WORK/0.tigerbeetle" \
        >"$WORK/format.log" 2>&1
    port=$(free_port)
    "$TB" start --addresses="$port" --cache-grid=256MiB "$WORK/0.tigerbeetle" >"$WORK/tb.log" 2>&1 &
    PIDS="$PIDS $!"
    TB_ADDRESS="127.0.0.1:$port"
    until python3 -c "import socket; socket.create_connection(('127.0.0.1', $port), 1)" \
        2>/dev/null; do sleep 0.1; done
}

stop_all() {
    for pid in $PIDS; do kill "$pid" 2>/dev/null || true; wait "$pid" 2>/dev/null || true; done
    PIDS=""
}

run_peer() {
    node "$HERE/peer.mjs" "$TB_ADDRESS" --callers "$CONNECTIONS" --seconds "$DURATION" |
        python3 -c 'import json, sys; print(json.load(sys.stdin)["reserves_per_second"])'
}

# One llmlimitd (front end number $1) on the cluster, on a new data
# directory; sets URL. Not in a subshell: its pid must reach PIDS.
start_front_end() {
    port=$(free_port)
    rm -rf "$WORK/data$1"
    mkdir -p "$WORK/data$1"
    "$BUILD/llmlimitd" --listen "127.0.0.1:$port" --backend tigerbeetle --tb-addresses \
        "$TB_ADDRESS" --tb-sessions "$SESSIONS" --data-dir "$WORK/data$1" \
        >"$WORK/llmlimitd$1.log" 2>&1 &
    pid=$!
    PIDS="$PIDS $pid"
    until grep -q 'llmlimitd listening' "$WORK/llmlimitd$1.log"; do
        kill -0 "$pid" 2>/dev/null ||
            { echo "bench/tigerbeetle/run.sh: llmlimitd did not start:" >&2;
              cat "$WORK/llmlimitd$1.log" >&2; exit 1; }
        sleep 0.1
    done
    URL="http://127.0.0.1:$port"
}

put() {
    curl -sf -m 60 -X PUT "$1/v1/admin/limits" -d "$2" >/dev/null ||
        { echo "bench/tigerbeetle/run.sh: PUT $2 failed" >&2; exit 1; }
}

run_llmlimit() {
    urls=""
    i=0
    while [ "$i" -lt "$FRONT_ENDS" ]; do
        start_front_end "$i"
        urls="$urls $URL"
        i=$((i + 1))
    done
    # Each front end keeps its own limits.json (docs/tigerbeetle.md,
    # "Capacity changes"): the same definitions go to every one; the
    # cluster's accounts are made once. A fresh cluster provisions accounts
    # on the first put: allow it time.
    for url in $urls; do
        put "$url" '{"key":"bench:llm:rpm","kind":"rolling","capacity":1000000000000,"window_seconds":60,"unit":"requests"}'
        put "$url" '{"key":"bench:llm:tpm","kind":"rolling","capacity":1000000000000000,"window_seconds":60,"unit":"tokens"}'
        put "$url" '{"key":"bench:team:usd:month","kind":"budget","capacity":1000000000000000,"period":"month","timeout_seconds":60,"unit":"usd_micros"}'
    done
    per=$((CONNECTIONS / FRONT_ENDS))
    benches=""
    for url in $urls; do
        "$BUILD/llmlimit" --url "$url" bench --mode reserve --keys \
            bench:llm:rpm,bench:llm:tpm,bench:team:usd:month --amounts 1,500,2500 \
            --connections "$per" --duration "$DURATION" --json >"$WORK/bench.$(echo "$url" |
            tr -dc 0-9).json" 2>/dev/null &
        benches="$benches $!"
    done
    for pid in $benches; do wait "$pid" || true; done
    for url in $urls; do curl -s -m 10 "$url/metrics"; done >"$WORK/metrics"
    python3 - "$WORK" <<'PY'
import glob, json, sys
# Reserves granted per second: an answer that is not a grant (an error, a
# denial) is no reserve, and is counted apart.
total = 0.0
refused = 0
for path in glob.glob(sys.argv[1] + "/bench.*.json"):
    with open(path) as f:
        report = json.load(f)
    total += report["allowed"] / report["elapsed_seconds"]
    refused += report["denied"] + report["errors"] + report["connection_errors"]
batches = items = 0
for line in open(sys.argv[1] + "/metrics"):
    if line.startswith("llmlimit_backend_batches_total "):
        batches += float(line.split()[1])
    elif line.startswith("llmlimit_backend_batched_items_total "):
        items += float(line.split()[1])
fill = items / batches if batches else 0
print("%d (fill %.0f%s)" % (round(total), fill, ", %d not granted" % refused if refused else ""))
PY
    rm -f "$WORK"/bench.*.json
}

echo "== tigerbeetle-node peer vs llmlimitd (tigerbeetle backend, $FRONT_ENDS front end(s)," \
    "--tb-sessions $SESSIONS), $CONNECTIONS callers/connections, ${DURATION}s, fresh cluster each run"
printf "%-6s %14s %22s %8s\n" pair peer/s llmlimitd/s load1
pair=1
while [ "$pair" -le "$PAIRS" ]; do
    start_cluster
    peer=$(run_peer)
    start_cluster
    run_llmlimit >"$WORK/ours" # not in $(...): the front ends' pids must reach PIDS
    ours=$(cat "$WORK/ours")
    printf "%-6s %14s %22s %8s\n" "$pair" "$peer" "$ours" "$(cut -d' ' -f1 /proc/loadavg)"
    pair=$((pair + 1))
done
stop_all

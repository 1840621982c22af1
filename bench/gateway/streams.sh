#!/bin/sh
# The gateway holding many slow streams at once: a slow streaming upstream
# (bench/gateway/slow_upstream.mjs: 20 chunks, one every 250 ms), llmlimitd
# in gateway mode on the memory backend (4 limits per call, a lease cache of
# 4096 so the figure is the streams' own memory), and S streaming calls
# started together (bench/gateway/streams.mjs). Prints how many completed,
# the server's resident memory before and at the peak (per stream), and its
# thread count before and at the peak (no thread per stream).
# Usage: sh bench/gateway/streams.sh [BUILD_DIR]   Environment: BENCH_STREAMS (1000)
set -eu
BUILD=${1:-build}
STREAMS=${BENCH_STREAMS:-1000}
HERE=$(cd "$(dirname "$0")" && pwd)
WORK=$(mktemp -d -t llmlimit-bench-streams-XXXXXX)
PIDS=""
cleanup() {
    for pid in $PIDS; do kill "$pid" 2>/dev/null || true; wait "$pid" 2>/dev/null || true; done
    rm -rf "$WORK"
}
trap cleanup EXIT
free_port() {
    python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0))
print(s.getsockname()[1])'
}
upstream_port=$(free_port)
node "$HERE/slow_upstream.mjs" "$upstream_port" --chunks 20 --delay-ms 250 >"$WORK/up.log" 2>&1 &
PIDS="$PIDS $!"
until grep -q listening "$WORK/up.log"; do sleep 0.1; done
keys=$("$BUILD/llmlimit" gateway new-key)
secret=$(echo "$keys" | python3 -c 'import json, sys; print(json.load(sys.stdin)["secret"])')
digest=$(echo "$keys" | python3 -c 'import json, sys; print(json.load(sys.stdin)["sha256"])')
cat >"$WORK/gateway.json" <<JSON
{"upstreams":[{"name":"slow","base_url":"http://127.0.0.1:$upstream_port/v1","timeout_seconds":60}],
 "models":[{"name":"slow","upstream":"slow","upstream_model":"slow",
            "input_usd_micros_per_mtok":150000,"output_usd_micros_per_mtok":600000,
            "max_output_tokens":16384,"default_max_output_tokens":64}],
 "keys":[{"sha256":"$digest","caller":"bench","team":"bench"}],
 "limits":[{"key":"b:{model}:rpm","amount":"requests"},{"key":"b:{model}:tpm","amount":"tokens"},
           {"key":"b:{caller}:concurrent","amount":"requests"},
           {"key":"b:{team}:usd:month","amount":"usd_micros"}]}
JSON
mkdir -p "$WORK/data"
port=$(free_port)
"$BUILD/llmlimitd" --listen "127.0.0.1:$port" --backend memory --data-dir "$WORK/data" \
    --gateway-config "$WORK/gateway.json" --lease-cache-max 4096 >"$WORK/server.log" 2>&1 &
server=$!
PIDS="$PIDS $server"
until grep -q listening "$WORK/server.log"; do sleep 0.1; done
url="http://127.0.0.1:$port"
for limit in \
    '{"key":"b:slow:rpm","kind":"rolling","capacity":1000000,"window_seconds":60,"unit":"requests"}' \
    '{"key":"b:slow:tpm","kind":"rolling","capacity":100000000,"window_seconds":60,"unit":"tokens"}' \
    '{"key":"b:bench:concurrent","kind":"concurrency","capacity":100000,"timeout_seconds":120,"unit":"requests"}' \
    '{"key":"b:bench:usd:month","kind":"budget","capacity":100000000000,"period":"month","unit":"usd_micros"}'; do
    curl -sf -X PUT "$url/v1/admin/limits" -d "$limit" >/dev/null
done
echo "== $STREAMS slow streams at once through llmlimitd's gateway (memory backend)," \
    "load average $(cut -d' ' -f1-3 /proc/loadavg)"
node "$HERE/streams.mjs" "$url" "$secret" "$server" --streams "$STREAMS"

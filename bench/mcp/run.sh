#!/bin/sh
# shellcheck disable=SC2034 # PID_<target> are read through eval (cpu_ns)
# The MCP benchmark: a tools/call through llmlimitd's /mcp/{server} route
# (docs/mcp.md) against the same MCP server called directly, and through
# nginx as a plain reverse proxy (bench/mcp/nginx_proxy.conf.in: upstream
# keep-alive, the answer passed on unread), in the same run. Direct calls
# cross one HTTP hop and proxied ones two, so on a machine where the load
# generator, the proxy and the server share the cores, the proxy row is the
# floor for any proxy: the gateway is given as a share of it and of direct.
# The server is the test suite's, built with the official
# @modelcontextprotocol/sdk (tests/gateway/mcp/fake_mcp_server.mjs), in
# MCP's stateless mode (a new server for each POST, JSON answers), so that
# every connection may post the same tools/call. llmlimitd reserves and
# settles 3 limits per call on the memory backend (a team budget at the
# tool's price, a per-tool RPM, a caller's concurrency).
# Measured by the project's own generator (`llmlimit bench --mode post
# --header ...`) and by wrk (bench/gateway/wrk_surface.lua): p50 latency at
# 1 connection (what the gateway adds to one call) and calls/s at
# BENCH_CONNECTIONS (50), direct, through the proxy and through the gateway
# in turn, each round in the same order. Figures printed, nothing asserted,
# nothing kept.
# Usage: sh bench/mcp/run.sh [BUILD_DIR [BASELINE_BUILD_DIR]]
#   BASELINE_BUILD_DIR: a second llmlimitd, from another build (an earlier
#   commit's), run beside the first with the same config; its rows
#   ("baseline") alternate with the gateway's in every round, so a change
#   is measured before and after under the same load.
# Environment: BENCH_MCP_SERVER (sdk: the SDK's server above; nginx: nginx
#   answering the same result at once, bench/mcp/nginx.conf.in, a floor fast
#   enough that what the gateway adds shows),
#   BENCH_DURATION (seconds per run, 5), BENCH_CONNECTIONS (50),
#   BENCH_ROUNDS (2), BENCH_TOOLS (loadgen,wrk), BENCH_WARMUP (seconds, 2),
#   BENCH_SINGLE (1: also the runs at 1 connection; 0: only the many),
#   BENCH_MCP_PROXY (1: the nginx proxy's rows; 0: none),
#   BENCH_MCP_STREAM=1: the server answers event streams, not JSON.
# Needs node and the SDK (sh scripts/install-test-deps.sh BUILD_DIR); wrk and
# nginx (the proxy, the nginx server) are installed with apt-get when run as
# root.
set -eu

BUILD=${1:-build}
BASELINE=${2:-}
DURATION=${BENCH_DURATION:-5}
CONNECTIONS=${BENCH_CONNECTIONS:-50}
ROUNDS=${BENCH_ROUNDS:-2}
TOOLS=${BENCH_TOOLS:-loadgen,wrk}
WARMUP=${BENCH_WARMUP:-2}
SINGLE=${BENCH_SINGLE:-1}
PROXY=${BENCH_MCP_PROXY:-1}
NGINX=/usr/sbin/nginx
HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(cd "$HERE/../.." && pwd)
. "$HERE/../need.sh"
SERVER_SCRIPT="$ROOT/tests/gateway/mcp/fake_mcp_server.mjs"
SERVER_SECRET=mcp-server-secret # the fake server's credential
PRICE=5000

WORK=$(mktemp -d -t llmlimit-bench-mcp-XXXXXX)
PIDS=""

cleanup() {
    for pid in $PIDS; do
        kill "$pid" 2>/dev/null || true
        wait "$pid" 2>/dev/null || true
    done
    rm -rf "$WORK"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

fail() {
    echo "bench/mcp/run.sh: $*" >&2
    exit 1
}

command -v node >/dev/null 2>&1 || fail "node is missing"
case ",$TOOLS," in *,wrk,*) need wrk wrk ;; esac
[ -d "$ROOT/tests/gateway/mcp/node_modules/@modelcontextprotocol/sdk" ] ||
    fail "the SDK is missing: sh scripts/install-test-deps.sh $BUILD"
[ -x "$BUILD/llmlimitd" ] && [ -x "$BUILD/llmlimit" ] || fail "$BUILD/llmlimitd is not built"
[ -z "$BASELINE" ] || [ -x "$BASELINE/llmlimitd" ] || fail "$BASELINE/llmlimitd is not built"
if [ "${BENCH_MCP_SERVER:-sdk}" = nginx ] || [ "$PROXY" = 1 ]; then
    need "$NGINX" nginx
    . "$HERE/../nginx_conf.sh"
fi

free_port() {
    python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0))
print(s.getsockname()[1])'
}

# wait_line FILE TEXT: until FILE holds TEXT (60 s at most: a busy machine starts node slowly).
wait_line() {
    tries=0
    until grep -q "$2" "$1" 2>/dev/null; do
        tries=$((tries + 1))
        [ "$tries" -le 600 ] || { cat "$1" >&2; fail "no '$2' in $1"; }
        sleep 0.1
    done
}

# -- the MCP server and llmlimitd in front of it ----------------------------

json_flag=--json
answers=JSON
if [ "${BENCH_MCP_STREAM:-0}" = 1 ]; then
    json_flag=""
    answers=event-stream
fi
if [ "${BENCH_MCP_SERVER:-sdk}" = nginx ]; then
    MCP_PORT=$(free_port)
    nginx_conf "$HERE/nginx.conf.in" "$WORK/nginx" "$MCP_PORT"
    "$NGINX" -p "$WORK/nginx" -c "$WORK/nginx/nginx.conf" -e "$WORK/nginx/error.log" \
        2>"$WORK/mcp.log" &
    PIDS="$PIDS $!"
    until curl -s -o /dev/null "http://127.0.0.1:$MCP_PORT/"; do sleep 0.1; done
    PID_direct=$(pgrep -P "$!" | head -1) # its one worker
    SERVER_NAME="nginx, a fixed JSON result"
else
    (cd "$ROOT/tests/gateway/mcp" && exec node "$SERVER_SCRIPT" --stateless $json_flag) \
        2>"$WORK/mcp.log" &
    PIDS="$PIDS $!"
    PID_direct=$!
    wait_line "$WORK/mcp.log" "listening on"
    MCP_PORT=$(awk '/listening on/ {print $NF; exit}' "$WORK/mcp.log")
    SERVER_NAME="the SDK's, stateless, $answers answers"
fi
DIRECT="http://127.0.0.1:$MCP_PORT"

# The nginx proxy in front of the same server.
PROXY_URL=""
if [ "$PROXY" = 1 ]; then
    PROXY_PORT=$(free_port)
    nginx_conf "$HERE/nginx_proxy.conf.in" "$WORK/proxy" "$PROXY_PORT" "127.0.0.1:$MCP_PORT"
    "$NGINX" -p "$WORK/proxy" -c "$WORK/proxy/nginx.conf" -e "$WORK/proxy/error.log" \
        2>"$WORK/proxy.log" &
    PIDS="$PIDS $!"
    until curl -s -o /dev/null "http://127.0.0.1:$PROXY_PORT/"; do sleep 0.1; done
    PID_proxy=$(pgrep -P "$!" | head -1)
    PROXY_URL="http://127.0.0.1:$PROXY_PORT"
fi

keys=$("$BUILD/llmlimit" --compact gateway new-key)
SECRET=$(echo "$keys" | cut -d'"' -f4)
SHA256=$(echo "$keys" | cut -d'"' -f8)
cat >"$WORK/gateway.json" <<JSON
{"upstreams":[{"name":"none","base_url":"http://127.0.0.1:9/v1"}],
 "models":[{"name":"none","upstream":"none","input_usd_micros_per_mtok":1,
            "output_usd_micros_per_mtok":1,"max_output_tokens":16,
            "default_max_output_tokens":16}],
 "mcp_servers":[{"name":"search","url":"$DIRECT/mcp","api_key_env":"BENCH_MCP_KEY",
                 "tools":[{"name":"web_search","usd_micros_per_call":$PRICE}]}],
 "keys":[{"sha256":"$SHA256","caller":"bench","team":"bench"}],
 "limits":[{"key":"bench:{team}:usd:month","amount":"usd_micros"},
           {"key":"bench:{mcp_server}:{tool}:rpm","amount":"requests"},
           {"key":"bench:{caller}:concurrent","amount":"requests"}]}
JSON

# start_gateway NAME BUILD_DIR: llmlimitd from BUILD_DIR with the config
# above and its limits, at $GATEWAY_URL, its process $GATEWAY_PID.
start_gateway() {
    mkdir -p "$WORK/$1"
    port=$(free_port)
    BENCH_MCP_KEY=$SERVER_SECRET "$2/llmlimitd" --listen "127.0.0.1:$port" --backend memory \
        --data-dir "$WORK/$1" --gateway-config "$WORK/gateway.json" 2>"$WORK/$1.log" &
    PIDS="$PIDS $!"
    GATEWAY_PID=$!
    wait_line "$WORK/$1.log" "listening on"
    GATEWAY_URL="http://127.0.0.1:$port"
    gcli="$BUILD/llmlimit --url $GATEWAY_URL --compact"
    $gcli limits put --key bench:bench:usd:month --kind budget --capacity 1000000000000000 \
        --period month --timeout-seconds 30 --unit usd_micros >/dev/null
    $gcli limits put --key bench:search:web_search:rpm --kind rolling --capacity 1000000000000 \
        --window-seconds 2 --unit requests >/dev/null
    $gcli limits put --key bench:bench:concurrent --kind concurrency --capacity 100000 \
        --timeout-seconds 30 --unit requests >/dev/null
}
start_gateway gateway "$BUILD"
GATEWAY=$GATEWAY_URL
PID_gateway=$GATEWAY_PID
BASELINE_URL=""
if [ -n "$BASELINE" ]; then
    start_gateway baseline "$BASELINE"
    BASELINE_URL=$GATEWAY_URL
    PID_baseline=$GATEWAY_PID
fi
cli="$BUILD/llmlimit --url $GATEWAY --compact"

BODY='{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"web_search","arguments":{"query":"llmlimit"}}}'
printf '%s' "$BODY" >"$WORK/body.json"
ACCEPT="Accept: application/json, text/event-stream"
VERSION="MCP-Protocol-Version: 2025-06-18"

# check TITLE URL PATH TOKEN: one call must answer the tool's result.
check() {
    answer=$(curl -s -X POST "$2$3" -H "Authorization: Bearer $4" -H "$ACCEPT" -H "$VERSION" \
        -H "Content-Type: application/json" --data-binary "$BODY")
    case $answer in
    *'results for llmlimit'*) ;;
    *) fail "$1: the check call answered: $answer" ;;
    esac
}
check direct "$DIRECT" /mcp "$SERVER_SECRET"
check gateway "$GATEWAY" /mcp/search "$SECRET"
[ -z "$PROXY_URL" ] || check proxy "$PROXY_URL" /mcp "$SERVER_SECRET"
[ -z "$BASELINE_URL" ] || check baseline "$BASELINE_URL" /mcp/search "$SECRET"
before=$($cli usage bench:bench:usd:month | python3 -c 'import json,sys; print(json.load(sys.stdin)["used"])')
[ "$before" = "$PRICE" ] || fail "the check call through the gateway charged $before, not $PRICE"

# -- runs --------------------------------------------------------------------

: >"$WORK/table"
add_row() { # TARGET TOOL CONNECTIONS CALLS_PER_S P50_MS P99_MS ERRORS CPU_US LOAD
    printf "%-8s %-8s %5s %10.0f %9.3f %9.3f %7d %7.1f %6s\n" "$@" >>"$WORK/table"
}

# The CPU time the target's process has used (ns, all its threads: the
# scheduler's own count). Per call, it is what a target costs the machine
# whatever else runs on it: a figure that holds on a shared machine, where
# calls/s swing with the others' load.
cpu_ns() { # TARGET
    eval "pid=\${PID_$1:-}"
    [ -n "$pid" ] || { echo 0; return; }
    cat /proc/"$pid"/task/*/schedstat 2>/dev/null | awk '{ns += $1} END {printf "%.0f\n", ns}'
}

# cpu_per_call TARGET NS_BEFORE CALLS_PER_S: µs of the target's CPU per call.
cpu_per_call() {
    python3 -c 'import sys; ns, rate, seconds = map(float, sys.argv[1:])
print("%.1f" % ((ns / 1000) / (rate * seconds)) if rate > 0 and ns > 0 else 0)' \
        "$(($(cpu_ns "$1") - $2))" "$3" "$DURATION"
}

run_loadgen() { # TARGET URL PATH TOKEN CONNECTIONS
    load=$(cut -d' ' -f1 /proc/loadavg)
    lg() { # SECONDS [MORE FLAGS]
        seconds=$1
        shift
        LLMLIMIT_TOKEN="$token" "$BUILD/llmlimit" --url "$url" --compact bench --mode post \
            --path "$path" --body-file "$WORK/body.json" --header "$ACCEPT" --header "$VERSION" \
            --connections "$conns" --threads 1 --quiet --duration "$seconds" "$@"
    }
    url=$2 path=$3 token=$4 conns=$5
    [ "$WARMUP" -le 0 ] || lg "$WARMUP" >/dev/null 2>&1 || true
    cpu=$(cpu_ns "$1")
    lg "$DURATION" --json >"$WORK/lg.out" 2>&1 || true
    row=$(python3 -c 'import json, sys
r = json.loads(open(sys.argv[1]).read().strip().splitlines()[-1])
print(r["requests_per_second"], r["latency_ms"]["p50"], r["latency_ms"]["p99"],
      r["errors"] + r["connection_errors"])' "$WORK/lg.out") || { cat "$WORK/lg.out"; row="0 0 0 1"; }
    # shellcheck disable=SC2086
    add_row "$1" loadgen "$5" $row "$(cpu_per_call "$1" "$cpu" "${row%% *}")" "$load"
}

run_wrk() { # TARGET URL PATH TOKEN CONNECTIONS
    load=$(cut -d' ' -f1 /proc/loadavg)
    w() {
        (cd "$ROOT/bench/gateway" && BENCH_PATH="$3" BENCH_BODY="$BODY" \
            BENCH_HEADERS="Authorization: Bearer $4;$ACCEPT;$VERSION" \
            wrk -t1 -c"$5" -d"$6" --latency -s wrk_surface.lua "$2")
    }
    [ "$WARMUP" -le 0 ] || w "$@" "${WARMUP}s" >/dev/null 2>&1 || true
    cpu=$(cpu_ns "$1")
    w "$@" "${DURATION}s" >"$WORK/wrk.out" 2>&1 || true
    row=$(awk '
        function ms(text) {
            if (text ~ /us$/) return text / 1000
            if (text ~ /ms$/) return text + 0
            if (text ~ /s$/) return text * 1000
            return -1
        }
        $1 == "50%" { p50 = ms($2) }
        $1 == "99%" { p99 = ms($2) }
        $1 == "Requests/sec:" { rate = $2 }
        /Non-2xx or 3xx responses:/ { bad += $NF }
        /Socket errors:/ {
            for (i = 3; i <= NF; i++) { gsub(",", "", $i); if ($i ~ /^[0-9]+$/) bad += $i }
        }
        END { print rate + 0, p50 + 0, p99 + 0, bad + 0 }
    ' "$WORK/wrk.out")
    # shellcheck disable=SC2086
    add_row "$1" wrk "$5" $row "$(cpu_per_call "$1" "$cpu" "${row%% *}")" "$load"
}

round=1
counts="$CONNECTIONS"
[ "$SINGLE" != 1 ] || counts="1 $CONNECTIONS"
while [ "$round" -le "$ROUNDS" ]; do
    for connections in $counts; do
        for tool in $(echo "$TOOLS" | tr ',' ' '); do
            echo "round $round, $connections connection(s), $tool: direct," \
                "${PROXY_URL:+proxy, }${BASELINE_URL:+baseline, }gateway" >&2
            "run_$tool" direct "$DIRECT" /mcp "$SERVER_SECRET" "$connections"
            [ -z "$PROXY_URL" ] ||
                "run_$tool" proxy "$PROXY_URL" /mcp "$SERVER_SECRET" "$connections"
            [ -z "$BASELINE_URL" ] ||
                "run_$tool" baseline "$BASELINE_URL" /mcp/search "$SECRET" "$connections"
            "run_$tool" gateway "$GATEWAY" /mcp/search "$SECRET" "$connections"
        done
    done
    round=$((round + 1))
done

used=$($cli usage bench:bench:usd:month | python3 -c 'import json,sys; print(json.load(sys.stdin)["used"])')
echo
echo "== MCP benchmark: tools/call, $(nproc) cores, ${DURATION}s per run, $ROUNDS rounds," \
    "load average now $(cut -d' ' -f1-3 /proc/loadavg)"
echo "   server: $SERVER_NAME;" \
    "gateway: llmlimitd memory, 3 limits per call; $((used / PRICE)) tool calls charged"
[ -z "$PROXY_URL" ] || echo "   proxy: nginx, 1 worker, upstream keep-alive (the floor for a proxy)"
if [ -n "$BASELINE_URL" ]; then
    used=$($BUILD/llmlimit --url "$BASELINE_URL" --compact usage bench:bench:usd:month |
        python3 -c 'import json,sys; print(json.load(sys.stdin)["used"])')
    echo "   baseline: $BASELINE/llmlimitd beside $BUILD/llmlimitd, same config;" \
        "$((used / PRICE)) tool calls charged"
fi
echo "   cpu_us: the target's own CPU per call (direct: the server's; proxy: the proxy's)"
printf "%-8s %-8s %5s %10s %9s %9s %7s %7s %6s\n" target tool conns calls/s p50_ms p99_ms errors \
    cpu_us load1
cat "$WORK/table"
python3 - "$WORK/table" "$CONNECTIONS" <<'PY'
import sys
rows = [line.split() for line in open(sys.argv[1])]
many = sys.argv[2]
print()
for tool in sorted({r[1] for r in rows}):
    def pick(target, conns, column):
        return [float(r[column]) for r in rows
                if r[0] == target and r[1] == tool and r[2] == conns]
    def shares(over, under):
        pairs = zip(pick(under, many, 3), pick(over, many, 3))
        return " / ".join("%.0f%%" % (100 * o / u) for u, o in pairs if u > 0)
    for target in [t for t in ("proxy", "baseline", "gateway") if pick(t, many, 3)]:
        added = [g - d for d, g in zip(pick("direct", "1", 4), pick(target, "1", 4))]
        line = "%-8s %-8s" % (tool, target)
        if added:
            line += " added p50 at 1 connection: %s ms;" % " / ".join("%.3f" % a for a in added)
        line += " calls/s at %s, share of direct: %s" % (many, shares(target, "direct"))
        if target != "proxy" and pick("proxy", many, 3):
            line += ", of the proxy: %s" % shares(target, "proxy")
        line += "; CPU per call: %s us" % " / ".join("%.1f" % c for c in pick(target, many, 7))
        print(line)
PY

#!/bin/sh
# The gateway benchmark: calls/s and latency of one call through each
# gateway, all with nginx serving fixed answers as the upstream
# (bench/gateway/nginx.conf.in), measured by wrk (bench/gateway/wrk_surface.lua)
# and by the project's own generator (`llmlimit bench --mode post`), the same
# request for every target. Figures printed, nothing asserted, nothing kept.
# Targets:
#   nginx    wrk -> nginx: the ceiling of the machine, no gateway at all
#   portkey  wrk -> Portkey AI gateway (npm @portkey-ai/gateway, which
#            enforces no limits) -> nginx, as an OpenAI provider with a
#            custom host (chat completions)
#   llmlimit-memory, llmlimit-sqlite
#            -> llmlimitd in gateway mode -> nginx, reserving and settling 4
#            limits per call (RPM, TPM, a concurrency cap and a monthly
#            budget) on that backend, for each surface of BENCH_SURFACES:
#            chat, chat-stream, messages, messages-stream, responses,
#            responses-stream, gemini (Anthropic Messages, OpenAI Responses
#            and Gemini generateContent on upstreams of their dialect;
#            -stream: "stream": true, nginx answering an event stream with
#            its usage)
# Usage: sh bench/gateway/run.sh [BUILD_DIR]
# Environment: BENCH_DURATION (seconds per run, 10), BENCH_CONNECTIONS (50),
#   BENCH_THREADS (wrk threads, 1), BENCH_WARMUP (seconds of unmeasured load
#   before each run, 3: a JIT-compiled gateway starts slow), BENCH_TARGETS
#   (nginx,portkey,llmlimit-memory,llmlimit-sqlite), BENCH_SURFACES (on
#   memory every surface above, on sqlite chat), BENCH_TOOLS (wrk,loadgen;
#   nginx and Portkey: wrk only), BENCH_ROUNDS (2: the surfaces run in turn,
#   then again in the same order, so that a slow spell of a shared machine
#   falls on all of them),
#   BENCH_LLMLIMITD_ARGS (more flags for llmlimitd, e.g. --threads 1),
#   BENCH_INSTRUCTIONS=1: llmlimitd runs under valgrind's callgrind and the
#   table's last column is the instructions it executed per call (our
#   generator only), which the machine's load does not move: the way to
#   compare two builds on a shared machine (slow: use BENCH_CONNECTIONS=1
#   and a few seconds; calls/s are then callgrind's, not llmlimitd's),
#   BENCH_PORTKEY_VERSION (1.15.2), BENCH_PORTKEY_DIR (where it is installed
#   with npm; BUILD_DIR/bench-gateway/portkey),
#   BENCH_GATEWAY_HOOK=FILE: a shell file sourced after the targets above,
#   to add targets without editing this one (it can use everything below:
#   start_process, stop_process, free_port, run_target, NGINX_URL, WORK).
# Needs nginx, wrk (installed with apt-get when run as root), node and npm.
set -eu

BUILD=${1:-build}
DURATION=${BENCH_DURATION:-10}
CONNECTIONS=${BENCH_CONNECTIONS:-50}
THREADS=${BENCH_THREADS:-1}
WARMUP=${BENCH_WARMUP:-3}
TARGETS=${BENCH_TARGETS:-nginx,portkey,llmlimit-memory,llmlimit-sqlite}
SURFACES=${BENCH_SURFACES:-}
TOOLS=${BENCH_TOOLS:-wrk,loadgen}
[ "${BENCH_INSTRUCTIONS:-0}" = 1 ] && TOOLS=${BENCH_TOOLS:-loadgen}
ROUNDS=${BENCH_ROUNDS:-2}
PORTKEY_VERSION=${BENCH_PORTKEY_VERSION:-1.15.2}
PORTKEY_DIR=${BENCH_PORTKEY_DIR:-$BUILD/bench-gateway/portkey}
HERE=$(cd "$(dirname "$0")" && pwd)
. "$HERE/../nginx_conf.sh"
. "$HERE/../need.sh"
NGINX=/usr/sbin/nginx
MODEL=gpt-4o-mini

WORK=$(mktemp -d -t llmlimit-bench-gateway-XXXXXX)
PIDS="" # "name:pid" of every process started here

# -- processes -----------------------------------------------------------

cleanup() {
    for entry in $PIDS; do
        kill "${entry#*:}" 2>/dev/null || true
        wait "${entry#*:}" 2>/dev/null || true
    done
    rm -rf "$WORK"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

fail() {
    echo "bench/gateway/run.sh: $*" >&2
    exit 1
}

free_port() {
    python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0))
print(s.getsockname()[1])'
}

# start_process NAME PORT COMMAND...: runs COMMAND in the background, its
# output in $WORK/NAME.log, and waits until 127.0.0.1:PORT accepts.
start_process() {
    name=$1
    port=$2
    shift 2
    "$@" >"$WORK/$name.log" 2>&1 &
    PIDS="$PIDS $name:$!"
    tries=0
    until python3 -c "import socket, sys; socket.create_connection(('127.0.0.1', $port), 1)" \
        2>/dev/null; do
        tries=$((tries + 1))
        if [ "$tries" -gt 300 ] || ! kill -0 "$!" 2>/dev/null; then
            cat "$WORK/$name.log" >&2
            fail "$name did not start"
        fi
        sleep 0.1
    done
}

stop_process() {
    kept=""
    for entry in $PIDS; do
        if [ "${entry%%:*}" = "$1" ]; then
            kill "${entry#*:}" 2>/dev/null || true
            wait "${entry#*:}" 2>/dev/null || true
        else
            kept="$kept $entry"
        fi
    done
    PIDS=$kept
}

# The request of each surface: its path and body ($MODEL for chat and
# responses, claude-bench for messages; a -stream surface asks "stream": true
# of the model of the same name with "-stream", whose upstream answers event
# streams).
surface_path() {
    case $1 in
    chat | chat-stream) echo /v1/chat/completions ;;
    messages | messages-stream) echo /v1/messages ;;
    responses | responses-stream) echo /v1/responses ;;
    gemini) echo /v1beta/models/gemini-bench:generateContent ;;
    *) fail "unknown surface $1" ;;
    esac
}

surface_body() {
    stream=""
    suffix=""
    case $1 in *-stream)
        stream=',"stream":true'
        suffix="-stream"
        ;;
    esac
    brief='"You are brief."'
    ask='"Say hello in one short sentence."'
    case $1 in
    chat*)
        echo "{\"model\":\"$MODEL$suffix\",\"messages\":[{\"role\":\"system\",\"content\":$brief}," \
            "{\"role\":\"user\",\"content\":$ask}],\"max_tokens\":32$stream}" ;;
    messages*)
        echo "{\"model\":\"claude-bench$suffix\",\"max_tokens\":32,\"system\":$brief," \
            "\"messages\":[{\"role\":\"user\",\"content\":$ask}]$stream}" ;;
    responses*)
        echo "{\"model\":\"$MODEL$suffix\",\"instructions\":$brief,\"input\":$ask," \
            "\"max_output_tokens\":32$stream}" ;;
    gemini)
        echo "{\"systemInstruction\":{\"parts\":[{\"text\":$brief}]},\"contents\":[{\"role\":" \
            "\"user\",\"parts\":[{\"text\":$ask}]}],\"generationConfig\":{\"maxOutputTokens\":32}}" ;;
    esac
}

# check_call TITLE URL HEADERS SURFACE: one call before measuring; a run that
# measures errors would be worthless, so a call that gets no whole answer (a
# 200 with its usage, or a stream to its end) stops here.
check_call() {
    answer=$(BENCH_HEADERS="$3" BENCH_PATH=$(surface_path "$4") BENCH_BODY=$(surface_body "$4") \
        python3 "$HERE/check_call.py" "$2") || fail "$1: the check call failed"
    case $answer in
    "200 21" | "200 stream") ;;
    *) fail "$1: the check call answered '$answer', not '200 21' or a whole stream" ;;
    esac
}

# The CPU time (user + system, in clock ticks) CPU_PID has used so far: the
# gateway's own, read around each measured run so that the table gives its
# CPU microseconds per call, which a shared machine's other work moves far
# less than calls/s. CPU_PID is set while an llmlimitd target runs.
CPU_PID=""
TICKS_PER_S=$(getconf CLK_TCK)
cpu_ticks() {
    if [ -n "$CPU_PID" ] && [ -r "/proc/$CPU_PID/stat" ]; then
        # fields 14 and 15 after the command's parenthesis
        sed 's/.*) //' "/proc/$CPU_PID/stat" | awk '{ print $12 + $13 }'
    else
        echo ""
    fi
}

INSTRUCTIONS=${BENCH_INSTRUCTIONS:-0}
IR_PER_CALL="" # set by run_loadgen in BENCH_INSTRUCTIONS mode

# add_row TITLE TOOL CALLS_PER_S P50_MS P99_MS ERRORS LOAD: with the
# gateway's CPU per call when TICKS_BEFORE and TICKS_AFTER were read, or its
# instructions per call (BENCH_INSTRUCTIONS).
add_row() {
    cpu="-"
    if [ "$INSTRUCTIONS" = 1 ]; then
        cpu=${IR_PER_CALL:--}
    elif [ -n "${TICKS_BEFORE:-}" ] && [ -n "${TICKS_AFTER:-}" ]; then
        cpu=$(awk -v b="$TICKS_BEFORE" -v a="$TICKS_AFTER" -v r="$3" -v d="$DURATION" \
            -v t="$TICKS_PER_S" 'BEGIN { n = r * d; if (n > 0) printf "%.1f", (a - b) / t * 1e6 / n; else print "-" }')
    fi
    printf "%-44s %-7s %10.0f %10.2f %10.2f %8d %6s %9s\n" "$1" "$2" "$3" "$4" "$5" "$6" "$7" \
        "$cpu" >>"$WORK/table"
}

# run_wrk TITLE URL HEADERS SURFACE: one wrk run; its figures go into the
# table. HEADERS is "Name: value;Name: value" (may be empty).
run_wrk() {
    load=$(cut -d' ' -f1 /proc/loadavg)
    out="$WORK/wrk.out"
    path=$(surface_path "$4")
    body=$(surface_body "$4")
    if [ "$WARMUP" -gt 0 ]; then
        (cd "$HERE" && BENCH_HEADERS="$3" BENCH_PATH="$path" BENCH_BODY="$body" wrk \
            -t"$THREADS" -c"$CONNECTIONS" -d"${WARMUP}s" -s wrk_surface.lua "$2") \
            >/dev/null 2>&1 || true
    fi
    TICKS_BEFORE=$(cpu_ticks)
    (cd "$HERE" && BENCH_HEADERS="$3" BENCH_PATH="$path" BENCH_BODY="$body" wrk -t"$THREADS" \
        -c"$CONNECTIONS" -d"${DURATION}s" --latency -s wrk_surface.lua "$2") >"$out" 2>&1 || true
    TICKS_AFTER=$(cpu_ticks)
    cat "$out"
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
    ' "$out")
    # shellcheck disable=SC2086
    add_row "$1" wrk $row "$load"
}

# run_loadgen TITLE URL TOKEN SURFACE: the same with `llmlimit bench --mode
# post`, which sends the token as a bearer (and Content-Type) only.
run_loadgen() {
    load=$(cut -d' ' -f1 /proc/loadavg)
    surface_body "$4" >"$WORK/body.json"
    path=$(surface_path "$4")
    bench_url=$2
    bench_token=$3
    bench() {
        LLMLIMIT_TOKEN="$bench_token" "$BUILD/llmlimit" --url "$bench_url" --compact bench \
            --mode post --path "$path" --body-file "$WORK/body.json" \
            --connections "$CONNECTIONS" --threads "$THREADS" --quiet "$@"
    }
    if [ "$WARMUP" -gt 0 ]; then
        bench --duration "$WARMUP" >/dev/null 2>&1 || true
    fi
    [ "$INSTRUCTIONS" = 1 ] && callgrind_control -z "$CPU_PID" >/dev/null
    TICKS_BEFORE=$(cpu_ticks)
    bench --duration "$DURATION" --json >"$WORK/loadgen.out" 2>&1 || true
    TICKS_AFTER=$(cpu_ticks)
    IR_PER_CALL=""
    if [ "$INSTRUCTIONS" = 1 ]; then
        callgrind_control -d "$CPU_PID" >/dev/null
        # the newest dump holds what ran since the -z above
        dump=$(ls -t "$WORK"/callgrind.out.* | head -n 1)
        IR_PER_CALL=$(python3 -c 'import json, sys
r = json.loads(open(sys.argv[1]).read().strip().splitlines()[-1])
calls = r["allowed"] + r["denied"] + r["errors"]
ir = [int(l.split()[1]) for l in open(sys.argv[2]) if l.startswith(("totals:", "summary:"))][0]
print("%.0f" % (ir / calls) if calls else "-")' "$WORK/loadgen.out" "$dump") || IR_PER_CALL=""
    fi
    cat "$WORK/loadgen.out"
    row=$(python3 -c 'import json, sys
r = json.loads(open(sys.argv[1]).read().strip().splitlines()[-1])
print(r["requests_per_second"], r["latency_ms"]["p50"], r["latency_ms"]["p99"],
      r["errors"] + r["connection_errors"])' "$WORK/loadgen.out") || row="0 0 0 1"
    # shellcheck disable=SC2086
    add_row "$1" loadgen $row "$load"
}

# run_target TITLE URL HEADERS [SURFACE [TOKEN]]: a check call, then a run
# with wrk, and one with the project's generator when a TOKEN is given (both
# as BENCH_TOOLS allows).
run_target() {
    surface=${4:-chat}
    check_call "$1" "$2" "$3" "$surface"
    echo
    echo "== $1 ($2), $CONNECTIONS connections, ${DURATION}s," \
        "load average $(cut -d' ' -f1-3 /proc/loadavg)"
    case ",$TOOLS," in *,wrk,*) run_wrk "$1" "$2" "$3" "$surface" ;; esac
    if [ -n "${5:-}" ]; then
        case ",$TOOLS," in *,loadgen,*) run_loadgen "$1" "$2" "$5" "$surface" ;; esac
    fi
}

print_table() {
    echo
    echo "== gateway benchmark: $CONNECTIONS connections, ${DURATION}s each, wrk -t$THREADS," \
        "$(nproc) cores, load average now $(cut -d' ' -f1-3 /proc/loadavg)"
    last=cpu_us
    [ "$INSTRUCTIONS" = 1 ] && last=instr/call
    printf "%-44s %-7s %10s %10s %10s %8s %6s %9s\n" target tool calls/s p50_ms p99_ms errors \
        load1 "$last"
    cat "$WORK/table"
}

wanted() {
    case ",$TARGETS," in *",$1,"*) return 0 ;; esac
    return 1
}

# -- the upstream and the peers ----------------------------------------------

start_nginx() {
    need "$NGINX" nginx
    port=$(free_port)
    nginx_conf "$HERE/nginx.conf.in" "$WORK/nginx" "$port"
    start_process nginx "$port" "$NGINX" -p "$WORK/nginx" -c "$WORK/nginx/nginx.conf" \
        -e "$WORK/nginx/error.log"
    NGINX_URL="http://127.0.0.1:$port"
}

start_portkey() {
    command -v npm >/dev/null 2>&1 || fail "npm is missing (Node.js 18 or later)"
    server="$PORTKEY_DIR/node_modules/@portkey-ai/gateway/build/start-server.js"
    installed=$(python3 -c 'import json, sys; print(json.load(open(sys.argv[1]))["version"])' \
        "$PORTKEY_DIR/node_modules/@portkey-ai/gateway/package.json" 2>/dev/null || true)
    if [ "$installed" != "$PORTKEY_VERSION" ]; then
        echo "installing @portkey-ai/gateway@$PORTKEY_VERSION into $PORTKEY_DIR (npm)" >&2
        mkdir -p "$PORTKEY_DIR"
        npm install --prefix "$PORTKEY_DIR" --no-audit --no-fund --loglevel=error \
            "@portkey-ai/gateway@$PORTKEY_VERSION" >&2 || fail "npm install failed"
    fi
    port=$(free_port)
    # --headless and NODE_ENV=production: no log console page, as deployed
    start_process portkey "$port" env NODE_ENV=production node "$server" --port="$port" --headless
    PORTKEY_URL="http://127.0.0.1:$port"
}

# -- targets ---------------------------------------------------------------
# A new target is one more block like Portkey's: start it with start_process
# NAME PORT COMMAND... (an OpenAI upstream at $NGINX_URL/v1, which answers
# any model), run_target TITLE URL "Header: value;..." [SURFACE [TOKEN]],
# stop_process NAME.
# BENCH_GATEWAY_HOOK runs such blocks from a file.

need wrk wrk
: >"$WORK/table"
start_nginx

if wanted nginx; then
    run_target "nginx direct" "$NGINX_URL" ""
fi

if wanted portkey; then
    start_portkey
    run_target "Portkey $PORTKEY_VERSION -> nginx" "$PORTKEY_URL" "Authorization: Bearer sk-bench;\
x-portkey-provider: openai;x-portkey-custom-host: $NGINX_URL/v1"
    stop_process portkey
fi

# llmlimitd's gateway on BACKEND: 4 limits per call, windows short enough
# (2 s, budget timeout 5 s) that holds expire as fast as they are taken. Four
# upstreams on the one nginx: OpenAI and Anthropic dialects, whole answers
# (/v1) and streams (/stream/v1); a model per surface family and kind.
BENCH_MODELS="$MODEL $MODEL-stream claude-bench claude-bench-stream gemini-bench"

gateway_json() {
    models=""
    for model in $BENCH_MODELS; do
        case $model in
        claude*) upstream=anthropic ;;
        gemini*) upstream=gemini ;;
        *) upstream=openai ;;
        esac
        case $model in *-stream) upstream="$upstream-stream" ;; esac
        models="$models${models:+,}
   {\"name\":\"$model\",\"upstream\":\"$upstream\",\"input_usd_micros_per_mtok\":150000,
    \"cached_input_usd_micros_per_mtok\":75000,\"output_usd_micros_per_mtok\":600000,
    \"max_output_tokens\":16384,\"default_max_output_tokens\":1024}"
    done
    cat <<JSON
{"upstreams":[
   {"name":"openai","base_url":"$NGINX_URL/v1","timeout_seconds":30},
   {"name":"openai-stream","base_url":"$NGINX_URL/stream/v1","timeout_seconds":30},
   {"name":"anthropic","api":"anthropic","base_url":"$NGINX_URL/v1","timeout_seconds":30},
   {"name":"anthropic-stream","api":"anthropic","base_url":"$NGINX_URL/stream/v1",
    "timeout_seconds":30},
   {"name":"gemini","api":"gemini","base_url":"$NGINX_URL/v1beta","timeout_seconds":30}],
 "models":[$models],
 "keys":[{"sha256":"$1","caller":"bench","team":"bench"}],
 "limits":[{"key":"bench:{model}:rpm","amount":"requests"},
           {"key":"bench:{model}:tpm","amount":"tokens"},
           {"key":"bench:{caller}:concurrent","amount":"requests"},
           {"key":"bench:{team}:usd:month","amount":"usd_micros"}]}
JSON
}

run_llmlimit() {
    backend=$1
    surfaces=$2
    [ -x "$BUILD/llmlimitd" ] && [ -x "$BUILD/llmlimit" ] || fail "$BUILD/llmlimitd is not built"
    dir="$WORK/llmlimit-$backend"
    mkdir -p "$dir/data"
    keys=$("$BUILD/llmlimit" --compact gateway new-key)
    secret=$(echo "$keys" | cut -d'"' -f4)
    gateway_json "$(echo "$keys" | cut -d'"' -f8)" >"$dir/gateway.json"
    port=$(free_port)
    wrap=""
    if [ "$INSTRUCTIONS" = 1 ]; then
        need callgrind_control valgrind
        wrap="valgrind --tool=callgrind --callgrind-out-file=$WORK/callgrind.out.%p"
    fi
    # shellcheck disable=SC2086
    start_process "llmlimit-$backend" "$port" $wrap "$BUILD/llmlimitd" --listen "127.0.0.1:$port" \
        --backend "$backend" --data-dir "$dir/data" --gateway-config "$dir/gateway.json" \
        ${BENCH_LLMLIMITD_ARGS:-}
    url="http://127.0.0.1:$port"
    for entry in $PIDS; do
        [ "${entry%%:*}" = "llmlimit-$backend" ] && CPU_PID=${entry#*:}
    done
    cli="$BUILD/llmlimit --url $url --compact"
    for model in $BENCH_MODELS; do
        $cli limits put --key "bench:$model:rpm" --kind rolling --capacity 1000000000000 \
            --window-seconds 2 --unit requests >/dev/null
        $cli limits put --key "bench:$model:tpm" --kind rolling --capacity 1000000000000000 \
            --window-seconds 2 --unit tokens >/dev/null
    done
    $cli limits put --key bench:bench:concurrent --kind concurrency --capacity 100000 \
        --timeout-seconds 30 --unit requests >/dev/null
    $cli limits put --key bench:bench:usd:month --kind budget --capacity 1000000000000000 \
        --period month --timeout-seconds 5 --unit usd_micros >/dev/null
    round=1
    while [ "$round" -le "$ROUNDS" ]; do
        for surface in $(echo "$surfaces" | tr ',' ' '); do
            run_target "llmlimitd $backend $surface" "$url" "Authorization: Bearer $secret" \
                "$surface" "$secret"
        done
        round=$((round + 1))
    done
    stop_process "llmlimit-$backend"
    CPU_PID=""
}

ALL_SURFACES=chat,chat-stream,messages,messages-stream,responses,responses-stream,gemini
if wanted llmlimit-memory; then
    run_llmlimit memory "${SURFACES:-$ALL_SURFACES}"
fi
if wanted llmlimit-sqlite; then
    run_llmlimit sqlite "${SURFACES:-chat}"
fi

if [ -n "${BENCH_GATEWAY_HOOK:-}" ]; then
    # shellcheck disable=SC1090
    . "$BENCH_GATEWAY_HOOK"
fi

print_table

#!/bin/sh
# The tigerbeetle backend against the hand-written alternative, side by side
# on the same machine: each run gets a freshly formatted single-replica
# TigerBeetle 0.15.3 (data file on tmpfs), then either the tigerbeetle-node
# peer (bench/tigerbeetle/peer.mjs: 3 linked pending transfers per call) or
# llmlimitd --backend tigerbeetle driven over HTTP by `llmlimit bench` (an
# RPM + TPM + monthly budget per reserve). Runs alternate, PAIRS times.
# Each run also prints where the machine's CPU went: the whole machine's
# CPU per reserve (busy time of all cores over the reserves granted), the
# share of the cores idle and stolen by the hypervisor, and TigerBeetle's
# own CPU per reserve. With BENCH_FLOOR=1 (needs nginx and wrk) a third run
# per pair measures the cheapest HTTP exchange this machine allows: wrk
# sending the same reserve to nginx answering a fixed reserve answer, over
# the same number of connections (docs/tigerbeetle.md, "Benchmarks").
# Figures printed, nothing kept.
# Usage: TIGERBEETLE_BIN=/path/to/tigerbeetle sh bench/tigerbeetle/run.sh [BUILD_DIR]
# Environment: BENCH_PAIRS (3), BENCH_DURATION (10), BENCH_CONNECTIONS (200),
#   BENCH_SESSIONS (--tb-sessions, 1), BENCH_ADDRESS_FILE_DIR (/dev/shm),
#   BENCH_FRONT_ENDS (1: llmlimitd processes on the cluster, connections split
#   between them), BENCH_FLOOR (0), BENCH_IDS (uuidv7: the lease ids of
#   `llmlimit bench`; random ones keep llmlimitd's transfer ids scattered,
#   docs/tigerbeetle.md "Account model"), BENCH_PEER_IDS (time: the peer's
#   tigerbeetle-node id(); random: 128 random bits).
set -eu

BUILD=${1:-build}
PAIRS=${BENCH_PAIRS:-3}
DURATION=${BENCH_DURATION:-10}
CONNECTIONS=${BENCH_CONNECTIONS:-200}
SESSIONS=${BENCH_SESSIONS:-1}
FRONT_ENDS=${BENCH_FRONT_ENDS:-1}
FLOOR=${BENCH_FLOOR:-0}
IDS=${BENCH_IDS:-uuidv7}
PEER_IDS=${BENCH_PEER_IDS:-time}
case "$IDS" in uuidv7|random) ;; *) echo "bench/tigerbeetle/run.sh: BENCH_IDS: uuidv7 or random" >&2; exit 2 ;; esac
case "$PEER_IDS" in time) PEER_FLAGS="" ;; random) PEER_FLAGS="--random-ids" ;;
    *) echo "bench/tigerbeetle/run.sh: BENCH_PEER_IDS: time or random" >&2; exit 2 ;; esac
SHM=${BENCH_ADDRESS_FILE_DIR:-/dev/shm}
HERE=$(cd "$(dirname "$0")" && pwd)
. "$HERE/../nginx_conf.sh"
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
    TB_PID=$!
    PIDS="$PIDS $TB_PID"
    TB_ADDRESS="127.0.0.1:$port"
    wait_port "$port"
}

# Waits until something accepts connections on 127.0.0.1:$1.
wait_port() {
    until python3 -c "import socket; socket.create_connection(('127.0.0.1', $1), 1)" \
        2>/dev/null; do sleep 0.1; done
}

# The first line of /proc/stat: the whole machine's CPU time so far.
cpu_mark() {
    head -1 /proc/stat
}

# cpu_split MARK MARK2 COUNT: "CPU-us-per-count idle% steal%" between the
# two marks: the busy time of all cores over COUNT.
cpu_split() {
    python3 - "$1" "$2" "$3" "$(getconf CLK_TCK)" <<'PY'
import sys
before = [int(x) for x in sys.argv[1].split()[1:]]
after = [int(x) for x in sys.argv[2].split()[1:]]
count, hz = float(sys.argv[3]), int(sys.argv[4])
d = [b - a for a, b in zip(before, after)]
total = sum(d[:8])  # user nice system idle iowait irq softirq steal
busy = total - d[3] - d[4] - d[7]
print("%.0f %.0f%% %.0f%%" % (busy / hz * 1e6 / count if count else 0, 100 * (d[3] + d[4]) / total,
                              100 * d[7] / total))
PY
}

# CPU seconds of process $1 so far (utime + stime).
process_seconds() {
    awk -v hz="$(getconf CLK_TCK)" '{ printf "%.2f", ($14 + $15) / hz }' "/proc/$1/stat"
}

stop_all() {
    for pid in $PIDS; do kill "$pid" 2>/dev/null || true; wait "$pid" 2>/dev/null || true; done
    PIDS=""
}

# Prints "reserves/s reserves"; the machine's CPU counters as its load
# started and ended go to $WORK/peer_mark0 and $WORK/peer_mark1.
run_peer() {
    node "$HERE/peer.mjs" "$TB_ADDRESS" --callers "$CONNECTIONS" --seconds "$DURATION" $PEER_FLAGS |
        python3 -c 'import json, sys; r = json.load(sys.stdin)
open(sys.argv[1] + "/peer_mark0", "w").write(r["cpu_start"])
open(sys.argv[1] + "/peer_mark1", "w").write(r["cpu_end"])
print(r["reserves_per_second"], r["reserves"])' "$WORK"
}

# per_reserve SECONDS0 SECONDS1 COUNT: microseconds per reserve.
per_reserve() {
    python3 -c "print(round(($2 - $1) * 1e6 / $3) if $3 else 0)"
}

# One llmlimitd (front end number $1) on the cluster, on a new data
# directory; sets URL. Not in a subshell: its pid must reach PIDS.
start_front_end() {
    port=$(free_port)
    rm -rf "$WORK/data$1"
    mkdir -p "$WORK/data$1"
    # The submitter's trace gives each request's round trip and how long
    # after the last answer it went out (the cycle columns).
    LLMLIMIT_TB_TRACE=1 "$BUILD/llmlimitd" --listen "127.0.0.1:$port" --backend tigerbeetle --tb-addresses \
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
    wc -l <"$WORK/llmlimitd0.log" >"$WORK/log0"
    cpu_mark >"$WORK/mark0"
    process_seconds "$TB_PID" >"$WORK/tb0"
    benches=""
    for url in $urls; do
        "$BUILD/llmlimit" --url "$url" bench --mode reserve --keys \
            bench:llm:rpm,bench:llm:tpm,bench:team:usd:month --amounts 1,500,2500 --ids "$IDS" \
            --connections "$per" --duration "$DURATION" --json >"$WORK/bench.$(echo "$url" |
            tr -dc 0-9).json" 2>/dev/null &
        benches="$benches $!"
    done
    for pid in $benches; do wait "$pid" || true; done
    cpu_mark >"$WORK/mark1"
    process_seconds "$TB_PID" >"$WORK/tb1"
    for url in $urls; do curl -s -m 10 "$url/metrics"; done >"$WORK/metrics"
    python3 - "$WORK" <<'PY'
import glob, json, re, sys
# Reserves granted per second: an answer that is not a grant (an error, a
# denial) is no reserve, and is counted apart.
total = 0.0
granted = refused = 0
for path in glob.glob(sys.argv[1] + "/bench.*.json"):
    with open(path) as f:
        report = json.load(f)
    total += report["allowed"] / report["elapsed_seconds"]
    granted += report["allowed"]
    refused += report["denied"] + report["errors"] + report["connection_errors"]
batches = items = 0
for line in open(sys.argv[1] + "/metrics"):
    if line.startswith("llmlimit_backend_batches_total "):
        batches += float(line.split()[1])
    elif line.startswith("llmlimit_backend_batched_items_total "):
        items += float(line.split()[1])
fill = items / batches if batches else 0
# The cycle of front end 0 during the load: the mean round trip of a
# request to the cluster, and the mean time from a reply to the next
# request (answering its callers, and them coming back over HTTP).
skip = int(open(sys.argv[1] + "/log0").read())
trips, turns = [], []
with open(sys.argv[1] + "/llmlimitd0.log") as log:
    for number, line in enumerate(log):
        if number < skip:
            continue
        sent = re.search(r"([0-9.]+) ms after the last reply", line)
        if sent:
            turns.append(float(sent.group(1)))
        answered = re.search(r"answered in ([0-9.]+) ms", line)
        if answered:
            trips.append(float(answered.group(1)))
mean = lambda values: sum(values) / len(values) if values else 0.0
print("%d %.0f %s %d %.1f %.1f" % (round(total), fill, refused, granted, mean(trips), mean(turns)))
PY
    rm -f "$WORK"/bench.*.json
}

# The floor: wrk sends the same reserve as `llmlimit bench` to nginx
# answering a fixed reserve answer. Prints "exchanges/s CPU-us-per-exchange".
run_floor() {
    stop_all
    port=$(free_port)
    nginx_conf "$HERE/floor.conf.in" "$WORK/nginx" "$port"
    nginx -p "$WORK/nginx" -c "$WORK/nginx/nginx.conf" -e "$WORK/nginx/error.log" &
    PIDS="$PIDS $!"
    wait_port "$port"
    mark=$(cpu_mark)
    out=$(cd "$HERE/.." && BENCH_KEYS=bench:llm:rpm,bench:llm:tpm,bench:team:usd:month \
        BENCH_AMOUNTS=1,500,2500 wrk -t1 -c"$CONNECTIONS" -d"${DURATION}s" -s wrk_reserve.lua \
        "http://127.0.0.1:$port/v1/reserve" |
        awk '/requests in/ { n = $1 } /^Requests\/sec:/ { print int($2), n }')
    set -- $out
    echo "$1 $(cpu_split "$mark" "$(cpu_mark)" "$2" | cut -d' ' -f1)"
    stop_all
}

if [ "$FLOOR" = 1 ]; then
    command -v nginx >/dev/null && command -v wrk >/dev/null ||
        { echo "bench/tigerbeetle/run.sh: BENCH_FLOOR=1 needs nginx and wrk" >&2; exit 1; }
fi
echo "== tigerbeetle-node peer vs llmlimitd (tigerbeetle backend, $FRONT_ENDS front end(s)," \
    "--tb-sessions $SESSIONS), $CONNECTIONS callers/connections, ${DURATION}s, fresh cluster each run," \
    "lease ids $IDS, peer ids $PEER_IDS"
echo "   us/res: CPU of the whole machine per reserve; tb: TigerBeetle's own CPU per reserve;"
echo "   fill: reserves per TigerBeetle request; trip: its mean round trip (ms); turn: mean time"
echo "   from a reply to the next request (ms); floor: wrk -> nginx, the same reserve, CPU per exchange"
printf "%-5s %8s %7s %5s %6s %5s | %11s %7s %5s %6s %5s %5s %5s %5s" pair peer/s us/res idle steal \
    tb llmlimitd/s us/res idle steal tb fill trip turn
[ "$FLOOR" = 1 ] && printf " | %9s %6s" floor/s us/ex
printf "\n"
pair=1
while [ "$pair" -le "$PAIRS" ]; do
    start_cluster
    tb0=$(process_seconds "$TB_PID")
    set -- $(run_peer)
    peer=$1 peer_reserves=$2
    peer_split=$(cpu_split "$(cat "$WORK/peer_mark0")" "$(cat "$WORK/peer_mark1")" "$peer_reserves")
    peer_tb=$(per_reserve "$tb0" "$(process_seconds "$TB_PID")" "$peer_reserves")
    start_cluster
    run_llmlimit >"$WORK/ours" # not in $(...): the front ends' pids must reach PIDS
    set -- $(cat "$WORK/ours")
    ours=$1 fill=$2 refused=$3 ours_reserves=$4 trip=$5 turn=$6
    ours_split=$(cpu_split "$(cat "$WORK/mark0")" "$(cat "$WORK/mark1")" "$ours_reserves")
    ours_tb=$(per_reserve "$(cat "$WORK/tb0")" "$(cat "$WORK/tb1")" "$ours_reserves")
    printf "%-5s %8s %7s %5s %6s %5s | %11s %7s %5s %6s %5s %5s %5s %5s" "$pair" "$peer" \
        $peer_split "$peer_tb" "$ours" $ours_split "$ours_tb" "$fill" "$trip" "$turn"
    [ "$FLOOR" = 1 ] && printf " | %9s %6s" $(run_floor)
    printf "\n"
    [ "$refused" = 0 ] || echo "      llmlimitd: $refused answers not granted"
    pair=$((pair + 1))
done
stop_all

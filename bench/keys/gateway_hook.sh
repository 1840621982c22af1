# Gateway calls/s with few and with many keys of the Keys API: a
# BENCH_GATEWAY_HOOK of bench/gateway/run.sh (it is sourced there and uses its
# start_process, run_target, stop_process, gateway_json, NGINX_URL, WORK).
# For each count of BENCH_KEYS_COUNTS (10,100000), keys.json is written with
# that many keys (bench/keys/keys_json.py) and llmlimitd (memory) serves chat
# calls of the last one, with the 4 limits of the other llmlimitd targets.
# Run through bench/keys/run.sh.

KEYS_HERE=$(cd "$(dirname "$BENCH_GATEWAY_HOOK")" && pwd)
for count in $(echo "${BENCH_KEYS_COUNTS:-10,100000}" | tr ',' ' '); do
    dir="$WORK/keys-$count"
    mkdir -p "$dir/data"
    api_secret=$(python3 "$KEYS_HERE/keys_json.py" "$dir/data" "$count")
    # gateway.json needs one key of its own: one nobody sends
    file_key=$("$BUILD/llmlimit" --compact gateway new-key)
    gateway_json "$(echo "$file_key" | cut -d'"' -f8)" | sed 's/"caller":"bench"/"caller":"file"/' \
        >"$dir/gateway.json"
    port=$(free_port)
    start_process "llmlimit-keys-$count" "$port" "$BUILD/llmlimitd" --listen "127.0.0.1:$port" \
        --backend memory --data-dir "$dir/data" --gateway-config "$dir/gateway.json" \
        ${BENCH_LLMLIMITD_ARGS:-}
    url="http://127.0.0.1:$port"
    cli="$BUILD/llmlimit --url $url --compact"
    $cli limits put --key "bench:$MODEL:rpm" --kind rolling --capacity 1000000000000 \
        --window-seconds 2 --unit requests >/dev/null
    $cli limits put --key "bench:$MODEL:tpm" --kind rolling --capacity 1000000000000000 \
        --window-seconds 2 --unit tokens >/dev/null
    $cli limits put --key bench:bench:concurrent --kind concurrency --capacity 100000 \
        --timeout-seconds 30 --unit requests >/dev/null
    $cli limits put --key bench:bench:usd:month --kind budget --capacity 1000000000000000 \
        --period month --timeout-seconds 5 --unit usd_micros >/dev/null
    round=1
    while [ "$round" -le "$ROUNDS" ]; do
        run_target "llmlimitd memory chat, $count API keys" "$url" \
            "Authorization: Bearer $api_secret" chat "$api_secret"
        round=$((round + 1))
    done
    stop_process "llmlimit-keys-$count"
done

#!/bin/sh
# Three llmlimitd front ends sharing one 3-replica TigerBeetle cluster (the
# money) and one 3-member etcd cluster (the limit definitions and keys,
# --control), all on this machine: docs/tigerbeetle.md "Many front ends".
# Runs in the foreground until interrupted, then stops all nine processes.
#
#   examples/many-front-ends/run.sh DIR
#
# DIR keeps every data file and log (made if absent; a second run reuses the
# cluster's files). Binaries from LLMLIMITD, TIGERBEETLE and ETCD (default:
# llmlimitd, tigerbeetle, etcd on PATH). Ports from BASE_PORT (default
# 17000): etcd clients BASE+1..3 and peers BASE+11..13, TigerBeetle
# BASE+21..23, the front ends BASE+31..33.
set -eu

dir=${1:?usage: run.sh DIR}
llmlimitd=${LLMLIMITD:-llmlimitd}
tigerbeetle=${TIGERBEETLE:-tigerbeetle}
etcd=${ETCD:-etcd}
base=${BASE_PORT:-17000}
mkdir -p "$dir"

pids=""
cleanup() {
    trap - EXIT INT TERM
    [ -z "$pids" ] || kill $pids 2>/dev/null || true
    wait 2>/dev/null || true
}
trap cleanup EXIT
trap 'exit 143' INT TERM

# etcd: three members, one cluster.
peers=""
for i in 1 2 3; do
    peers="${peers:+$peers,}e$i=http://127.0.0.1:$((base + 10 + i))"
done
control=""
for i in 1 2 3; do
    client="http://127.0.0.1:$((base + i))"
    peer="http://127.0.0.1:$((base + 10 + i))"
    "$etcd" --name "e$i" --data-dir "$dir/etcd$i" \
        --listen-client-urls "$client" --advertise-client-urls "$client" \
        --listen-peer-urls "$peer" --initial-advertise-peer-urls "$peer" \
        --initial-cluster "$peers" --initial-cluster-state new \
        --initial-cluster-token llmlimit-example >"$dir/etcd$i.log" 2>&1 &
    pids="$pids $!"
    control="${control:+$control,}127.0.0.1:$((base + i))"
done

# TigerBeetle: three replicas, formatted once.
addresses=""
for i in 0 1 2; do
    addresses="${addresses:+$addresses,}127.0.0.1:$((base + 21 + i))"
done
for i in 0 1 2; do
    file="$dir/replica$i.tigerbeetle"
    [ -e "$file" ] || "$tigerbeetle" format --cluster=0 --replica="$i" --replica-count=3 \
        "$file" >"$dir/replica$i.format.log" 2>&1
done
for i in 0 1 2; do
    "$tigerbeetle" start --addresses="$addresses" --cache-grid=256MiB \
        "$dir/replica$i.tigerbeetle" >"$dir/replica$i.log" 2>&1 &
    pids="$pids $!"
done
for i in 0 1 2; do # each replica listening before a front end asks it
    tries=0
    until grep -q "listening on" "$dir/replica$i.log" 2>/dev/null; do
        tries=$((tries + 1))
        [ "$tries" -le 600 ] || { echo "replica $i did not start: $dir/replica$i.log" >&2; exit 1; }
        sleep 0.1
    done
done

# The front ends: the same cluster, the same store.
for i in 1 2 3; do
    "$llmlimitd" --listen "127.0.0.1:$((base + 30 + i))" --data-dir "$dir/front$i" \
        --backend tigerbeetle --tb-addresses "$addresses" \
        --control "etcd://$control" 2>"$dir/front$i.log" &
    pids="$pids $!"
    echo "front end $i: http://127.0.0.1:$((base + 30 + i)) (log $dir/front$i.log)"
done
wait

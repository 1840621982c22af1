"""The Keys API's own figures, printed (nothing asserted, nothing kept):
how long N creates take on a backend, one after another and from C
connections at once as a provisioning script would send them (each create
appends to keys.log, and one fdatasync covers the creates written while the
one before ran: docs/api.md, "keys.json"), and how long a revoked key
takes to be refused: a caller sends calls in a loop with the key, the key is
revoked, and the time from sending the DELETE to the first 401 key_revoked
is measured, over several keys.

Usage: python3 bench/keys/admin.py [--binary build/llmlimitd] [--backend sqlite]
       [--creates 10000] [--connections 1,8,32] [--revokes 20]"""

import argparse
import hashlib
import http.client
import json
import multiprocessing
import os
import re
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))


def start(binary, backend, data_dir, args=()):
    process = subprocess.Popen([binary, "--listen", "127.0.0.1:0", "--backend", backend,
                                "--data-dir", data_dir] + list(args),
                               stderr=subprocess.PIPE, text=True)
    for line in process.stderr:
        match = re.search(r"listening on 127\.0\.0\.1:(\d+)", line)
        if match:
            threading.Thread(target=lambda: [None for _ in process.stderr], daemon=True).start()
            return process, int(match.group(1))
    raise RuntimeError("llmlimitd did not start")


def request(conn, method, path, body=None, headers=None):
    conn.request(method, path, None if body is None else json.dumps(body), headers or {})
    response = conn.getresponse()
    return response.status, json.loads(response.read() or b"null")


def create_some(port, first, count, steps, started):
    """count creates one after another on one connection (callers first..)."""
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    for i in range(first, first + count):
        status, body = request(conn, "POST", "/v1/admin/keys",
                               {"caller": "c%d" % i, "team": "t%d" % (i % 100)})
        assert status == 201, body
        if steps is not None and (i + 1) % max(1, count // 10) == 0:
            steps.append((i + 1, time.monotonic() - started))
    conn.close()


def creates(binary, backend, count, connections):
    data_dir = tempfile.mkdtemp(prefix="llmlimit-bench-keys-")
    process, port = start(binary, backend, data_dir)
    steps = [] if connections == 1 else None
    try:
        started = time.monotonic()
        share = [count // connections + (1 if c < count % connections else 0)
                 for c in range(connections)]
        if connections == 1:
            create_some(port, 0, count, steps, started)
        else:  # a process each (no interpreter lock between them), as separate scripts
            workers = [multiprocessing.Process(target=create_some,
                                               args=(port, sum(share[:c]), share[c], None,
                                                     started))
                       for c in range(connections)]
            for worker in workers:
                worker.start()
            for worker in workers:
                worker.join()
                assert worker.exitcode == 0, worker.exitcode
        total = time.monotonic() - started
        size = sum(os.path.getsize(os.path.join(data_dir, name))
                   for name in ("keys.json", "keys.log")
                   if os.path.exists(os.path.join(data_dir, name)))
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
        status, listed = request(conn, "GET", "/v1/admin/keys?limit=1")
        assert status == 200, listed
    finally:
        process.send_signal(signal.SIGTERM)
        process.wait(30)
        shutil.rmtree(data_dir, ignore_errors=True)
    print("%d creates on %s from %d connection%s: %.2f s (%.0f per second), keys.json + "
          "keys.log %d bytes"
          % (count, backend, connections, "" if connections == 1 else "s", total,
             count / total, size))
    previous = (0, 0.0)
    for done, at in steps or []:
        print("  creates %6d..%6d: %.2f ms each" % (previous[0] + 1, done,
                                                    1000 * (at - previous[1]) /
                                                    (done - previous[0])))
        previous = (done, at)


def gateway_config(directory, upstream_port):
    """gateway.json: one model on an upstream nothing listens on (the calls are refused
    before they would go there, or answer 502), one file key nobody sends."""
    digest = hashlib.sha256(b"unused").hexdigest()
    config = {"upstreams": [{"name": "none", "base_url": "http://127.0.0.1:%d/v1" % upstream_port,
                             "connect_timeout_seconds": 1, "timeout_seconds": 1}],
              "models": [{"name": "m", "upstream": "none", "input_usd_micros_per_mtok": 1,
                          "output_usd_micros_per_mtok": 1, "max_output_tokens": 16,
                          "default_max_output_tokens": 16}],
              "keys": [{"sha256": digest, "caller": "file"}],
              "limits": [{"key": "req:{caller}", "amount": "requests",
                          "default": {"kind": "rolling", "capacity": 1000000000,
                                      "window_seconds": 60}}]}
    path = os.path.join(directory, "gateway.json")
    with open(path, "w") as f:
        json.dump(config, f)
    return path


def revokes(binary, backend, count):
    """From sending DELETE to the first call refused key_revoked, per key; /v1/models is
    the call (the key alone is checked, nothing goes upstream)."""
    data_dir = tempfile.mkdtemp(prefix="llmlimit-bench-keys-")
    process, port = start(binary, backend, data_dir,
                          ["--gateway-config", gateway_config(data_dir, 9)])
    delays, calls_before = [], []
    try:
        admin = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
        for i in range(count):
            status, key = request(admin, "POST", "/v1/admin/keys",
                                  {"caller": "r%d" % i, "team": "r"})
            assert status == 201, key
            refused, sent = {}, {"calls": 0}
            go = threading.Event()

            def caller():
                conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
                go.set()
                while True:
                    status, body = request(conn, "GET", "/v1/models", None,
                                           {"Authorization": "Bearer " + key["secret"]})
                    sent["calls"] += 1
                    if status == 401:
                        refused["at"] = time.monotonic()
                        refused["code"] = body["error"]["code"]
                        return

            thread = threading.Thread(target=caller)
            thread.start()
            go.wait()
            time.sleep(0.05)
            before = sent["calls"]
            revoke_sent = time.monotonic()
            status, _ = request(admin, "DELETE", "/v1/admin/keys/" + key["id"])
            assert status == 200
            thread.join(30)
            assert refused.get("code") == "key_revoked", refused
            delays.append(1000 * (refused["at"] - revoke_sent))
            calls_before.append(before)
    finally:
        process.send_signal(signal.SIGTERM)
        process.wait(30)
        shutil.rmtree(data_dir, ignore_errors=True)
    delays.sort()
    print("revoke to refusal on %s, %d keys (a caller calling in a loop): p50 %.2f ms, "
          "max %.2f ms (the DELETE's own fsync included)"
          % (backend, count, statistics.median(delays), delays[-1]))


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--binary", default="build/llmlimitd")
    parser.add_argument("--backend", default="sqlite")
    parser.add_argument("--creates", type=int, default=10000)
    parser.add_argument("--connections", default="1,8,32",
                        help="comma-separated: one run of the creates per count")
    parser.add_argument("--revokes", type=int, default=20)
    args = parser.parse_args()
    print("machine: %d cores, load average %s" % (os.cpu_count(),
                                                 open("/proc/loadavg").read().split()[0]))
    for connections in [int(c) for c in args.connections.split(",")]:
        creates(args.binary, args.backend, args.creates, connections)
    if args.revokes > 0:
        revokes(args.binary, args.backend, args.revokes)


if __name__ == "__main__":
    sys.exit(main())

"""Two attacks on llmlimitd's HTTP server, measured from the side of a
well-behaved client (BENCHMARKS.md, "HTTP under attack"): a prober reserves on a fresh
connection every 20 ms and records how long each answer took.

  busy     CONNECTIONS connections each pipeline BYTES of small reserve batches
           and never read their answers (issue 26 item 12)
  expiry   IDLE connections open and sit idle until the request deadline closes
           them all at once (issue 26 item 14)

Prints the prober's p50, p99 and max latency while the attack runs, and for
`expiry` the longest gap around the moment the idle connections expire.
Figures only: nothing here is asserted.

Usage: attacks.py --binary build/llmlimitd busy [--connections 200] [--bytes 1000000]
       attacks.py --binary build/llmlimitd expiry [--idle 4000]
"""

import argparse
import json
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import uuid

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..",
                                "tests", "http"))
from harness import Server  # noqa: E402

KEY = "attack:rpm"


def request(path, body):
    data = json.dumps(body).encode()
    return (b"POST %s HTTP/1.1\r\nHost: a\r\nContent-Type: application/json\r\n"
            b"Content-Length: %d\r\n\r\n" % (path.encode(), len(data)) + data)


class Prober(threading.Thread):
    """Reserves every interval_s: on a fresh connection each time, or (keep)
    on one keep-alive connection, which stays on one worker."""

    def __init__(self, server, interval_s=0.02, keep=False):
        super().__init__(daemon=True)
        self.server = server
        self.interval_s = interval_s
        self.keep = keep
        self.samples = []  # (start, seconds)
        self.stopping = threading.Event()

    def ask(self, s):
        s.sendall(request("/v1/reserve", {"lease_id": str(uuid.uuid4()),
                                          "requirements": [{"key": KEY, "amount": 1}]}))
        data = b""
        while b"\r\n\r\n" not in data or not data.endswith(b"}"):
            piece = s.recv(4096)
            if not piece:
                raise OSError("closed")
            data += piece

    def run(self):
        kept = None
        while not self.stopping.is_set():
            started = time.monotonic()
            try:
                if self.keep:
                    if kept is None:
                        kept = socket.create_connection((self.server.host, self.server.port), 30)
                    self.ask(kept)
                else:
                    with socket.create_connection((self.server.host, self.server.port), 30) as s:
                        self.ask(s)
            except OSError:
                kept = None
            self.samples.append((started, time.monotonic() - started))
            self.stopping.wait(self.interval_s)


def report(samples, label):
    values = sorted(s for _, s in samples)
    if not values:
        print("%s: no samples" % label)
        return
    p99 = values[min(len(values) - 1, int(len(values) * 0.99))]
    print("%s: %d probes, p50 %.1f ms, p99 %.1f ms, max %.1f ms" % (
        label, len(values), statistics.median(values) * 1000, p99 * 1000, values[-1] * 1000))


def busy(server, connections, size):
    batch = request("/v1/reserve/batch", {"requests": [
        {"lease_id": "busy-%d" % i, "requirements": [{"key": KEY, "amount": 1}]}
        for i in range(40)]})
    payload = batch * max(1, size // len(batch))
    socks = []
    for _ in range(connections):
        s = socket.socket()
        s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        s.connect((server.host, server.port))
        s.setblocking(False)
        socks.append([s, payload])
    prober = Prober(server)
    prober.start()

    def send(entry):
        entry[0].setblocking(True)
        entry[0].settimeout(30)
        try:
            entry[0].sendall(entry[1])
        except OSError:
            pass
    senders = [threading.Thread(target=send, args=(entry,), daemon=True) for entry in socks]
    for t in senders:
        t.start()
    for t in senders:
        t.join(35)
    time.sleep(2)
    prober.stopping.set()
    prober.join()
    report(prober.samples, "busy %d x %d bytes" % (connections, len(payload)))
    for s, _ in socks:
        s.close()


def expiry(server, idle, timeout_s):
    prober = Prober(server, interval_s=0.002, keep=True)
    prober.start()
    time.sleep(0.5)  # the prober's connection is older than the idle ones: it is kept alive
    socks = [socket.create_connection((server.host, server.port), 30) for _ in range(idle)]
    opened = time.monotonic()
    time.sleep(timeout_s + 3)
    prober.stopping.set()
    prober.join()
    window = [(t, s) for t, s in prober.samples if opened + timeout_s - 1 <= t <= opened + timeout_s + 2]
    report(prober.samples, "expiry of %d idle connections, whole run" % idle)
    report(window, "expiry of %d idle connections, around the expiry" % idle)
    for s in socks:
        s.close()


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--binary", default="build/llmlimitd")
    parser.add_argument("attack", choices=["busy", "expiry"])
    parser.add_argument("--connections", type=int, default=200)
    parser.add_argument("--bytes", type=int, default=1000000)
    parser.add_argument("--idle", type=int, default=4000)
    args = parser.parse_args()
    timeout_s = 4
    server = Server(os.path.abspath(args.binary), backend="memory", args=[
        "--max-connections", "30000", "--request-timeout-seconds", str(timeout_s),
        "--connection-timeout-seconds", str(timeout_s), "--max-body-bytes", "1048576",
        "--threads", "1"]).start()
    try:
        server.put_limit({"key": KEY, "kind": "rolling", "capacity": 10 ** 12,
                          "window_seconds": 60})
        if args.attack == "busy":
            busy(server, args.connections, args.bytes)
        else:
            expiry(server, args.idle, timeout_s)
    finally:
        server.stop(check=False, timeout_s=30)
        server.cleanup()


if __name__ == "__main__":
    main()

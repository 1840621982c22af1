"""examples/many-front-ends/run.sh as docs/tigerbeetle.md prints it: three
front ends, three etcd members and a 3-replica TigerBeetle cluster on this
machine. A limit put on one front end is in force on all three, with one
capacity for the three (reserves through all of them admit it in all); a key
made on one is served by the other two, and revoked on one, refused by them.
Stopping the script stops all nine processes.

Skipped (exit 77) without etcd or TIGERBEETLE_BIN. Usage:
test_example_many.py --binary LLMLIMITD"""

import json
import os
import random
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
import uuid

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "..", "http"))
sys.path.insert(0, os.path.join(HERE, "..", "tigerbeetle"))
from harness import binary_from_argv, wait_until  # noqa: E402
import etcd_cluster  # noqa: E402
import tb_cluster  # noqa: E402

BINARY = binary_from_argv()
SCRIPT = os.path.join(HERE, "..", "..", "examples", "many-front-ends", "run.sh")
etcd_cluster.skip_unless_etcd("the many front ends example")
tb_cluster.skip_unless_binary("the many front ends example")
# The ports run.sh takes from BASE_PORT.
OFFSETS = [1, 2, 3, 11, 12, 13, 21, 22, 23, 31, 32, 33]
READY_WITHIN_S = 120.0
SEEN_WITHIN_S = 20.0


def free_base():
    """A BASE_PORT whose twelve ports are free now."""
    for _ in range(200):
        base = random.randrange(20000, 60000)
        try:
            for offset in OFFSETS:
                with socket.socket() as s:
                    s.bind(("127.0.0.1", base + offset))
            return base
        except OSError:
            continue
    raise RuntimeError("no free ports")


def request(url, method="GET", body=None):
    data = json.dumps(body).encode() if body is not None else None
    req = urllib.request.Request(url, data=data, method=method,
                                 headers={"content-type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=30) as answer:
            return answer.status, answer.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode()
    except OSError:
        return None, ""


def metric(url, name):
    status, text = request(url + "/metrics")
    for line in text.splitlines() if status == 200 else []:
        if line.startswith(name + " "):
            return int(line.split()[1])
    return None


def capacity(url, key):
    status, text = request(url + "/v1/admin/limits/" + key)
    return json.loads(text)["limit"]["definition"]["capacity"] if status == 200 else None


def admitted(url, key, tries):
    count = 0
    for _ in range(tries):
        status, text = request(url + "/v1/reserve", "POST",
                               {"lease_id": str(uuid.uuid4()),
                                "requirements": [{"key": key, "amount": 1}]})
        assert status == 200, (status, text)
        count += json.loads(text)["allowed"] is True
    return count


def check(condition, what):
    if not condition:
        raise AssertionError(what)


def main():
    base = free_base()
    fronts = ["http://127.0.0.1:%d" % (base + 31 + i) for i in range(3)]
    with tempfile.TemporaryDirectory(prefix="llmlimit-example-") as directory:
        env = dict(os.environ, LLMLIMITD=BINARY, TIGERBEETLE=tb_cluster.binary(),
                   ETCD=etcd_cluster.binary(), BASE_PORT=str(base))
        script = subprocess.Popen(["sh", SCRIPT, os.path.join(directory, "run")], env=env,
                                  stdout=subprocess.PIPE, text=True, start_new_session=True)
        try:
            for url in fronts:
                check(wait_until(lambda: request(url + "/readyz")[0] == 200 and
                                 metric(url, "llmlimit_control_connected") == 1,
                                 READY_WITHIN_S), "front end %s not ready" % url)
            # A limit put on the first: on all three, one capacity for the three.
            key = "example-" + uuid.uuid4().hex[:8]
            status, text = request(fronts[0] + "/v1/admin/limits", "PUT",
                                   {"key": key, "kind": "rolling", "capacity": 9,
                                    "window_seconds": 3600})
            check(status == 200, (status, text))
            for url in fronts[1:]:
                check(wait_until(lambda: capacity(url, key) == 9, SEEN_WITHIN_S),
                      "the limit is not on %s" % url)
            total = sum(admitted(url, key, 4) for url in reversed(fronts))
            check(total == 9, "admitted %d of 9 across the three" % total)
            print("a limit put on front end 1: in force on 2 and 3, 9 admitted in all")
            # A key made on the second: served by the others; revoked on the third.
            status, text = request(fronts[1] + "/v1/admin/keys", "POST",
                                   {"caller": "example", "team": "example"})
            check(status == 201, (status, text))
            made = json.loads(text)
            for url in (fronts[0], fronts[2]):
                check(wait_until(lambda: request(url + "/v1/admin/keys/" + made["id"])[0] == 200,
                                 SEEN_WITHIN_S), "the key is not on %s" % url)
            status, text = request(fronts[2] + "/v1/admin/keys/" + made["id"], "DELETE")
            check(status == 200, (status, text))
            for url in fronts[:2]:
                check(wait_until(lambda: json.loads(request(
                    url + "/v1/admin/keys/" + made["id"])[1])["status"] == "revoked",
                    SEEN_WITHIN_S), "the key is not revoked on %s" % url)
            print("a key made on front end 2: on 1 and 3; revoked on 3: revoked on 1 and 2")
        finally:
            script.send_signal(signal.SIGTERM)
            try:
                code = script.wait(60)
            except subprocess.TimeoutExpired:
                os.killpg(script.pid, signal.SIGKILL)
                raise
            time.sleep(0.5)
            try:  # nothing of the script's is left
                os.killpg(script.pid, 0)
                left = True
            except ProcessLookupError:
                left = False
            if left:
                os.killpg(script.pid, signal.SIGKILL)
        check(code == 143, "run.sh exited %s on SIGTERM" % code)
        check(not left, "run.sh left processes behind")
    print("ok")


if __name__ == "__main__":
    main()

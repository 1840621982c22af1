"""The Keys API's keys are durable (docs/api.md, "keys.json"): creates,
blocks, revokes and rotations streamed at the real llmlimitd are cut by
kill -9; after a restart every acknowledged one is there and in force (each
secret answers as its key's state says, each key's limit exists), and no key
is half-written (every line of keys.log parses whole; every key listed has
every field). The log is folded into keys.json after KEYS_LOG_LINES_MIN
changes more than there are keys, and what both hold is loaded again. A torn
or corrupt keys.log or keys.json is refused at start with an error naming
it, never half loaded, and a stale keys.json.tmp is ignored. The key count
bound holds and one past it is refused. Changes arriving together share one
fdatasync (group commit): many connections creating at once are each
answered only once durable (all there after kill -9), and concurrent
changes of one key build on each other, none lost.

Backend from --backend (memory, sqlite, tigerbeetle)."""

import hashlib
import json
import os
import secrets
import threading
import unittest

from gw_harness import Gateway, skip_unless_backend, wait_until
from harness import ServerError

KEYS = "/v1/admin/keys"
KEYS_COUNT_MAX = 100000  # src/server/server_bounds.h
KEYS_LOG_LINES_MIN = 1024
WRITERS = 4
CONCURRENT_WRITERS = 16
FIELDS = {"id", "sha256_prefix", "caller", "team", "models", "mcp_servers", "status", "source",
          "blocked",
          "created_at_unix_ms", "expires_at_unix_ms", "revoked_at_unix_ms",
          "last_used_unix_ms", "max_wait_seconds", "priority_floor", "metadata"}


def all_keys(server):
    """Every key of GET /v1/admin/keys, page after page."""
    keys, query = [], "limit=1000"
    for _ in range(1000):
        status, _, page = server.request("GET", KEYS + "?" + query)
        assert status == 200, (status, page)
        keys += page["keys"]
        if page["next_cursor"] is None:
            return keys
        query = "limit=1000&cursor=" + page["next_cursor"]
    raise AssertionError("the list never ended")


class Durable(unittest.TestCase):
    def setUp(self):
        self.gw = Gateway.start(keys=1)
        self.acked = {}  # id -> {"secret", "old", "status", "limit"}
        self.lock = threading.Lock()
        self.stop_writers = threading.Event()

    def tearDown(self):
        if self.gw.server.process is not None:
            self.gw.server.kill()
        self.gw.stop()

    def writer(self, n):
        """Creates keys (each with a limit) and changes some it made, until the server
        goes away; records what was acknowledged."""
        server, mine = self.gw.server, []
        try:
            for i in range(100000):
                if self.stop_writers.is_set():
                    return
                caller = "w%d-%d-%s" % (n, i, secrets.token_hex(2))
                limit = {"key": "durable:" + caller, "kind": "rolling", "capacity": 5,
                         "window_seconds": 60}
                status, _, body = server.request("POST", KEYS, {
                    "caller": caller, "team": "durable", "limits": [limit],
                    "metadata": {"writer": str(n)}})
                assert status == 201, (status, body)
                with self.lock:
                    self.acked[body["id"]] = {"secret": body["secret"], "status": "active",
                                              "limit": limit["key"], "old": None,
                                              "pending": None}
                mine.append(body["id"])
                if i % 4 == 3:
                    self.change(server, mine[-2], i)
        except (OSError, ConnectionError, Exception):  # noqa: BLE001 - the kill cuts it
            return

    def change(self, server, key_id, i):
        """Blocks, revokes or rotates a key; records it once acknowledged (until then it
        is pending: a change cut by the kill may or may not have been made)."""
        kind = (i // 4) % 3
        with self.lock:
            self.acked[key_id]["pending"] = ("blocked", "revoked", "rotated")[kind]
        if kind == 0:
            status, _, body = server.request("PATCH", KEYS + "/" + key_id, {"blocked": True})
        elif kind == 1:
            status, _, body = server.request("DELETE", KEYS + "/" + key_id)
        else:
            status, _, body = server.request("POST", KEYS + "/" + key_id + "/rotate", {})
        assert status == 200, (status, body)
        with self.lock:
            entry = self.acked[key_id]
            if kind == 2:
                entry["old"], entry["secret"] = entry["secret"], body["secret"]
            else:
                entry["status"] = body["status"]
            entry["pending"] = None

    def expected_code(self, status):
        return {"blocked": "key_blocked", "revoked": "key_revoked"}.get(status)

    def test_acknowledged_changes_survive_kill_9(self):
        """Every acknowledged create, block, revoke and rotation is in force after kill -9
        and a restart; keys.json holds whole keys only."""
        threads = [threading.Thread(target=self.writer, args=(n,)) for n in range(WRITERS)]
        for thread in threads:
            thread.start()
        self.assertTrue(wait_until(lambda: len(self.acked) >= 60, 60), len(self.acked))
        self.gw.server.kill()  # mid-stream: requests are in flight
        changed = sum(1 for e in self.acked.values() if e["status"] != "active" or e["old"])
        print("acknowledged before the kill: %d keys, %d of them changed"
              % (len(self.acked), changed))
        self.stop_writers.set()
        for thread in threads:
            thread.join(30)
        self.gw.server.start()
        self.assertTrue(wait_until(
            lambda: self.gw.server.request("GET", "/readyz")[0] == 200, 30))
        listed = {k["id"]: k for k in all_keys(self.gw.server) if k["source"] == "api"}
        self.assertEqual(len(ids_on_disk(self.gw.server.data_dir)), len(listed))
        for key in listed.values():
            self.assertEqual(set(key), FIELDS, key)
            self.assertEqual(key["team"], "durable")
        pending = 0
        for key_id, entry in self.acked.items():
            self.assertIn(key_id, listed)
            status = listed[key_id]["status"]
            if entry["pending"] in ("blocked", "revoked") and status == entry["pending"]:
                pending += 1  # made, though its answer was cut
            else:
                self.assertEqual(status, entry["status"], key_id)
            if entry["pending"] == "rotated":
                pending += 1
                continue  # the old secret works, or a new one no one saw does
            self.assert_secret(entry["secret"], self.expected_code(status))
            if entry["old"] is not None:
                self.assert_secret(entry["old"], "invalid_api_key")
            status, _, _ = self.gw.server.request("GET", "/v1/admin/limits/" + entry["limit"])
            self.assertEqual(status, 200, entry)
        print("changes cut by the kill and found made: %d" % pending)

    def test_concurrent_creates_survive_kill_9(self):
        """CONCURRENT_WRITERS connections create keys at once (their creates share
        fdatasyncs); kill -9 mid-stream; every acknowledged key is there after the
        restart, its secret works, and the log holds whole lines only."""
        acked, stop = {}, threading.Event()

        def creator(n):
            try:
                for i in range(100000):
                    if stop.is_set():
                        return
                    status, _, body = self.gw.server.request(
                        "POST", KEYS, {"caller": "cc%d-%d" % (n, i), "team": "concurrent"})
                    assert status == 201, (status, body)
                    with self.lock:
                        acked[body["id"]] = body["secret"]
            except (OSError, ConnectionError, Exception):  # noqa: BLE001 - the kill cuts it
                return

        threads = [threading.Thread(target=creator, args=(n,))
                   for n in range(CONCURRENT_WRITERS)]
        for thread in threads:
            thread.start()
        self.assertTrue(wait_until(lambda: len(acked) >= 300, 60), len(acked))
        self.gw.server.kill()
        stop.set()
        for thread in threads:
            thread.join(30)
        print("acknowledged before the kill: %d keys" % len(acked))
        self.gw.server.start()
        listed = {k["id"] for k in all_keys(self.gw.server) if k["source"] == "api"}
        self.assertEqual(ids_on_disk(self.gw.server.data_dir), listed)
        self.assertEqual(set(acked) - listed, set())
        for secret in acked.values():
            self.assert_secret(secret, None)

    def test_concurrent_changes_of_one_key_build_on_each_other(self):
        """Connections change fields of one key at once, each its own field many times;
        the key ends with the last acknowledged value of each (a change written beside
        another in one batch starts from it, not from the version in force), before
        and after kill -9."""
        status, _, key = self.gw.server.request("POST", KEYS, {"caller": "one", "team": "t"})
        self.assertEqual(status, 201, key)
        last = {}

        def changer(field, value_of):
            for i in range(1, 150):
                status, _, body = self.gw.server.request(
                    "PATCH", KEYS + "/" + key["id"], {field: value_of(i)})
                assert status == 200, (status, body)
                last[field] = value_of(i)

        fields = {"max_wait_seconds": lambda i: i % 61, "priority_floor": lambda i: i % 10,
                  "metadata": lambda i: {"i": str(i)},
                  "expires_at_unix_ms": lambda i: 4000000000000 + i,
                  "blocked": lambda i: i % 2 == 1}
        threads = [threading.Thread(target=changer, args=item) for item in fields.items()]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(120)
        self.assertEqual(set(last), set(fields))
        for restart in (False, True):
            if restart:
                self.gw.server.kill()
                self.gw.server.start()
            status, _, shown = self.gw.server.request("GET", KEYS + "/" + key["id"])
            self.assertEqual(status, 200, shown)
            self.assertEqual({field: shown[field] for field in fields}, last, restart)

    def assert_secret(self, secret, code):
        status, _, answer = self.gw.call(secret, "/v1/models", method="GET")
        if code is None:
            self.assertEqual(status, 200, answer)
        else:
            self.assertEqual((status, answer["error"]["code"]), (401, code), answer)

    def assert_refused_at_start(self, name):
        with self.assertRaises(ServerError) as caught:
            self.gw.server.start()
        self.assertIn(name, str(caught.exception))
        self.assertIn("invalid keys file", str(caught.exception))

    def test_torn_files_are_refused_and_the_log_is_folded(self):
        """keys.log cut short or holding a bad line: llmlimitd does not start and says
        which file; put back whole, it starts with every key. After KEYS_LOG_LINES_MIN
        changes more than there are keys the log is folded into keys.json (and emptied);
        a restart loads both, and a torn keys.json is refused the same way. A
        keys.json.tmp left by a cut rewrite is removed and never read."""
        server = self.gw.server
        made = [server.request("POST", KEYS, {"caller": "t%d" % i, "team": "torn"})[2]
                for i in range(3)]
        server.stop()
        log = os.path.join(server.data_dir, "keys.log")
        self.assertFalse(os.path.exists(os.path.join(server.data_dir, "keys.json")))
        self.tear(log, [b"cut", b'"caller":"t1"'], "keys.log")
        server.start()
        for i in range(KEYS_LOG_LINES_MIN + 3):
            status, _, body = server.request("PATCH", KEYS + "/" + made[0]["id"],
                                             {"metadata": {"n": str(i)}})
            self.assertEqual(status, 200, body)
        self.assertLess(os.path.getsize(log), 4096)  # folded and emptied
        server.kill()
        server.start()
        self.assertEqual(server.request("GET", KEYS + "/" + made[0]["id"])[2]["metadata"],
                         {"n": str(KEYS_LOG_LINES_MIN + 2)})
        server.stop()
        path = os.path.join(server.data_dir, "keys.json")
        self.tear(path, [b"cut", b'"caller":"t1"'], "keys.json")
        with open(path + ".tmp", "wb") as f:
            f.write(b'{"version":1,"keys":[{"id":')
        server.start()
        self.assertFalse(os.path.exists(path + ".tmp"))
        for body in made:
            status, _, _ = self.gw.call(body["secret"], "/v1/models", method="GET")
            self.assertEqual(status, 200)

    def tear(self, path, ways, name):
        """Each way of tearing the file (b"cut": its second half gone; else a caller made
        a number) stops the start; the whole file is put back."""
        with open(path, "rb") as f:
            whole = f.read()
        for way in ways:
            torn = whole[:len(whole) // 2] if way == b"cut" else whole.replace(way, b'"caller":1')
            self.assertNotEqual(torn, whole)
            with open(path, "wb") as f:
                f.write(torn)
            self.assert_refused_at_start(name)
        with open(path, "wb") as f:
            f.write(whole)

    def test_the_key_count_bound(self):
        """A keys.json of KEYS_COUNT_MAX keys loads, and one more create is a 409
        too_many_keys that changes nothing; a file of one more key is refused at start."""
        server = self.gw.server
        server.stop()
        path = os.path.join(server.data_dir, "keys.json")
        for count in (KEYS_COUNT_MAX, KEYS_COUNT_MAX + 1):
            lines = []
            for i in range(count):
                digest = hashlib.sha256(b"secret-%d" % i).hexdigest()
                lines.append('{"id":"key_%016x","sha256":"%s","first_sha256":"%s","caller":"c%d",'
                             '"team":"t","created_at_unix_ms":1}' % (i + 1, digest, digest, i))
            with open(path, "w") as f:
                f.write('{"version":1,"keys":[\n' + ",\n".join(lines) + "\n]}\n")
            if count > KEYS_COUNT_MAX:
                with self.assertRaises(ServerError) as caught:
                    server.start()
                self.assertIn("at most %d keys" % KEYS_COUNT_MAX, str(caught.exception))
                continue
            server.start()
            status, _, body = server.request("POST", KEYS, {"caller": "one-more", "team": "t"})
            self.assertEqual(status, 409, body)
            self.assertIn("too_many_keys", body["error"])
            self.assertEqual(all_keys_count(server, "caller=one-more"), 0)
            status, _, body = server.request("GET", KEYS + "/key_%016x" % KEYS_COUNT_MAX)
            self.assertEqual((status, body["caller"]), (200, "c%d" % (KEYS_COUNT_MAX - 1)))
            server.stop()


def ids_on_disk(data_dir):
    """The ids keys.json and keys.log hold; every line of the log is whole JSON."""
    ids = set()
    path = os.path.join(data_dir, "keys.json")
    if os.path.exists(path):
        with open(path) as f:
            ids.update(k["id"] for k in json.load(f)["keys"])
    with open(os.path.join(data_dir, "keys.log"), "rb") as f:
        data = f.read()
    assert data == b"" or data.endswith(b"\n"), data[-200:]
    for line in data.splitlines():
        ids.add(json.loads(line)["key"]["id"])
    return ids


def all_keys_count(server, query):
    status, _, page = server.request("GET", KEYS + "?" + query)
    assert status == 200, page
    return len(page["keys"])


if __name__ == "__main__":
    skip_unless_backend()
    unittest.main()

"""The registry file (DATA_DIR/limits.json) survives a crash at any point of
its rewrite, through the real llmlimitd: kill -9 while admin changes run,
a change the disk refused followed by a crash, and a stale limits.json.tmp
at start. After every restart limits.json and GET /v1/admin/limits agree,
every acknowledged change is there, and the one change cut short is either
wholly there or not at all.

The backend comes from --backend (default memory); sqlite keeps limits in
its database too, which is where file and backend could disagree."""

import http.client
import json
import os
import random
import threading
import time
import unittest

import harness
from harness import Server, backend_from_argv, binary_from_argv

BINARY = binary_from_argv()
BACKEND = backend_from_argv()

ROUNDS = 15
KEYS = ["reg:%02d" % i for i in range(12)]


def rolling(key, capacity):
    return {"key": key, "kind": "rolling", "capacity": capacity, "window_seconds": 60}


def file_states(server):
    with open(os.path.join(server.data_dir, "limits.json")) as f:
        return json.load(f)


def listed_states(server):
    status, _, body = server.request("GET", "/v1/admin/limits")
    assert status == 200, body
    return body["limits"]


def capacities(states):
    return {s["definition"]["key"]: s["definition"]["capacity"] for s in states}


class AdminLoad(threading.Thread):
    """Puts, changes and deletes limits until the server dies under it.
    acknowledged: key -> capacity (None: deleted) as answered 200;
    in_flight: (key, capacity or None) of the change without an answer."""

    def __init__(self, server, acknowledged, seed):
        super().__init__(daemon=True)
        self.server = server
        self.acknowledged = acknowledged
        self.rng = random.Random(seed)
        self.in_flight = None
        self.answers = 0
        self.unexpected = []

    def run(self):
        while True:
            key = self.rng.choice(KEYS)
            live = self.acknowledged.get(key) is not None
            delete = live and self.rng.random() < 0.3
            capacity = None if delete else self.rng.randint(1, 10 ** 6)
            self.in_flight = (key, capacity)
            try:
                if delete:
                    status, _, body = self.server.request("DELETE", "/v1/admin/limits/" + key)
                else:
                    status, _, body = self.server.put_limit(rolling(key, capacity))
            except (OSError, http.client.HTTPException):
                return  # killed: this change's outcome is unknown
            self.in_flight = None
            self.answers += 1
            if status != 200:
                self.unexpected.append((key, capacity, status, body))
                return
            self.acknowledged[key] = capacity


class Registry(unittest.TestCase):
    def server(self, data_dir=None):
        server = Server(BINARY, backend=BACKEND, data_dir=data_dir)
        self.addCleanup(server.cleanup)
        return server

    def assert_agree(self, server):
        """limits.json and the backend hold the same states."""
        self.assertEqual(file_states(server), listed_states(server))

    def test_kill_9_during_rewrites_keeps_file_and_backend_together(self):
        """kill -9 amid admin changes: file == backend after restart; acknowledged changes all there."""
        server = self.server().start()
        acknowledged = {}
        rng = random.Random(77)
        answers = 0
        for round_number in range(ROUNDS):
            load = AdminLoad(server, acknowledged, round_number)
            load.start()
            time.sleep(rng.uniform(0.05, 0.4))
            server.kill()
            load.join(10)
            self.assertEqual(load.unexpected, [])
            answers += load.answers
            server.start()
            self.assert_agree(server)
            seen = capacities(listed_states(server))
            for key in KEYS:
                want = {acknowledged.get(key)}
                if load.in_flight is not None and load.in_flight[0] == key:
                    want.add(load.in_flight[1])  # cut short: either way, never half
                self.assertIn(seen.get(key), want, (round_number, key, load.in_flight))
                acknowledged[key] = seen.get(key)
            self.assertFalse(os.path.exists(os.path.join(server.data_dir, "limits.json.tmp")))
        self.assertGreater(answers, ROUNDS, "the changes hardly ran")
        print("%d rounds, %d acknowledged changes" % (ROUNDS, answers))

    def test_a_change_the_disk_refused_stays_undone_after_a_crash(self):
        """503 registry_write_failed, then kill -9: after restart nothing of those changes is there."""
        server = self.server().start()
        self.assertEqual(server.put_limit(rolling("undo:a", 5))[0], 200)
        before = listed_states(server)
        blocker = os.path.join(server.data_dir, "limits.json.tmp")
        os.mkdir(blocker)  # no limits.json.tmp can be created: as a full disk, for root too
        try:
            answers = [server.put_limit(rolling("undo:new", 5)),
                       server.put_limit(rolling("undo:a", 50)),
                       server.request("DELETE", "/v1/admin/limits/undo:a")]
            for status, _, body in answers:
                self.assertEqual((status, body), (503, {"error": "registry_write_failed"}))
            self.assertEqual(listed_states(server), before)
            server.kill()
        finally:
            os.rmdir(blocker)
        server.start()
        self.assertEqual(listed_states(server), before)
        self.assert_agree(server)

    def test_stale_tmp_at_start_is_removed_and_never_read(self):
        """A limits.json.tmp left by a cut-short rewrite: the start reads limits.json and removes it."""
        server = self.server().start()
        self.assertEqual(server.put_limit(rolling("stale:a", 5))[0], 200)
        before = listed_states(server)
        self.assertEqual(server.stop(), 0)
        stale = os.path.join(server.data_dir, "limits.json.tmp")
        with open(stale, "w") as f:
            f.write('[{"definition":{"key":"stale:half","kind":"rol')
        server.start()
        self.assertEqual(listed_states(server), before)
        self.assertFalse(os.path.exists(stale))
        self.assertEqual(server.put_limit(rolling("stale:b", 5))[0], 200)
        self.assert_agree(server)


if __name__ == "__main__":
    harness.main()

"""SIGTERM while the HTTP workers are busy, with the main thread slowed.

Usage: test_shutdown.py --binary build/llmlimitd --shim PATH/libslow_epoll_del.so

The shim (slow_epoll_del.c) delays the main thread's removals from epoll sets,
which made every such shutdown abort while llmlimitd stopped accepting through
the HTTP library it used before its own server (docs/hardening.md,
"Shutdown"): stopping must never race a worker over a descriptor.
"""

import os
import socket
import sys
import unittest

from harness import Server, binary_from_argv, stop_under_load


def shim_from_argv():
    for i, arg in enumerate(sys.argv):
        if arg == "--shim" and i + 1 < len(sys.argv):
            path = sys.argv[i + 1]
            del sys.argv[i : i + 2]
            return os.path.abspath(path)
    return None


BINARY = binary_from_argv()
SHIM = shim_from_argv()
RUNS = 5
CLIENTS = 4


def shim_env():
    # An ASan build checks that its runtime is the first library loaded.
    asan = os.environ.get("ASAN_OPTIONS", "")
    return {"LD_PRELOAD": SHIM,
            "ASAN_OPTIONS": (asan + ":" if asan else "") + "verify_asan_link_order=0"}


@unittest.skipIf(SHIM is None, "no --shim given")
class SlowMainThread(unittest.TestCase):
    def test_sigterm_under_keep_alive_load_exits_zero(self):
        """SIGTERM while 4 keep-alive clients keep the workers awake: 5 runs, each exits 0."""
        for _ in range(RUNS):
            with Server(BINARY, env=shim_env()) as server:
                with open("/proc/%d/maps" % server.process.pid) as maps:
                    self.assertTrue(SHIM in maps.read(), "the shim is not loaded: " + SHIM)
                answered = []

                def client(stop):
                    try:
                        with socket.create_connection((server.host, server.port), 2) as s:
                            while not stop.is_set():
                                s.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
                                if not s.recv(4096):
                                    return
                                answered.append(1)
                    except OSError:  # closed by the drain
                        pass

                # SIGTERM once every client has had answers (the workers are busy).
                self.assertEqual(stop_under_load(server, client, CLIENTS, 0.3,
                                                 loaded=lambda: len(answered) >= 4 * CLIENTS), 0)
                self.assertGreater(len(answered), 0, "the clients never got an answer")


if __name__ == "__main__":
    unittest.main(verbosity=2)

"""The test harness (harness.py) never hides a failure: a server that exits
non-zero when a test stops it (as after a sanitizer report) fails the test,
a server that died by itself is reported when stopped, and request() never
sends a request twice after a connection error. Against stand-ins: a script
that behaves like llmlimitd at start, and an in-process HTTP server."""

import os
import signal
import socket
import sys
import tempfile
import threading
import unittest

import harness
from harness import Server, ServerError, binary_from_argv

binary_from_argv()  # ctest passes the real binary; these tests use stand-ins

# Prints the listening line like llmlimitd, then exits with EXIT_CODE on SIGTERM.
FAKE_DAEMON = r"""
import os, signal, socket, sys, time
code = int(os.environ["EXIT_CODE"])
listener = socket.socket()
listener.bind(("127.0.0.1", 0))
listener.listen()
signal.signal(signal.SIGTERM, lambda *_: os._exit(code))
sys.stderr.write("llmlimitd listening on 127.0.0.1:%d\n" % listener.getsockname()[1])
sys.stderr.flush()
if os.environ.get("DIE_AT_ONCE"):
    os._exit(code)
while True:
    time.sleep(1)
"""


class FakeDaemon(Server):
    def __init__(self, exit_code, die_at_once=False):
        env = {"EXIT_CODE": str(exit_code)}
        if die_at_once:
            env["DIE_AT_ONCE"] = "1"
        super().__init__(sys.executable, env=env)

    def command(self):
        return [sys.executable, "-c", FAKE_DAEMON]


class DropsFirstRequest(threading.Thread):
    """An HTTP server that counts requests and closes the connection of the
    first one without answering; later ones get 200."""

    def __init__(self):
        super().__init__(daemon=True)
        self.listener = socket.socket()
        self.listener.bind(("127.0.0.1", 0))
        self.listener.listen()
        self.port = self.listener.getsockname()[1]
        self.requests = 0

    def run(self):
        while True:
            try:
                conn, _ = self.listener.accept()
            except OSError:
                return
            with conn:
                data = b""
                while b"\r\n\r\n" not in data:
                    chunk = conn.recv(4096)
                    if not chunk:
                        break
                    data += chunk
                if not data:
                    continue
                self.requests += 1
                if self.requests > 1:
                    conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n"
                                 b"Connection: close\r\n\r\n{}")


class Harness(unittest.TestCase):
    def test_nonzero_exit_on_sigterm_fails_the_stop(self):
        """stop() raises when a stopped server exits non-zero (what a sanitizer report does)."""
        server = FakeDaemon(exit_code=1).start()
        self.addCleanup(server.cleanup)
        with self.assertRaises(ServerError):
            server.stop()
        self.assertIsNone(server.process)

    def test_clean_exit_passes_and_kill_is_not_checked(self):
        """Exit 0 on SIGTERM passes; SIGKILL is a crash on purpose and is not checked."""
        server = FakeDaemon(exit_code=0).start()
        self.assertEqual(server.stop(), 0)
        server.start()
        self.assertEqual(server.kill(), -signal.SIGKILL)
        server.cleanup()

    def test_server_that_died_by_itself_is_reported(self):
        """A server that exited non-zero on its own fails the stop, and the context manager."""
        server = FakeDaemon(exit_code=3, die_at_once=True)
        with self.assertRaises(ServerError):
            with server:
                server.process.wait(5)
        self.assertIsNone(server.process)

    def test_cleanup_checks_the_exit_status(self):
        """cleanup() of a running server stops it gracefully, and a bad exit fails it."""
        data_dir = tempfile.mkdtemp(prefix="llmlimit-harness-")
        server = FakeDaemon(exit_code=1)
        server.data_dir, server.owns_data_dir = data_dir, True
        server.start()
        with self.assertRaises(ServerError):
            server.cleanup()
        self.assertFalse(os.path.exists(data_dir))

    def test_request_is_never_sent_twice(self):
        """A connection dropped before the answer raises; the request was sent once."""
        fake = DropsFirstRequest()
        fake.start()
        self.addCleanup(fake.listener.close)
        server = Server(sys.executable)
        self.addCleanup(server.cleanup)
        server.host, server.port = "127.0.0.1", fake.port
        with self.assertRaises((OSError, ConnectionError)):
            server.request("GET", "/healthz")
        self.assertEqual(fake.requests, 1)
        status, _, _ = server.request("GET", "/healthz")  # a new connection, a new request
        self.assertEqual((status, fake.requests), (200, 2))


if __name__ == "__main__":
    harness.main()

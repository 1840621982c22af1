"""Runs the real llmlimitd binary for integration tests.

Server starts build/llmlimitd on a free loopback port with a fresh data
directory, waits for its "llmlimitd listening on HOST:PORT" line, and speaks
HTTP/1.1 to it with keep-alive connections (one per thread). Python standard
library only.
"""

import http.client
import json
import os
import re
import shutil
import select
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import unittest
import urllib.parse

LISTENING = re.compile(r"llmlimitd listening on ([0-9.]+):([0-9]+)")
# How long a start may take before the test fails: generous, because it says
# that the server starts, not how fast (a keys.json of 100,000 keys under
# AddressSanitizer on a loaded machine takes over 10 s). A start that fails
# ends sooner: the process exits and says why.
START_TIMEOUT_S = 120.0


def binary_from_argv(default="build/llmlimitd"):
    """Takes --binary PATH out of sys.argv (ctest passes it) and returns it."""
    for i, arg in enumerate(sys.argv):
        if arg == "--binary" and i + 1 < len(sys.argv):
            path = sys.argv[i + 1]
            del sys.argv[i : i + 2]
            return os.path.abspath(path)
    return os.path.abspath(os.environ.get("LLMLIMITD", default))


def backend_from_argv(default="memory"):
    """Takes --backend NAME out of sys.argv (ctest passes it) and returns it."""
    for i, arg in enumerate(sys.argv):
        if arg == "--backend" and i + 1 < len(sys.argv):
            name = sys.argv[i + 1]
            del sys.argv[i : i + 2]
            return name
    return default


class ServerError(Exception):
    pass


def stop_under_load(server, client, count, settle_s, loaded=None):
    """Runs client(stop_event) on count threads, stops the server with SIGTERM
    after settle_s (and once loaded() is true, when given: on a slow machine
    the clients may need longer to get going), and returns its exit code
    once the threads have ended (Server.stop raises with the end of stderr
    when it is not 0)."""
    stop = threading.Event()
    threads = [threading.Thread(target=client, args=(stop,)) for _ in range(count)]
    for thread in threads:
        thread.start()
    time.sleep(settle_s)
    if loaded is not None and not wait_until(loaded, timeout_s=60):
        stop.set()
        raise ServerError("the load never got going")
    try:
        return server.stop(timeout_s=10.0)
    finally:
        stop.set()
        for thread in threads:
            thread.join(10)


class Server:
    """One llmlimitd process. Use as a context manager or call start()/stop()."""

    def __init__(self, binary, backend="memory", data_dir=None, args=(), env=None):
        self.binary = binary
        self.backend = backend
        self.owns_data_dir = data_dir is None
        self.data_dir = data_dir or tempfile.mkdtemp(prefix="llmlimit-test-")
        self.args = list(args)
        self.env = dict(os.environ)
        self.env.update(env or {})
        self.process = None
        self.host = None
        self.port = None
        self.stderr_lines = []
        self._stderr_thread = None
        self._local = threading.local()

    # -- process control -------------------------------------------------

    def command(self):
        return [
            self.binary,
            "--listen", "127.0.0.1:0",
            "--backend", self.backend,
            "--data-dir", self.data_dir,
        ] + self.args

    def start(self):
        """Starts the server and waits until it accepts requests."""
        self.stderr_lines = []
        self.host = None
        self.port = None
        self.process = subprocess.Popen(
            self.command(), stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE, env=self.env, text=True, bufsize=1)
        ready = threading.Event()

        def pump():
            for line in self.process.stderr:
                self.stderr_lines.append(line.rstrip("\n"))
                match = LISTENING.search(line)
                if match and not ready.is_set():
                    self.host, self.port = match.group(1), int(match.group(2))
                    ready.set()
            ready.set()

        self._stderr_thread = threading.Thread(target=pump, daemon=True)
        self._stderr_thread.start()
        if not ready.wait(START_TIMEOUT_S) or self.port is None:
            self.kill()
            raise ServerError("llmlimitd did not start:\n" + self.stderr_text())
        self._local = threading.local()
        return self

    def stop(self, sig=signal.SIGTERM, timeout_s=10.0, check=True):
        """Sends sig and waits; returns the exit code. A graceful stop
        (SIGTERM, SIGINT) must exit 0: with check, any other code raises
        ServerError with the end of stderr (a sanitizer report at exit makes
        the exit code non-zero, and so fails the test that stopped it)."""
        if self.process is None:
            return None
        if self.process.poll() is None:
            self.process.send_signal(sig)
        try:
            code = self.process.wait(timeout_s)
        except subprocess.TimeoutExpired:
            self.process.kill()
            code = self.process.wait()
            self._reap()
            raise ServerError("llmlimitd did not exit within %.1fs of signal %d:\n%s"
                              % (timeout_s, sig, self.stderr_tail()))
        self._reap()
        if check and sig in (signal.SIGTERM, signal.SIGINT) and code != 0:
            raise ServerError("llmlimitd exited %d after signal %d:\n%s"
                              % (code, sig, self.stderr_tail()))
        return code

    def _reap(self):
        if self._stderr_thread is not None:
            self._stderr_thread.join(2.0)
        self.process = None

    def kill(self):
        """SIGKILL, as a crash would."""
        return self.stop(signal.SIGKILL)

    def restart(self, sig=signal.SIGTERM):
        self.stop(sig)
        return self.start()

    def wait_exit(self, timeout_s=10.0):
        """For a server expected to exit by itself: returns its exit code."""
        code = self.process.wait(timeout_s)
        self._reap()
        return code

    def stderr_tail(self, lines=60):
        return "\n".join(self.stderr_lines[-lines:])

    def stderr_text(self):
        return "\n".join(self.stderr_lines)

    def cleanup(self):
        """Stops a server still running (gracefully, its exit status
        checked) and removes the data directory it made."""
        try:
            if self.process is not None:
                self.stop()
        finally:
            if self.process is not None:
                self.stop(signal.SIGKILL)
            if self.owns_data_dir:
                shutil.rmtree(self.data_dir, ignore_errors=True)

    def __enter__(self):
        return self.start()

    def __exit__(self, exc_type, *exc):
        # A failing test keeps its own exception: the stop is then unchecked.
        try:
            if self.process is not None:
                self.stop(check=exc_type is None)
        finally:
            self.cleanup()

    # -- HTTP ------------------------------------------------------------

    @property
    def url(self):
        return "http://%s:%d" % (self.host, self.port)

    def _connection(self):
        """This thread's connection. One the server has closed meanwhile
        (idle timeout, Connection: close) is replaced before anything is
        sent on it, so a request is never lost to a stale connection."""
        conn = getattr(self._local, "conn", None)
        if conn is not None and (getattr(self._local, "port", None) != self.port
                                 or closed_by_server(conn)):
            conn.close()
            conn = None
        if conn is None:
            conn = http.client.HTTPConnection(self.host, self.port, timeout=30)
            self._local.conn = conn
            self._local.port = self.port
        return conn

    def request(self, method, path, body=None, token=None, headers=None, raw=None):
        """One HTTP request on this thread's keep-alive connection.

        body is JSON-encoded; raw (bytes or str) is sent as is instead.
        Returns (status, headers dict with lower-case names, parsed JSON or
        text)."""
        send_headers = {"Content-Type": "application/json"}
        if token is not None:
            send_headers["Authorization"] = "Bearer " + token
        send_headers.update(headers or {})
        payload = raw if raw is not None else (None if body is None else json.dumps(body))
        if isinstance(payload, str):
            payload = payload.encode()
        conn = self._connection()
        try:
            conn.request(method, path, body=payload, headers=send_headers)
            response = conn.getresponse()
            data = response.read()
        except (http.client.HTTPException, ConnectionError, OSError):
            # Never sent again: the request may have taken effect, and a
            # test must see that its outcome is unknown.
            conn.close()
            self._local.conn = None
            raise
        reply_headers = {k.lower(): v for k, v in response.getheaders()}
        if response.getheader("Connection", "").lower() == "close":
            conn.close()
            self._local.conn = None
        text = data.decode("utf-8", "replace")
        try:
            parsed = json.loads(text) if text else None
        except ValueError:
            parsed = text
        return response.status, reply_headers, parsed

    # -- API shortcuts -----------------------------------------------------

    def put_limit(self, definition, token=None):
        return self.request("PUT", "/v1/admin/limits", definition, token=token)

    def reserve(self, lease_id, requirements, caller=None, token=None):
        """requirements: dict key -> amount, or a list of {key, amount}."""
        if isinstance(requirements, dict):
            requirements = [{"key": k, "amount": v} for k, v in requirements.items()]
        body = {"lease_id": lease_id, "requirements": requirements}
        if caller is not None:
            body["caller"] = caller
        return self.request("POST", "/v1/reserve", body, token=token)

    def complete(self, lease_id, actuals=None, token=None):
        """actuals: dict key -> actual_amount."""
        actual_list = [{"key": k, "actual_amount": v} for k, v in (actuals or {}).items()]
        return self.request("POST", "/v1/complete",
                            {"lease_id": lease_id, "actuals": actual_list}, token=token)

    def release(self, lease_id, token=None):
        return self.request("POST", "/v1/release", {"lease_id": lease_id}, token=token)

    def usage(self, key, token=None, query=""):
        path = "/v1/usage/" + urllib.parse.quote(key, safe="")
        if query:
            path += "?" + query
        return self.request("GET", path, token=token)


def closed_by_server(conn):
    """True when the server closed conn's socket (EOF or reset waiting in it):
    an idle keep-alive connection has nothing to read otherwise."""
    sock = conn.sock
    if sock is None:
        return False
    try:
        readable, _, _ = select.select([sock], [], [], 0)
        if not readable:
            return False
        return sock.recv(1, socket.MSG_PEEK | socket.MSG_DONTWAIT) == b""
    except (BlockingIOError, InterruptedError):
        return False
    except OSError:
        return True


def main(warnings=None):
    """unittest.main for the test files: exit 0 when every test passed, 1 on
    a failure or error, and 77 (ctest's SKIP_RETURN_CODE) when every test
    was skipped, after printing why, so ctest reports the file as skipped
    rather than passed."""
    program = unittest.main(verbosity=2, exit=False, warnings=warnings)
    result = program.result
    if not result.wasSuccessful():
        sys.exit(1)
    if result.testsRun > 0 and len(result.skipped) == result.testsRun:
        reasons = sorted({reason for _, reason in result.skipped})
        print("SKIPPED: %s" % "; ".join(reasons))
        sys.stdout.flush()
        sys.exit(77)
    sys.exit(0)


def wait_until(predicate, timeout_s=30.0, interval_s=0.05):
    """Polls predicate until it returns truthy or the timeout passes. The
    default timeout is long: a condition that must come true is waited for
    as long as a busy machine needs, and costs nothing when it comes early."""
    deadline = time.monotonic() + timeout_s
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() >= deadline:
            return value
        time.sleep(interval_s)

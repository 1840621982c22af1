"""Test fixtures: the real llmlimitd (through tests/http/harness.py), a proxy
that injects faults in front of it, and a server that never answers."""

import http.client
import http.server
import json
import os
import socket
import sys
import threading
import time
import uuid

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.abspath(os.path.join(HERE, "..", "..", ".."))
sys.path.insert(0, os.path.join(REPO, "clients", "python"))
sys.path.insert(0, os.path.join(REPO, "tests", "http"))

import harness  # noqa: E402


def binary():
    return os.environ.get("LLMLIMITD") or os.path.join(REPO, "build", "llmlimitd")


def unique_key(name):
    """A limit key no other test uses, so tests can share one server."""
    return "test:%s:%s" % (name, uuid.uuid4().hex[:12])


class Server(harness.Server):
    """llmlimitd that comes back on the same port after a restart, as a
    restarted service would, so clients keep their base URL."""

    def __init__(self, **kwargs):
        super().__init__(binary(), backend="memory", **kwargs)
        self.fixed_port = None

    def command(self):
        command = super().command()
        if self.fixed_port is not None:
            command[command.index("127.0.0.1:0")] = "127.0.0.1:%d" % self.fixed_port
        return command

    def start(self):
        super().start()
        self.fixed_port = self.port
        return self

    def put(self, definition):
        status, _, body = self.put_limit(definition)
        assert status == 200, (status, body)

    def usage_of(self, key):
        status, _, body = self.usage(key)
        assert status == 200, (status, body)
        return body

    def waiting(self):
        """Reserves waiting for capacity now (llmlimit_wait_waiting)."""
        status, _, text = self.request("GET", "/metrics")
        assert status == 200, (status, text)
        for line in text.splitlines():
            if line.startswith("llmlimit_wait_waiting "):
                return int(line.split()[1])
        raise AssertionError("llmlimit_wait_waiting missing from /metrics")

    def wait_queued(self, count, timeout_s=10.0):
        """Waits until count reserves wait on the server; False on timeout."""
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if self.waiting() == count:
                return True
            time.sleep(0.01)
        return False


def rolling(key, capacity, window_seconds=60):
    return {"key": key, "kind": "rolling", "capacity": capacity, "window_seconds": window_seconds}


def concurrency(key, capacity, timeout_seconds=60):
    return {"key": key, "kind": "concurrency", "capacity": capacity,
            "timeout_seconds": timeout_seconds}


def budget(key, capacity, period="month"):
    return {"key": key, "kind": "budget", "capacity": capacity, "period": period,
            "unit": "usd_micros"}


class FaultProxy:
    """HTTP proxy in front of a Server. Records every request; the first
    `failures` requests to `path` get a fault instead of a plain forward:
      "503":        answered 503 backend_error, never forwarded;
      "503_after":  forwarded, the server's answer dropped, 503 answered;
      "drop_after": forwarded, then the connection closed with no answer.
    The last two are the lost-answer cases only the same lease id survives."""

    def __init__(self, server, path="/v1/reserve", failures=0, mode="503"):
        self.server = server
        self.path = path
        self.failures = failures
        self.mode = mode
        self.requests = []  # (method, path, parsed body)
        self.lock = threading.Lock()
        self.httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self.httpd.daemon_threads = True
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)
        self.thread.start()

    @property
    def url(self):
        return "http://127.0.0.1:%d" % self.httpd.server_address[1]

    def bodies(self, path):
        with self.lock:
            return [body for _, p, body in self.requests if p == path]

    def close(self):
        self.httpd.shutdown()
        self.httpd.server_close()

    def _fault_for(self, method, path, body):
        with self.lock:
            self.requests.append((method, path, body))
            if path == self.path and self.failures > 0:
                self.failures -= 1
                return self.mode
        return None

    def _forward(self, method, path, raw, headers):
        conn = http.client.HTTPConnection(self.server.host, self.server.port, timeout=30)
        try:
            conn.request(method, path, body=raw, headers=headers)
            reply = conn.getresponse()
            return reply.status, reply.read()
        finally:
            conn.close()

    def _handler(self):
        proxy = self

        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args):
                pass

            def _answer(self, status, data):
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def _handle(self):
                raw = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                try:
                    body = json.loads(raw) if raw else None
                except ValueError:
                    body = None
                fault = proxy._fault_for(self.command, self.path, body)
                unavailable = b'{"error":"backend_error"}'
                if fault == "503":
                    return self._answer(503, unavailable)
                headers = {k: v for k, v in self.headers.items()
                           if k.lower() in ("content-type", "authorization")}
                status, data = proxy._forward(self.command, self.path, raw or None, headers)
                if fault == "503_after":
                    return self._answer(503, unavailable)
                if fault == "drop_after":
                    self.close_connection = True
                    return None
                return self._answer(status, data)

            do_GET = do_POST = do_PUT = do_DELETE = _handle

        return Handler


class SilentServer:
    """Accepts connections and reads requests but never answers."""

    def __init__(self):
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(64)
        self.connections = []
        self.thread = threading.Thread(target=self._accept, daemon=True)
        self.thread.start()

    @property
    def url(self):
        return "http://127.0.0.1:%d" % self.sock.getsockname()[1]

    def _accept(self):
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            self.connections.append(conn)

    def close(self):
        try:
            self.sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        self.sock.close()
        for conn in self.connections:
            conn.close()
        self.thread.join(2.0)

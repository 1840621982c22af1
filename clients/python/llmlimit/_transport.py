"""One HTTP attempt against llmlimitd over a pool of keep-alive connections.

Thread-safe: each attempt takes a connection out of the pool and puts it
back only after a complete response, so threads never share a connection.
"""

import http.client
import json
import socket
import threading
import urllib.parse
from typing import Any, Dict, List, Optional, Tuple

from ._protocol import Call, Response, TransportError

# Idle keep-alive connections kept per client; more are opened on demand
# and closed after use.
POOL_IDLE_CONNECTIONS_MAX = 32

USER_AGENT = "llmlimit-python/0.1"

# Errors that mean a reused keep-alive connection had been closed by the
# server before this request: safe to resend at once on a new connection.
_STALE_CONNECTION_ERRORS = (http.client.RemoteDisconnected, ConnectionResetError,
                            BrokenPipeError, ConnectionAbortedError)


class Cancel:
    """Lets another thread end an attempt in flight: cancel() shuts its
    connection down, so the blocked attempt returns a TransportError and
    the server sees the client leave (a waiting reserve leaves its queue)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._conn: Optional[http.client.HTTPConnection] = None
        self.cancelled = False

    def cancel(self) -> None:
        with self._lock:
            self.cancelled = True
            conn = self._conn
        if conn is not None:
            _shut(conn)

    def _attach(self, conn: http.client.HTTPConnection) -> None:
        with self._lock:
            self._conn = conn
            cancelled = self.cancelled
        if cancelled:
            _shut(conn)


def _shut(conn: http.client.HTTPConnection) -> None:
    sock = conn.sock
    if sock is not None:
        try:
            sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass


class Transport:
    def __init__(self, base_url: str, token: Optional[str], admin_token: Optional[str]):
        parts = urllib.parse.urlsplit(base_url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError("base_url must be http://HOST[:PORT] or https://...: %r" % base_url)
        self._https = parts.scheme == "https"
        self._host = parts.hostname
        self._port = parts.port or (443 if self._https else 80)
        self._prefix = parts.path.rstrip("/")
        self._token = token
        self._admin_token = admin_token or token
        self._idle: List[http.client.HTTPConnection] = []
        self._lock = threading.Lock()

    def close(self) -> None:
        with self._lock:
            idle, self._idle = self._idle, []
        for conn in idle:
            conn.close()

    def _new_connection(self, timeout_s: float) -> http.client.HTTPConnection:
        if self._https:
            return http.client.HTTPSConnection(self._host, self._port, timeout=timeout_s)
        return http.client.HTTPConnection(self._host, self._port, timeout=timeout_s)

    def _take(self, timeout_s: float) -> Tuple[http.client.HTTPConnection, bool]:
        with self._lock:
            conn = self._idle.pop() if self._idle else None
        if conn is None:
            return self._new_connection(timeout_s), False
        conn.timeout = timeout_s
        if conn.sock is not None:
            conn.sock.settimeout(timeout_s)
        return conn, True

    def _give_back(self, conn: http.client.HTTPConnection) -> None:
        with self._lock:
            if len(self._idle) < POOL_IDLE_CONNECTIONS_MAX:
                self._idle.append(conn)
                return
        conn.close()

    def _headers(self, admin: bool, has_body: bool) -> Dict[str, str]:
        headers = {"User-Agent": USER_AGENT, "Accept": "application/json"}
        if has_body:
            headers["Content-Type"] = "application/json"
        token = self._admin_token if admin else self._token
        if token:
            headers["Authorization"] = "Bearer " + token
        return headers

    def attempt(self, call: Call, cancel: Optional[Cancel] = None) -> Any:
        """Returns a Response, or a TransportError when there was no answer
        (returned, not raised, so the retry rules see it as an outcome).
        cancel, when given, may end the attempt from another thread."""
        payload = None if call.body is None else json.dumps(call.body).encode()
        headers = self._headers(call.admin, payload is not None)
        conn, reused = self._take(call.timeout_s)
        try:
            return self._exchange(conn, call, payload, headers, cancel)
        except _STALE_CONNECTION_ERRORS as error:
            conn.close()
            if not reused:
                return TransportError("%s %s: %r" % (call.method, call.path, error))
        except (OSError, http.client.HTTPException, ValueError) as error:
            conn.close()
            return TransportError("%s %s: %r" % (call.method, call.path, error))
        conn = self._new_connection(call.timeout_s)
        try:
            return self._exchange(conn, call, payload, headers, cancel)
        except (OSError, http.client.HTTPException, ValueError) as error:
            conn.close()
            return TransportError("%s %s: %r" % (call.method, call.path, error))

    def _exchange(self, conn: http.client.HTTPConnection, call: Call,
                  payload: Optional[bytes], headers: Dict[str, str],
                  cancel: Optional[Cancel] = None) -> Response:
        conn.request(call.method, self._prefix + call.path, body=payload, headers=headers)
        if cancel is not None:
            cancel._attach(conn)  # connected now: a cancel shuts it down
        reply = conn.getresponse()
        data = reply.read()
        queue_full = (reply.getheader("x-llmlimit-queue") or "").strip().lower() == "full"
        response = _response(reply.status, data, queue_full)
        if reply.will_close:
            conn.close()
        else:
            self._give_back(conn)
        return response


def _response(status: int, data: bytes, queue_full: bool = False) -> Response:
    text = data.decode("utf-8", "replace")
    try:
        body = json.loads(text) if text else None
    except ValueError:
        body = None
    if isinstance(body, dict):
        error = str(body.get("error") or "")
    else:
        error = text.strip()[:200]
    if status == 200 and not isinstance(body, dict):
        # A 200 we cannot read tells us nothing definitive.
        raise ValueError("HTTP 200 with a body that is not a JSON object")
    return Response(status, body, error, queue_full)

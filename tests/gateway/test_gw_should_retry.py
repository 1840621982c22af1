"""x-should-retry: false on every answer of the gateway's routes that a retry
cannot change (docs/gateway.md, "Answers a retry cannot change"), on every
surface (chat completions, completions, embeddings, Responses, Messages):
a body that is not JSON (400), no valid key (401), an unknown model (404), a
body over the limit (413, announced or sent chunked), a head the transport
cannot read (400), a limit the registry lacks (400 unknown_limit_key), a
budget held for longer than a minute (429), an upstream's 400 passed on;
and not on those a retry may change: a 429 that frees within a minute, an
upstream's 429 or 5xx passed on, 502, 504, and 503 backend_error (the
tigerbeetle backend with its cluster gone).

Backend from --backend (memory, sqlite, tigerbeetle)."""

import json
import socket
import unittest

from gw_harness import (CHAT, COMPLETIONS, EMBEDDINGS, MESSAGES, RESPONSES, Gateway,
                        GatewayTest, chat, skip_unless_backend)
from gw_harness import tearDownModule  # noqa: F401 - unittest calls it

MAX_BODY_BYTES = 65536

# Each surface: its route, a body for a model it serves, and whether its
# errors are in Anthropic's shape.
SURFACES = {
    "chat": (CHAT, lambda model="m-normal": chat(model), False),
    "completions": (COMPLETIONS, lambda model="m-normal": {"model": model, "prompt": "one two"},
                    False),
    "embeddings": (EMBEDDINGS, lambda model="m-normal": {"model": model, "input": "one two"},
                   False),
    "responses": (RESPONSES, lambda model="r-normal": {"model": model, "input": "one two"},
                  False),
    "messages": (MESSAGES, lambda model="a-normal": {
        "model": model, "max_tokens": 100, "messages": [{"role": "user", "content": "one"}]},
        True),
}


class ShouldRetry(GatewayTest, unittest.TestCase):
    gateway_options = {"args": ("--max-body-bytes", str(MAX_BODY_BYTES))}

    def assert_error(self, surface, status, headers, body, expect_status):
        self.assertEqual(status, expect_status, (surface, body))
        self.assertIsInstance(body, dict, (surface, body))
        if SURFACES[surface][2]:
            self.assertEqual(body["type"], "error", (surface, body))
            return body["error"]["message"]
        return body["error"]["message"]

    def assert_final(self, surface, status, headers, body, expect_status):
        message = self.assert_error(surface, status, headers, body, expect_status)
        self.assertEqual(headers.get("x-should-retry"), "false", (surface, status, headers))
        return message

    def assert_not_final(self, surface, status, headers, body, expect_status):
        message = self.assert_error(surface, status, headers, body, expect_status)
        self.assertNotIn("x-should-retry", headers, (surface, status, headers))
        return message

    def raw(self, request):
        """Sends bytes on a new connection; (status, headers, parsed body) of the answer."""
        with socket.create_connection((self.gw.server.host, self.gw.server.port), 30) as sock:
            sock.sendall(request)
            data = b""
            while True:
                piece = sock.recv(65536)
                if not piece:
                    break
                data += piece
        head, _, body = data.partition(b"\r\n\r\n")
        lines = head.decode("latin-1").split("\r\n")
        headers = {}
        for line in lines[1:]:
            name, _, value = line.partition(":")
            headers[name.strip().lower()] = value.strip()
        return int(lines[0].split()[1]), headers, json.loads(body)

    def test_a_body_that_is_not_json(self):
        c = self.gw.caller()
        for surface, (path, _, _) in SURFACES.items():
            self.assert_final(surface, *self.gw.call(c, path, raw="not json"), 400)

    def test_no_valid_key(self):
        for surface, (path, body, _) in SURFACES.items():
            self.assert_final(surface, *self.gw.call("llk-not-a-key", path, body()), 401)
            self.assert_final(surface, *self.gw.call(None, path, body()), 401)

    def test_an_unknown_model(self):
        c = self.gw.caller()
        for surface, (path, body, _) in SURFACES.items():
            self.assert_final(surface, *self.gw.call(c, path, body("no-such-model")), 404)

    def test_a_body_over_the_limit_announced(self):
        """Content-Length over --max-body-bytes: the transport answers 413 at once, in the
        route's shape."""
        c = self.gw.caller()
        for surface, (path, _, _) in SURFACES.items():
            head = ("POST %s HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer %s\r\n"
                    "Content-Type: application/json\r\nContent-Length: %d\r\n\r\n"
                    % (path, c.secret, MAX_BODY_BYTES + 1))
            self.assert_final(surface, *self.raw(head.encode()), 413)

    def test_a_body_over_the_limit_sent_chunked(self):
        c = self.gw.caller()
        piece = b"x" * (MAX_BODY_BYTES + 1)
        for surface, (path, _, _) in SURFACES.items():
            head = ("POST %s HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer %s\r\n"
                    "Content-Type: application/json\r\nTransfer-Encoding: chunked\r\n"
                    "Connection: close\r\n\r\n" % (path, c.secret))
            body = b"%x\r\n%s\r\n0\r\n\r\n" % (len(piece), piece)
            self.assert_final(surface, *self.raw(head.encode() + body), 413)

    def test_a_head_the_transport_cannot_read(self):
        for surface, (path, _, _) in SURFACES.items():
            head = "POST %s HTTP/1.1\r\nHost: x\r\nA header without a colon\r\n\r\n" % path
            self.assert_final(surface, *self.raw(head.encode()), 400)

    def test_a_limit_the_registry_lacks(self):
        """A template's key that is not defined (no default): 400 unknown_limit_key naming it
        (a 5xx would be retried by Codex whatever the header says)."""
        for surface, (path, body, _) in SURFACES.items():
            c = self.gw.caller(skip=("usd",))
            message = self.assert_final(surface, *self.gw.call(c, path, body()), 400)
            self.assertIn("'%s'" % c.keys["usd"], message)

    def test_a_budget_held_for_two_minutes(self):
        """A budget held whole by a lease for 120 s: the 429's retry is further than a minute
        away."""
        for surface, (path, body, _) in SURFACES.items():
            c = self.gw.caller(usd=10 ** 6)
            lease = "hold-" + c.name
            self.assertEqual(self.gw.server.reserve(lease, {c.keys["usd"]: 10 ** 6})[0],
                             200)
            status, headers, answer = self.gw.call(c, path, body())
            self.assert_final(surface, status, headers, answer, 429)
            self.assertGreater(int(headers["retry-after"]), 60, surface)
            self.assertEqual(self.gw.server.release(lease)[0], 200)

    def test_a_slot_that_frees_soon(self):
        """A concurrency limit held: the 429's retry is within a minute, so no header."""
        for surface, (path, body, _) in SURFACES.items():
            c = self.gw.caller(conc=1)
            lease = "hold-" + c.name
            self.assertEqual(self.gw.server.reserve(lease, {c.keys["conc"]: 1})[0], 200)
            status, headers, answer = self.gw.call(c, path, body())
            self.assert_not_final(surface, status, headers, answer, 429)
            self.assertLessEqual(int(headers["retry-after"]), 60, surface)
            self.assertEqual(self.gw.server.release(lease)[0], 200)

    def test_upstream_answers_passed_on(self):
        """An upstream's 400 cannot change on a retry; its 429 (retry in a second) and 500 may."""
        c = self.gw.caller()
        self.assert_final("chat", *self.gw.call(c, CHAT, chat("m-fail-400")), 400)
        self.assert_not_final("chat", *self.gw.call(c, CHAT, chat("m-fail-429")), 429)
        self.assert_not_final("chat", *self.gw.call(c, CHAT, chat("m-fail-500")), 500)

    def test_an_upstream_that_fails(self):
        """502 (the upstream cannot be reached) and 504 (it does not answer in time)."""
        c = self.gw.caller()
        self.assert_not_final("chat", *self.gw.call(c, CHAT, chat("m-refused")), 502)
        self.assert_not_final("chat", *self.gw.call(c, CHAT, chat("m-hang")), 504)


class BackendGone(unittest.TestCase):
    """503 backend_error: the outcome is unknown, a retry (same X-Request-Id) may succeed."""

    def test_backend_error_is_not_final(self):
        gw = Gateway.start(backend="tigerbeetle", args=("--tb-deadline-ms", "500"))
        try:
            c = gw.caller()
            self.assertEqual(gw.call(c, CHAT, chat("m-normal"))[0], 200)
            gw.cluster.kill()
            for surface, (path, body, anthropic) in SURFACES.items():
                status, headers, answer = gw.call(c, path, body())
                self.assertEqual(status, 503, (surface, answer))
                self.assertNotIn("x-should-retry", headers, surface)
        finally:
            gw.stop()


if __name__ == "__main__":
    skip_unless_backend()
    from gw_harness import BACKEND
    if BACKEND != "tigerbeetle":
        del BackendGone
    unittest.main(verbosity=2)

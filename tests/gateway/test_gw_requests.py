"""The gateway's request side (docs/gateway.md): X-Request-Id names the
lease so a retry never reserves or forwards twice; the x-ratelimit-*
headers on every answer's head (streams too) carry the reserved limits'
figures; the virtual key never goes upstream and the provider key never
comes back; a bad key is a 401, a model the key may not use a 404; bad
input is a clear OpenAI-shaped error that reserves and forwards nothing;
GET /v1/models lists the key's models.

Backend from --backend (memory, sqlite, tigerbeetle)."""

import json
import re
import socket
import threading
import unittest

from gw_harness import (AGENT_MODELS, CHAT, COMPLETIONS, EMBEDDINGS, MODELS, REMAINING_KNOWN,
                        GatewayTest, chat, estimate, skip_unless_backend)
from gw_harness import tearDownModule  # noqa: F401 - unittest calls it

UUID_V7 = re.compile(r"^gw:[0-9a-f]{8}-[0-9a-f]{4}-7[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$")
HASHED = re.compile(r"^gw:h:[0-9a-f]{40}$")
# OpenAI writes a reset as a duration: "20ms", "6s", "1m30s", "1h0m0s".
DURATION = re.compile(r"^(?:(\d+)ms|(?:(\d+)h)?(?:(\d+)m)?(\d+)s)$")


def duration_ms(text):
    match = DURATION.match(text)
    assert match, "not a duration: %r" % text
    ms, hours, minutes, seconds = (int(g) if g else 0 for g in match.groups())
    return ms + ((hours * 60 + minutes) * 60 + seconds) * 1000


class RequestId(GatewayTest, unittest.TestCase):

    def test_request_id_names_the_lease(self):
        """X-Request-Id: the lease is gw:<caller>:<id>; without it, gw: and a new UUIDv7."""
        c = self.gw.caller()
        status, headers, _ = self.gw.call(c, CHAT, chat("m-normal"),
                                          headers={"X-Request-Id": "order-17.a:b_c"})
        self.assertEqual(status, 200)
        self.assertEqual(headers["x-llmlimit-lease-id"], "gw:%s:order-17.a:b_c" % c.name)
        status, headers, _ = self.gw.call(c, CHAT, chat("m-normal"))
        self.assertEqual(status, 200)
        self.assertRegex(headers["x-llmlimit-lease-id"], UUID_V7)

    def test_retry_in_flight_is_409_and_a_finished_one_too_neither_forwarded(self):
        """A retry while the call runs: 409 request_in_progress; after it: 409 completed."""
        c = self.gw.caller()
        request_id = {"X-Request-Id": "slow-1"}
        first = {}
        thread = threading.Thread(target=lambda: first.update(
            answer=self.gw.call(c, CHAT, chat("m-slow-plain"), headers=request_id)))
        thread.start()
        try:
            self.gw.upstream.wait_for(lambda rs: rs and rs[-1]["body"]["model"].startswith(
                "fake-normal:delay_ms"))
            forwarded = self.forwarded()
            status, headers, body = self.gw.call(c, CHAT, chat("m-slow-plain"),
                                                 headers=request_id)
            self.assert_openai_error(status, body, 409, "request_in_progress")
            self.assertEqual(headers["x-llmlimit-lease-id"], "gw:%s:slow-1" % c.name)
            self.assertEqual(self.forwarded(), forwarded)
        finally:
            thread.join(30)
        self.assertEqual(first["answer"][0], 200)
        status, headers, body = self.gw.call(c, CHAT, chat("m-slow-plain"), headers=request_id)
        self.assert_openai_error(status, body, 409, "request_already_completed")
        self.assertEqual(self.forwarded(), forwarded)
        self.assertEqual(c.snapshot()["req"], (0, 1, 0))
        self.assertEqual(c.used("tok"), 4 + 7)

    def test_stream_retried_in_flight_is_not_forwarded_twice(self):
        """A streaming call's retry while it streams: 409 request_in_progress."""
        c = self.gw.caller()
        request_id = {"X-Request-Id": "stream-1"}
        sock = self.gw.raw_request(c, CHAT, chat("m-drip", stream=True), headers=request_id)
        try:
            self.gw.upstream.wait_for(lambda rs: rs and rs[-1]["stream"])
            forwarded = self.forwarded()
            status, _, body = self.gw.call(c, CHAT, chat("m-drip", stream=True),
                                           headers=request_id)
            self.assert_openai_error(status, body, 409, "request_in_progress")
            self.assertEqual(self.forwarded(), forwarded)
        finally:
            sock.shutdown(socket.SHUT_RDWR)
            sock.close()

    def test_retry_after_a_denial_is_a_new_attempt(self):
        """A retry of a denied call reserves again (a new lease each time), and
        is forwarded once the limit has room; a retry of that one is a 409."""
        c = self.gw.caller(conc=1)
        request_id = {"X-Request-Id": "deny-1"}
        holder = {}
        thread = threading.Thread(target=lambda: holder.update(
            answer=self.gw.call(c, CHAT, chat("m-slow-plain"))))
        thread.start()
        lease_ids = []
        try:
            self.gw.upstream.wait_for(lambda rs: rs and rs[-1]["body"]["model"].startswith(
                "fake-normal:delay_ms"))
            forwarded = self.forwarded()
            for _ in range(2):
                status, headers, body = self.gw.call(c, CHAT, chat("m-slow-plain"),
                                                     headers=request_id)
                self.assert_openai_error(status, body, 429, "rate_limit_exceeded")
                lease_ids.append(headers["x-llmlimit-lease-id"])
            self.assertEqual(self.forwarded(), forwarded)
        finally:
            thread.join(30)
        self.assertEqual(holder["answer"][0], 200)
        self.assertEqual(lease_ids[0], "gw:%s:deny-1" % c.name)
        self.assertRegex(lease_ids[1], HASHED)
        status, headers, _ = self.gw.call(c, CHAT, chat("m-slow-plain"), headers=request_id)
        self.assertEqual(status, 200)
        served = headers["x-llmlimit-lease-id"]
        self.assertRegex(served, HASHED)
        self.assertNotIn(served, lease_ids)
        self.assertEqual(self.forwarded(), forwarded + 1)
        status, headers, body = self.gw.call(c, CHAT, chat("m-slow-plain"), headers=request_id)
        self.assert_openai_error(status, body, 409, "request_already_completed")
        self.assertEqual(headers["x-llmlimit-lease-id"], served)
        self.assertEqual(self.forwarded(), forwarded + 1)
        self.assertEqual(c.used("req"), 2)

    def test_retry_after_a_released_failure_is_forwarded_again_up_to_the_cap(self):
        """An upstream failure releases the call, so its retry is a new call: it is
        forwarded again, charged nothing, until the id's attempts run out (17)."""
        c = self.gw.caller()
        request_id = {"X-Request-Id": "fail-1"}
        forwarded = self.forwarded()
        lease_ids = []
        for attempt in range(17):
            status, headers, body = self.gw.call(c, CHAT, chat("m-fail-500"), headers=request_id)
            self.assertEqual(status, 500, (attempt, body))
            lease_ids.append(headers["x-llmlimit-lease-id"])
        self.assertEqual(lease_ids[0], "gw:%s:fail-1" % c.name)
        self.assertEqual(len(set(lease_ids)), 17)
        self.assertEqual(self.forwarded(), forwarded + 17)
        status, _, body = self.gw.call(c, CHAT, chat("m-fail-500"), headers=request_id)
        self.assert_openai_error(status, body, 409, "request_attempts_exhausted")
        self.assertEqual(self.forwarded(), forwarded + 17)
        self.assertEqual(c.snapshot()["req"], (0, 0, 0))

    def test_request_id_outside_the_lease_id_alphabet_is_hashed_stably(self):
        """An id with other characters (or too long) becomes gw:h:<hash>, the same each time."""
        c = self.gw.caller()
        for request_id in ("order 17/\u00e9".encode().decode("latin-1"), "x" * 200):
            status, headers, _ = self.gw.call(c, CHAT, chat("m-normal"),
                                              headers={"X-Request-Id": request_id})
            self.assertEqual(status, 200)
            lease_id = headers["x-llmlimit-lease-id"]
            self.assertRegex(lease_id, HASHED)
            status, headers, body = self.gw.call(c, CHAT, chat("m-normal"),
                                                 headers={"X-Request-Id": request_id})
            self.assert_openai_error(status, body, 409, "request_already_completed")
            self.assertEqual(headers["x-llmlimit-lease-id"], lease_id)
        self.assertEqual(c.used("req"), 2)

    def test_same_request_id_of_two_callers_are_two_leases(self):
        """The id is the caller's own: another key's call with the same id is served."""
        one, two = self.gw.caller(), self.gw.caller()
        for c in (one, two):
            status, headers, _ = self.gw.call(c, CHAT, chat("m-normal"),
                                              headers={"X-Request-Id": "shared"})
            self.assertEqual(status, 200)
            self.assertEqual(headers["x-llmlimit-lease-id"], "gw:%s:shared" % c.name)

    def test_request_id_reused_for_another_request_is_a_409_conflict(self):
        """The same id with a different request (other amounts): 409, not forwarded."""
        c = self.gw.caller()
        headers = {"X-Request-Id": "reused"}
        self.assertEqual(self.gw.call(c, CHAT, chat("m-normal"), headers=headers)[0], 200)
        forwarded = self.forwarded()
        status, _, body = self.gw.call(c, CHAT, chat("m-normal", max_tokens=3), headers=headers)
        self.assert_openai_error(status, body, 409, "request_id_conflict")
        self.assertEqual(self.forwarded(), forwarded)


class RateLimitHeaders(GatewayTest, unittest.TestCase):

    def check_headers(self, headers, requests, requests_left, tokens, tokens_left):
        self.assertEqual(headers["x-ratelimit-limit-requests"], str(requests))
        self.assertEqual(headers["x-ratelimit-limit-tokens"], str(tokens))
        if not REMAINING_KNOWN:  # never a made-up figure
            for name in ("remaining-requests", "remaining-tokens", "reset-requests",
                         "reset-tokens"):
                self.assertNotIn("x-ratelimit-" + name, headers)
            return
        self.assertEqual(headers["x-ratelimit-remaining-requests"], str(requests_left))
        self.assertEqual(headers["x-ratelimit-remaining-tokens"], str(tokens_left))
        for name in ("x-ratelimit-reset-requests", "x-ratelimit-reset-tokens"):
            self.assertLessEqual(duration_ms(headers[name]), 3600 * 1000, name)
            self.assertGreater(duration_ms(headers[name]), 3500 * 1000, name)

    def test_headers_carry_the_tightest_limits_figures(self):
        """x-ratelimit-*: capacity, what is left after this call's reservation, and the reset."""
        c = self.gw.caller(req=50, tok=5000)
        body = chat("m-normal", max_tokens=30)
        input_tokens, output_tokens = estimate("chat", body)
        reserved = input_tokens + output_tokens
        status, headers, _ = self.gw.call(c, CHAT, body)
        self.assertEqual(status, 200)
        self.check_headers(headers, 50, 49, 5000, 5000 - reserved)
        # the first call is settled at its usage (4 + 7 tokens)
        status, headers, _ = self.gw.call(c, CHAT, body)
        self.assertEqual(status, 200)
        self.check_headers(headers, 50, 48, 5000, 5000 - 11 - reserved)

    def test_stream_head_carries_the_headers(self):
        """A stream's head carries the same x-ratelimit-* headers."""
        c = self.gw.caller(req=20, tok=3000)
        body = chat("m-normal", max_tokens=40, stream=True)
        input_tokens, output_tokens = estimate("chat", body)
        answer = self.gw.stream(c, CHAT, body)
        self.assertEqual(answer.status, 200)
        self.assertEqual(answer.headers["content-type"], "text/event-stream; charset=utf-8")
        self.check_headers(answer.headers, 20, 19, 3000, 3000 - input_tokens - output_tokens)

    @unittest.skipUnless(REMAINING_KNOWN, "the backend does not say what is left")
    def test_a_concurrency_limit_has_headers_of_its_own(self):
        """With 3 slots and 50 requests an hour, the requests headers show the hour's limit
        (what OpenAI's clients read as a rate), x-llmlimit-concurrency-* the slots."""
        c = self.gw.caller(req=50, conc=3)
        status, headers, _ = self.gw.call(c, CHAT, chat("m-normal"))
        self.assertEqual(status, 200)
        self.assertEqual(headers["x-ratelimit-limit-requests"], "50")
        self.assertEqual(headers["x-ratelimit-remaining-requests"], "49")
        self.assertEqual(headers["x-llmlimit-concurrency-limit"], "3")
        self.assertEqual(headers["x-llmlimit-concurrency-remaining"], "2")

    def test_upstream_rate_limit_headers_are_not_passed_on(self):
        """The upstream's own x-ratelimit-* figures never reach the client."""
        c = self.gw.caller(req=70)
        status, headers, _ = self.gw.call(c, CHAT, chat("m-normal"))
        self.assertEqual(status, 200)
        self.assertEqual(headers["x-ratelimit-limit-requests"], "70")
        self.assertNotIn("x-request-id", headers)
        self.assertNotIn("openai-processing-ms", headers)


class Security(GatewayTest, unittest.TestCase):

    def workload(self, c):
        """Answers of every kind: [(status, headers, body text)]."""
        answers = []
        for path, body in ((CHAT, chat("m-normal")), (COMPLETIONS, {"model": "m-normal",
                                                                    "prompt": "hi"}),
                           (EMBEDDINGS, {"model": "m-normal", "input": "hi"}),
                           (CHAT, chat("m-fail-400")), (CHAT, chat("m-fail-500")),
                           (CHAT, chat("m-wrong-key")), (CHAT, chat("m-refused")),
                           (CHAT, chat("m-close")), (CHAT, chat("nope")),
                           (CHAT, {"model": "m-normal", "messages": 7})):
            status, headers, answer = self.gw.call(c, path, body)
            answers.append((status, headers, json.dumps(answer)))
        answer = self.gw.stream(c, CHAT, chat("m-normal", stream=True))
        answers.append((answer.status, answer.headers, answer.raw))
        status, headers, answer = self.gw.call(c, "/v1/models", method="GET")
        answers.append((status, headers, json.dumps(answer)))
        return answers

    def test_virtual_key_never_reaches_the_upstream(self):
        """The upstream sees the provider key from the environment, never the caller's key."""
        c = self.gw.caller()
        self.gw.upstream.clear()
        self.workload(c)
        records = self.gw.upstream.wait_for(lambda rs: len(rs) >= 8 and all(
            r["end"] for r in rs))
        for record in records:
            expected = self.gw.wrong_key if record["body"]["model"] == "fake-normal" and \
                record["status"] == 401 else self.gw.provider_key
            self.assertEqual(record["headers"]["authorization"], "Bearer " + expected)
            self.assertNotIn(c.secret, json.dumps(record))
            self.assertNotIn("x-llmlimit", json.dumps(record["headers"]))

    def test_provider_key_never_comes_back(self):
        """No header or body of any answer (errors included) holds a provider key."""
        c = self.gw.caller()
        answers = self.workload(c)
        statuses = [status for status, _, _ in answers]
        self.assertEqual(statuses, [200, 200, 200, 400, 500, 401, 502, 502, 404, 400, 200, 200])
        for status, headers, text in answers:
            for key in (self.gw.provider_key, self.gw.wrong_key):
                self.assertNotIn(key, text)
                self.assertNotIn(key, json.dumps(headers))
        stderr = self.gw.server.stderr_text()
        self.assertNotIn(self.gw.provider_key, stderr)
        self.assertNotIn(self.gw.wrong_key, stderr)

    def test_upstream_refusing_the_provider_key_is_passed_on_and_released(self):
        """The upstream's 401 for its own key reaches the client as it came; released."""
        c = self.gw.caller()
        before = c.snapshot()
        status, _, body = self.gw.call(c, CHAT, chat("m-wrong-key"))
        self.assertEqual(status, 401)
        self.assertEqual(body["error"]["code"], "invalid_api_key")
        self.assertEqual(c.snapshot(), before)

    def test_missing_or_wrong_key_is_a_401(self):
        """No key, a wrong key or another scheme: 401 invalid_api_key on every route."""
        c = self.gw.caller()
        forwarded = self.forwarded()
        cases = [(None, {}), ("llk-wrong", {}), (None, {"Authorization": "Basic " + c.secret}),
                 (None, {"Authorization": "Bearer"}), (c.secret + "x", {})]
        for secret, headers in cases:
            for method, path, body in (("POST", CHAT, chat("m-normal")),
                                       ("POST", COMPLETIONS, {"model": "m-normal"}),
                                       ("POST", EMBEDDINGS, {"model": "m-normal", "input": "a"}),
                                       ("GET", "/v1/models", None)):
                status, reply_headers, answer = self.gw.call(secret, path, body,
                                                             headers=headers, method=method)
                self.assert_openai_error(status, answer, 401, "invalid_api_key")
        self.assertEqual(self.forwarded(), forwarded)
        self.assertEqual(c.snapshot()["req"], (0, 0, 0))

    def test_model_the_key_may_not_use_is_a_404(self):
        """A key limited to some models: 404 model_not_found, as for an unknown model."""
        c = self.gw.restricted_caller()
        forwarded = self.forwarded()
        status, _, body = self.gw.call(c, CHAT, chat("m-counted"))
        message = self.assert_openai_error(status, body, 404, "model_not_found")
        status, _, unknown = self.gw.call(c, CHAT, chat("m-unknown"))
        self.assertEqual(message.replace("m-counted", "X"),
                         unknown["error"]["message"].replace("m-unknown", "X"))
        self.assertEqual(self.forwarded(), forwarded)
        self.assertEqual(self.gw.call(c, CHAT, chat("m-normal"))[0], 200)


class BadInput(GatewayTest, unittest.TestCase):

    CASES = [
        # (what, path, raw body, status, code, words the message must hold)
        ("malformed JSON", CHAT, '{"model": "m-normal", "messages": [', 400, "invalid_json",
         "JSON"),
        ("not an object", CHAT, '["m-normal"]', 400, "invalid_json", "object"),
        ("empty body", CHAT, "", 400, "invalid_json", "JSON"),
        ("missing model", CHAT, {"messages": [{"role": "user", "content": "hi"}]}, 400,
         "missing_model", "model"),
        ("model not a string", CHAT, {"model": 7, "messages": []}, 400, "missing_model",
         "model"),
        ("unknown model", CHAT, chat("m-unknown"), 404, "model_not_found", "m-unknown"),
        ("max_tokens over the model's max", CHAT, chat("m-normal", max_tokens=4097), 400,
         "invalid_request", "max_tokens: must be at most 4096"),
        ("negative max_tokens", CHAT, chat("m-normal", max_tokens=-1), 400, "invalid_request",
         "max_tokens"),
        ("fractional max_tokens", CHAT, chat("m-normal", max_tokens=1.5), 400,
         "invalid_request", "max_tokens"),
        ("max_tokens a string", CHAT, chat("m-normal", max_tokens="10"), 400,
         "invalid_request", "max_tokens"),
        ("max_completion_tokens over", CHAT, chat("m-normal", max_completion_tokens=5000), 400,
         "invalid_request", "max_completion_tokens"),
        ("n over its bound", CHAT, chat("m-normal", n=129), 400, "invalid_request",
         "n: must be an integer 1..128"),
        ("n zero", CHAT, chat("m-normal", n=0), 400, "invalid_request", "n:"),
        ("messages not an array", CHAT, {"model": "m-normal", "messages": "hi"}, 400,
         "invalid_request", "messages"),
        ("messages empty", CHAT, {"model": "m-normal", "messages": []}, 400,
         "invalid_request", "messages"),
        ("content a number", CHAT, {"model": "m-normal",
                                    "messages": [{"role": "user", "content": 5}]}, 400,
         "invalid_request", "messages[0].content"),
        ("role missing", CHAT, {"model": "m-normal", "messages": [{"content": "hi"}]}, 400,
         "invalid_request", "messages[0].role"),
        ("stream not a boolean", CHAT, chat("m-normal", stream="yes"), 400, "invalid_request",
         "stream"),
        ("stream_options not an object", CHAT, chat("m-normal", stream=True,
                                                     stream_options=[1]), 400,
         "invalid_request", "stream_options"),
        ("prompt a number", COMPLETIONS, {"model": "m-normal", "prompt": 5}, 400,
         "invalid_request", "prompt"),
        ("best_of below n", COMPLETIONS, {"model": "m-normal", "prompt": "a", "n": 3,
                                          "best_of": 2}, 400, "invalid_request", "best_of"),
        ("embedding without input", EMBEDDINGS, {"model": "m-normal"}, 400, "invalid_request",
         "input"),
        ("embedding input a number", EMBEDDINGS, {"model": "m-normal", "input": 1.5}, 400,
         "invalid_request", "input"),
    ]

    def test_bad_requests_are_clear_400s_that_reserve_and_forward_nothing(self):
        """Each bad request: its status, an OpenAI-shaped error naming the field; no effect."""
        c = self.gw.caller()
        before, forwarded = c.snapshot(), self.forwarded()
        for what, path, body, expect_status, code, words in self.CASES:
            with self.subTest(what):
                raw = body if isinstance(body, str) else json.dumps(body)
                status, _, answer = self.gw.call(c, path, raw=raw)
                message = self.assert_openai_error(status, answer, expect_status, code,
                                                   "invalid_request_error")
                self.assertIn(words, message)
        self.assertEqual(self.forwarded(), forwarded)
        self.assertEqual(c.snapshot(), before)

    def exchange(self, c, extra_head, body=b""):
        """Sends a request by hand and reads the answer to the end of the
        connection: (status line and head, parsed body)."""
        sock = socket.create_connection((self.gw.server.host, self.gw.server.port), timeout=10)
        head = ("POST %s HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                "Authorization: Bearer %s\r\nConnection: close\r\n%s\r\n"
                % (CHAT, c.secret, extra_head))
        sock.sendall(head.encode() + body)
        reply = b""
        while True:
            piece = sock.recv(65536)
            if not piece:
                break
            reply += piece
        sock.close()
        head_text, _, body_text = reply.partition(b"\r\n\r\n")
        return head_text, body_text

    def test_huge_body_is_a_413_in_openai_shape(self):
        """A body over the server's limit: 413 in OpenAI's shape, never forwarded."""
        c = self.gw.caller()
        before, forwarded = c.snapshot(), self.forwarded()
        # announced by Content-Length: refused before the body is read
        head, body = self.exchange(c, "Content-Length: %d\r\n" % (2 * 1024 * 1024))
        self.assertTrue(head.startswith(b"HTTP/1.1 413"), head)
        self.assert_openai_error(413, json.loads(body), 413, "body_too_large",
                                 "invalid_request_error")
        # chunked, so it is read (and dropped) to its end, then refused
        text = json.dumps(chat("m-normal", "word " * (300 * 1024))).encode()
        self.assertGreater(len(text), 1024 * 1024)
        chunks = b"".join(b"%x\r\n%s\r\n" % (len(text[i:i + 65536]), text[i:i + 65536])
                          for i in range(0, len(text), 65536))
        head, body = self.exchange(c, "Transfer-Encoding: chunked\r\n", chunks + b"0\r\n\r\n")
        self.assertTrue(head.startswith(b"HTTP/1.1 413"), head)
        self.assert_openai_error(413, json.loads(body), 413, "body_too_large",
                                 "invalid_request_error")
        self.assertEqual(self.forwarded(), forwarded)
        self.assertEqual(c.snapshot(), before)

    def test_wrong_method_is_a_405_in_openai_shape(self):
        """GET on a POST route: 405 in OpenAI's shape."""
        c = self.gw.caller()
        status, headers, answer = self.gw.call(c, CHAT, method="GET")
        self.assert_openai_error(status, answer, 405, "method_not_allowed",
                                 "invalid_request_error")
        self.assertEqual(headers["allow"], "POST")


class Models(GatewayTest, unittest.TestCase):

    def test_models_lists_the_keys_models(self):
        """GET /v1/models: every model for an unrestricted key, in OpenAI's list shape."""
        c = self.gw.caller()
        status, _, body = self.gw.call(c, "/v1/models", method="GET")
        self.assertEqual(status, 200)
        self.assertEqual(body["object"], "list")
        self.assertEqual([m["id"] for m in body["data"]], list(MODELS) + list(AGENT_MODELS))
        for model in body["data"]:
            self.assertEqual(model["object"], "model")
            self.assertEqual(model["owned_by"], dict(MODELS, **AGENT_MODELS)[model["id"]][0])

    def test_models_of_a_restricted_key(self):
        """GET /v1/models for a key limited to m-normal lists only m-normal."""
        c = self.gw.restricted_caller()
        status, _, body = self.gw.call(c, "/v1/models", method="GET")
        self.assertEqual(status, 200)
        self.assertEqual([m["id"] for m in body["data"]], ["m-normal"])


if __name__ == "__main__":
    skip_unless_backend()
    unittest.main(verbosity=2)

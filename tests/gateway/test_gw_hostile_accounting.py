"""Hostile or broken upstream answers, and what they cost (docs/gateway.md, "A
call, step by step", "What goes upstream" and "Forwarding"): a status outside
200..599 is a 502 that changes nothing and leaves the server up; a call that
sets no output bound goes upstream with the bound it reserved, so the
reservation bounds it; an answer over its size bound, or past the memory the
gateway gives answers its clients have not read, is refused, and charged its
reservation when the upstream did answer it; a usage that cannot be read is
never read as zero: the output is counted from the text; a compressed answer
reaches the client decoded.

Backend from --backend (memory, sqlite, tigerbeetle)."""

import http.client
import json
import socket
import unittest

import fake_upstream

from gw_harness import (CHAT, COMPLETIONS, DEFAULT_OUTPUT_TOKENS, EMBEDDINGS, MAX_OUTPUT_TOKENS,
                        RESPONSES, AGENT_DEFAULT_OUTPUT_TOKENS, Gateway, GatewayTest,
                        agent_model, chat, cost, estimate, estimate_text, skip_unless_backend)
from gw_harness import (CACHED_PRICE, INPUT_PRICE, OUTPUT_PRICE)
from gw_harness import tearDownModule  # noqa: F401 - unittest calls it
from harness import wait_until

BIG_EVENT_BYTES = 1536 * 1024  # h-big-event's event: past the gateway's 1 MiB
SSE_EVENT_BYTES_MAX = 1024 * 1024  # GW_SSE_EVENT_BYTES_MAX
ANSWER_BYTES_MAX = 64 * 1024 * 1024  # GW_ANSWER_BYTES_MAX


def model(name, upstream_model, **fields):
    """An OpenAI model on the fake, at the test models' prices and bounds."""
    entry = {"name": name, "upstream": "fake", "upstream_model": upstream_model,
             "input_usd_micros_per_mtok": INPUT_PRICE,
             "cached_input_usd_micros_per_mtok": CACHED_PRICE,
             "output_usd_micros_per_mtok": OUTPUT_PRICE,
             "max_output_tokens": MAX_OUTPUT_TOKENS,
             "default_max_output_tokens": DEFAULT_OUTPUT_TOKENS}
    entry.update(fields)
    return entry


HOSTILE_MODELS = [
    model("h-status-999", "fake-status:status=999"),
    model("h-status-600", "fake-status:status=600"),
    model("h-status-101", "fake-status:status=101"),
    model("h-status-150", "fake-status:status=150"),
    model("h-status-042", "fake-status:status=42"),
    model("h-status-000", "fake-status:status=0"),
    model("h-no-completion", "fake-usage-no-completion:prompt_tokens=1001:completion_tokens=9"),
    model("h-huge", "fake-usage-huge:prompt_tokens=1001"),
    model("h-gzip", "fake-gzip:prompt_tokens=1001:completion_tokens=499"),
    model("h-unknown-encoding", "fake-encoding-unknown:prompt_tokens=1001:completion_tokens=499"),
    model("h-big-event", "fake-big-event:event_bytes=%d" % BIG_EVENT_BYTES),
    model("h-long", "fake-normal:completion_tokens=4096"),
    model("h-observed", "fake-normal:completion_tokens=4096", output_reservation="observed"),
    agent_model("h-r-long", "fake", "fake-normal:completion_tokens=5000"),
]


def upstream_body(gw, marker):
    """The body the fake received for the call whose text holds marker."""
    records = [r for r in gw.upstream.requests() if marker in json.dumps(r["body"])]
    assert len(records) == 1, records
    return records[0]["body"]


def raw_call(gw, caller, path, body, headers=None, timeout_s=120):
    """(status, headers, body bytes) exactly as the gateway sent them."""
    conn = gw.connection(timeout_s)
    try:
        send = {"Content-Type": "application/json", "Authorization": "Bearer " + caller.secret}
        send.update(headers or {})
        conn.request("POST", path, body=json.dumps(body), headers=send)
        response = conn.getresponse()
        return response.status, {k.lower(): v for k, v in response.getheaders()}, response.read()
    finally:
        conn.close()


class Statuses(GatewayTest, unittest.TestCase):
    gateway_options = {"extra_models": HOSTILE_MODELS}

    def test_a_status_outside_200_599_is_a_502_that_changes_nothing(self):
        """999, 600, 101 with a body, a 1xx and no answer after it, 042, 000: 502
        upstream_error naming what came, the lease released, the server still up."""
        c = self.gw.caller()
        for name, named in (("h-status-999", "999"), ("h-status-600", "600"),
                            ("h-status-101", "101"), ("h-status-150", None),
                            ("h-status-042", None), ("h-status-000", None)):
            before = c.snapshot()
            status, headers, body = self.gw.call(c, CHAT, chat(name, max_tokens=50))
            message = self.assert_openai_error(status, body, 502, "upstream_error")
            if named is not None:
                self.assertIn("status " + named, message)
            self.assertEqual(c.snapshot(), before, name)
            self.assertEqual(self.gw.call(c, CHAT, chat("m-normal"))[0], 200, name)


class OutputBound(GatewayTest, unittest.TestCase):
    gateway_options = {"extra_models": HOSTILE_MODELS}

    def test_chat_without_a_bound_goes_upstream_with_the_reserved_one(self):
        """No max_tokens, or null ones: max_completion_tokens = the model's default goes
        upstream (per choice, with n), the nulls are dropped; a bound the client sets is
        passed as it is, nothing added."""
        c = self.gw.caller()
        for i, extra in enumerate(({}, {"max_tokens": None}, {"max_completion_tokens": None},
                                   {"max_tokens": None, "max_completion_tokens": None},
                                   {"n": 3})):
            marker = "bound-%d" % i
            self.assertEqual(self.gw.call(c, CHAT, chat("m-normal", marker, **extra))[0], 200)
            sent = upstream_body(self.gw, marker)
            self.assertEqual(sent["max_completion_tokens"], DEFAULT_OUTPUT_TOKENS, sent)
            self.assertNotIn("max_tokens", sent)
            self.assertEqual(sent.get("n"), extra.get("n"))
        for field in ("max_tokens", "max_completion_tokens"):
            marker = "given-" + field
            body = chat("m-normal", marker, **{field: 17})
            self.assertEqual(self.gw.call(c, CHAT, body)[0], 200)
            sent = upstream_body(self.gw, marker)
            self.assertEqual({k: v for k, v in sent.items() if k.startswith("max_")},
                             {field: 17})

    def test_the_reservation_bounds_a_call_without_max_tokens(self):
        """A budget that holds exactly one call's reservation: a call without max_tokens to
        a model that would write 4096 tokens writes the 256 reserved, no debt."""
        text = "budget bound"
        body = chat("h-long", text)
        input_tokens = estimate("chat", body)[0]
        reservation = cost(input_tokens, DEFAULT_OUTPUT_TOKENS)
        c = self.gw.caller(usd=reservation)
        status, _, answer = self.gw.call(c, CHAT, body)
        self.assertEqual(status, 200, answer)
        self.assertEqual(answer["usage"]["completion_tokens"], DEFAULT_OUTPUT_TOKENS)
        usage = c.usage("usd")
        self.assertEqual((usage["debt"], usage["reserved"]), (0, 0), usage)
        self.assertLessEqual(usage["used"], reservation)
        self.assertEqual(c.used("out"), DEFAULT_OUTPUT_TOKENS)

    def test_completions_and_responses_get_their_own_fields(self):
        """Completions: max_tokens; Responses: max_output_tokens (Codex never sends it), so
        a long answer stops at the default reserved; embeddings get no bound."""
        c = self.gw.caller()
        self.assertEqual(self.gw.call(c, COMPLETIONS, {"model": "m-normal",
                                                        "prompt": "completion-bound"})[0], 200)
        sent = upstream_body(self.gw, "completion-bound")
        self.assertEqual(sent["max_tokens"], DEFAULT_OUTPUT_TOKENS, sent)
        self.assertNotIn("max_completion_tokens", sent)
        r = self.gw.caller()
        status, _, answer = self.gw.call(r, RESPONSES, {"model": "h-r-long",
                                                        "input": "responses-bound"})
        self.assertEqual(status, 200, answer)
        sent = upstream_body(self.gw, "responses-bound")
        self.assertEqual(sent["max_output_tokens"], AGENT_DEFAULT_OUTPUT_TOKENS, sent)
        self.assertEqual(answer["usage"]["output_tokens"], AGENT_DEFAULT_OUTPUT_TOKENS)
        self.assertEqual(r.used("out"), AGENT_DEFAULT_OUTPUT_TOKENS)
        self.assertEqual(self.gw.call(c, EMBEDDINGS, {"model": "m-normal",
                                                       "input": "embedding-bound"})[0], 200)
        sent = upstream_body(self.gw, "embedding-bound")
        self.assertFalse([k for k in sent if k.startswith("max_")], sent)

    def test_observed_writes_the_models_bound_not_the_observed_one(self):
        """An observed model reserving its 99th percentile (5 tokens) still sends the
        default (256) upstream: an answer past the observed figure is charged in full, not
        cut at it."""
        c = self.gw.caller()
        for i in range(20):  # outputs of 5 tokens: the observed reservation becomes 5
            status, _, answer = self.gw.call(c, CHAT, chat("h-observed", max_tokens=5))
            self.assertEqual((status, answer["usage"]["completion_tokens"]), (200, 5), answer)
        status, _, answer = self.gw.call(c, CHAT, chat("h-observed", "observed-bound"))
        self.assertEqual(status, 200, answer)
        sent = upstream_body(self.gw, "observed-bound")
        self.assertEqual(sent["max_completion_tokens"], DEFAULT_OUTPUT_TOKENS, sent)
        self.assertEqual(answer["usage"]["completion_tokens"], DEFAULT_OUTPUT_TOKENS)
        self.assertEqual(c.used("out"), 20 * 5 + DEFAULT_OUTPUT_TOKENS)


class UnreadableUsage(GatewayTest, unittest.TestCase):
    gateway_options = {"extra_models": HOSTILE_MODELS}

    def assert_counted(self, caller, input_tokens, output_tokens):
        self.assertGreater(output_tokens, 0)
        self.assertEqual((caller.used("in"), caller.used("out"), caller.used("usd"),
                          caller.reserved("usd")),
                         (input_tokens, output_tokens, cost(input_tokens, output_tokens), 0))

    def test_a_usage_without_completion_tokens_is_counted_from_the_text(self):
        """Chat usage with prompt_tokens only: an error, not 0 output: the input estimate and
        the answer's text counted, as an answer without usage."""
        c = self.gw.caller()
        body = chat("h-no-completion", "no completion tokens please")
        status, _, answer = self.gw.call(c, CHAT, body)
        self.assertEqual(status, 200, answer)
        self.assertNotIn("completion_tokens", answer["usage"])
        self.assert_counted(c, estimate("chat", body)[0],
                            estimate_text(answer["choices"][0]["message"]["content"]))

    def test_a_stream_usage_without_completion_tokens_is_counted_too(self):
        """The same in a stream's usage chunk: the streamed text counted."""
        c = self.gw.caller()
        body = chat("h-no-completion", "stream no completion tokens", stream=True,
                    stream_options={"include_usage": True})
        answer = self.gw.stream(c, CHAT, body)
        self.assertEqual(answer.status, 200, answer.raw)
        self.assertEqual(answer.events[-1], "[DONE]")
        self.assert_counted(c, estimate("chat", body)[0], estimate_text(answer.content()))

    def test_an_answer_that_does_not_parse_is_counted_whole(self):
        """completion_tokens 2^64: the answer is not JSON the gateway reads; it goes to the
        client as it came, and its whole text is counted as the output."""
        c = self.gw.caller()
        body = chat("h-huge", "a huge integer")
        status, _, data = raw_call(self.gw, c, CHAT, body)
        self.assertEqual(status, 200, data)
        self.assertEqual(json.loads(data)["usage"]["completion_tokens"], 2 ** 64)
        self.assert_counted(c, estimate("chat", body)[0], estimate_text(data.decode()))

    def test_a_gzip_answer_reaches_the_client_decoded(self):
        """The gateway asks for no encoding (the client's Accept-Encoding stays here); an
        upstream that compresses anyway is decoded: the client gets plain JSON, without
        Content-Encoding, and the call is charged its usage exactly."""
        c = self.gw.caller()
        body = chat("h-gzip", "gzip please", max_tokens=600)
        status, headers, data = raw_call(self.gw, c, CHAT, body,
                                         headers={"Accept-Encoding": "gzip, br"})
        self.assertEqual(status, 200, data)
        self.assertNotIn("content-encoding", headers)
        self.assertEqual(json.loads(data)["usage"]["completion_tokens"], 499)
        self.assertEqual((c.used("in"), c.used("out"), c.used("usd")), (1001, 499, 450))
        record = [r for r in self.gw.upstream.requests() if "gzip please" in json.dumps(r["body"])]
        self.assertEqual(record[0]["headers"].get("accept-encoding"), "identity", record)

    def test_an_encoding_nothing_decodes_is_a_502_charged_its_reservation(self):
        """Content-Encoding: x-fake-encoding: never passed on (the client could not read it):
        502 upstream_error, and the upstream answered, so the lease settles at its
        reservation instead of being released."""
        c = self.gw.caller()
        body = chat("h-unknown-encoding", "unknown encoding", max_tokens=600)
        status, headers, data = raw_call(self.gw, c, CHAT, body)
        self.assert_openai_error(status, json.loads(data), 502, "upstream_error")
        self.assertEqual(headers.get("x-should-retry"), "false")
        input_tokens = estimate("chat", body)[0]
        self.assertEqual((c.used("in"), c.used("out"), c.used("usd"), c.reserved("usd")),
                         (input_tokens, 600, cost(input_tokens, 600), 0))

    def test_an_event_over_1_mib_is_counted_and_the_stream_ends_with_an_error(self):
        """A chunk of 1.5 MiB: the client gets the stream so far and an error event
        (upstream_event_too_large), never an empty 200; what came of the event is counted
        as output, never the input alone."""
        c = self.gw.caller()
        body = chat("h-big-event", "a big event", stream=True)
        answer = self.gw.stream(c, CHAT, body, timeout_s=120)
        self.assertEqual(answer.status, 200, answer.raw[:300])
        self.assertNotIn("[DONE]", answer.events)
        error = json.loads(answer.events[-1])["error"]
        self.assertEqual(error["code"], "upstream_event_too_large", error)
        record = self.gw.upstream.wait_for(
            lambda rs: any("a big event" in json.dumps(r["body"]) and r["end"] for r in rs))
        big = [r for r in record if "a big event" in json.dumps(r["body"])][0]["content_sent"]
        # at least the event's first MiB less its framing was read before the bound
        least = estimate_text(big[:SSE_EVENT_BYTES_MAX - 4096])
        self.assertGreater(least, 100000)
        self.assertEqual(c.used("in"), estimate("chat", body)[0])
        self.assertGreaterEqual(c.used("out"), least)
        self.assertEqual(c.reserved("usd"), 0)


class TooLarge(GatewayTest, unittest.TestCase):
    gateway_options = {"extra_models": HOSTILE_MODELS}

    def test_an_answer_over_64_mib_is_refused_and_charged_its_reservation(self):
        """2048 embeddings of 4096 dimensions (about 76 MiB): 502 upstream_answer_too_large
        with x-should-retry: false, and the upstream answered, so the lease settles at its
        reservation: never released uncharged."""
        c = self.gw.caller()
        body = {"model": "m-normal", "input": ["text %d" % i for i in range(2048)],
                "dimensions": 4096}
        status, headers, data = raw_call(self.gw, c, EMBEDDINGS, body, timeout_s=300)
        self.assert_openai_error(status, json.loads(data), 502, "upstream_answer_too_large")
        self.assertEqual(headers.get("x-should-retry"), "false")
        input_tokens = estimate("embeddings", body)[0]
        self.assertEqual(c.snapshot(), {
            "req": (0, 1, 0), "tok": (0, input_tokens, 0), "in": (0, input_tokens, 0),
            "out": (0, 0, 0), "conc": (0, 0, 0), "usd": (0, cost(input_tokens, 0), 0)})


# -- the memory answers may hold --------------------------------------------------

EMBEDDING_INPUTS = 180  # at 4096 dimensions: about 8 MB of JSON, more than a socket takes


def embeddings_body(marker, inputs=EMBEDDING_INPUTS):
    return {"model": "m-normal", "input": ["%s %d" % (marker, i) for i in range(inputs)],
            "dimensions": 4096}


def answer_size(body):
    """The bytes of the fake's answer to body (as the gateway sends it on), asked of a
    fake of its own: its answers are the same whoever asks."""
    with fake_upstream.start() as upstream:
        conn = http.client.HTTPConnection(upstream.host, upstream.port, timeout=120)
        try:
            sent = dict(body, model="fake-normal")
            conn.request("POST", EMBEDDINGS, body=json.dumps(sent),
                         headers={"Content-Type": "application/json"})
            response = conn.getresponse()
            assert response.status == 200, response.status
            return len(response.read())
        finally:
            conn.close()


def held_bytes(gw):
    for line in gw.metrics().splitlines():
        if line.startswith("llmlimit_gateway_answer_bytes_held "):
            return int(line.split()[1])
    raise AssertionError("llmlimit_gateway_answer_bytes_held missing")


def unread_call(gw, caller, body):
    """Sends the call on a socket that reads nothing (its receive buffer kept small)."""
    sock = socket.socket()
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    sock.connect((gw.server.host, gw.server.port))
    payload = json.dumps(body).encode()
    sock.sendall(("POST %s HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                  "Authorization: Bearer %s\r\nContent-Length: %d\r\n\r\n"
                  % (EMBEDDINGS, caller.secret, len(payload))).encode() + payload)
    return sock


class AnswerMemory(unittest.TestCase):
    """--max-gateway-answer-bytes: each test starts its own gateways."""

    def start(self, budget):
        gw = Gateway.start(keys=4, args=["--max-gateway-answer-bytes", str(budget)])
        self.addCleanup(self.stop, gw)
        return gw

    def stop(self, gw):
        code = gw.stop()
        self.assertEqual(code, 0, gw.server.stderr_text())

    def test_one_answer_one_byte_past_the_budget(self):
        """An answer of exactly the budget's bytes is given; one byte more is refused (503
        answer_memory_full, x-should-retry: false) and, answered upstream, charged its
        reservation."""
        body = embeddings_body("exact", inputs=8)
        size = answer_size(body)
        for past in (0, 1):
            input_tokens = estimate("embeddings", body)[0]  # the reservation's
            gw = self.start(size - past)
            c = gw.caller()
            status, headers, data = raw_call(gw, c, EMBEDDINGS, body)
            if past == 0:
                self.assertEqual((status, len(data)), (200, size), data[:300])
                self.assertEqual(headers["content-length"], str(size))
                input_tokens = json.loads(data)["usage"]["prompt_tokens"]
            else:
                self.assertEqual(status, 503, data[:300])
                error = json.loads(data)["error"]
                self.assertEqual(error["code"], "answer_memory_full", error)
                self.assertIn(str(size - 1), error["message"])
                self.assertEqual(headers.get("x-should-retry"), "false")
            self.assertEqual((c.used("in"), c.reserved("in")), (input_tokens, 0))
            self.assertTrue(wait_until(lambda: held_bytes(gw) == 0, 30), held_bytes(gw))

    def test_unread_answers_fill_the_budget_and_free_it_when_read(self):
        """Two clients that do not read their 8 MB answers hold them, filling the budget;
        while they do, a third call is refused before it is forwarded (503 with Retry-After,
        released, nothing charged); once they go, it is served."""
        body = embeddings_body("held")
        size = answer_size(body)
        gw = self.start(2 * size)  # the two answers fill it exactly
        a, b, c = gw.caller(), gw.caller(), gw.caller()
        sockets = [unread_call(gw, a, body), unread_call(gw, b, body)]
        try:
            self.assertTrue(wait_until(lambda: held_bytes(gw) == 2 * size, 60),
                            (held_bytes(gw), size))
            forwarded = len(gw.upstream.requests())
            before = c.snapshot()
            status, headers, data = raw_call(gw, c, EMBEDDINGS, body)
            self.assertEqual(status, 503, data[:300])
            error = json.loads(data)["error"]
            self.assertEqual(error["code"], "answer_memory_full", error)
            self.assertIn("retry-after", headers)
            self.assertNotIn("x-should-retry", headers)
            self.assertEqual(len(gw.upstream.requests()), forwarded)
            self.assertEqual(c.snapshot(), before)
        finally:
            for sock in sockets:
                sock.close()
        self.assertTrue(wait_until(lambda: held_bytes(gw) == 0, 60), held_bytes(gw))
        status, _, data = raw_call(gw, c, EMBEDDINGS, body)
        self.assertEqual((status, len(data)), (200, size))
        self.assertEqual(c.used("req"), 1)


if __name__ == "__main__":
    skip_unless_backend()
    unittest.main(verbosity=2)

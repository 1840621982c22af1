"""Hostile or broken upstream answers, and what they cost (docs/gateway.md, "What goes
upstream"): a call that sets no output bound goes upstream with the bound it reserved, so the
reservation bounds it.

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


if __name__ == "__main__":
    skip_unless_backend()
    unittest.main(verbosity=2)

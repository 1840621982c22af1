"""Anthropic Messages through the gateway (docs/gateway.md, "Anthropic
Messages"): every limit charged exactly what the fake upstream's usage says,
streamed or not (a stream's cumulative message_delta read as its last value,
cache reads and 5-minute and 1-hour cache writes priced apart);
count_tokens forwarded and never charged; what goes upstream (the provider
key as x-api-key, anthropic-version with its default, anthropic-beta,
?beta=true); the virtual key as x-api-key or bearer; errors and denials in
Anthropic's shape with its rate-limit headers; a stream's message_stop held
until the lease is completed; a client that leaves mid-stream frees its slot
at once and pays for what was streamed.

Backend from --backend (memory, sqlite, tigerbeetle)."""

import datetime
import json
import socket
import time
import unittest

from gw_harness import (AGENT_MODELS, AGENT_TEMPLATES, CHAT, COUNT_TOKENS, LITELLM_PRICES, MESSAGES,
                        REMAINING_KNOWN, RESPONSES, GatewayTest, agent_cost, estimate,
                        estimate_text, read_until, skip_unless_backend, wait_until)
from gw_harness import tearDownModule  # noqa: F401 - unittest calls it

# A client that leaves frees its slot by then: the hold would otherwise last
# its 120 s timeout, and the gateway frees it as it sees the socket close
# (docs/gateway.md, "Streams").
FREED_S_MAX = 1.0


def message(model, text="one two three four", max_tokens=600, **extra):
    return dict({"model": model, "max_tokens": max_tokens,
                 "messages": [{"role": "user", "content": text}]}, **extra)


def rfc3339_seconds(text):
    """Seconds from now to an RFC 3339 time such as 2026-05-01T12:00:00Z."""
    when = datetime.datetime.strptime(text, "%Y-%m-%dT%H:%M:%SZ")
    return when.replace(tzinfo=datetime.timezone.utc).timestamp() - time.time()


class MessagesTest(GatewayTest):
    gateway_options = {"templates": AGENT_TEMPLATES}

    def assert_charged(self, caller, uncached, output, usd, cache_read=0, cache_write=0,
                       requests=1):
        """Every limit of caller holds exactly these amounts, all settled."""
        all_input = uncached + cache_read + cache_write
        self.assertEqual(caller.snapshot(), {
            "req": (0, requests, 0),
            "tok": (0, all_input + output, 0),
            "in": (0, all_input, 0),
            "unc": (0, uncached + cache_write, 0),
            "out": (0, output, 0),
            "conc": (0, 0, 0),
            "usd": (0, usd, 0),
        })

    def last_upstream(self):
        return self.gw.upstream.requests()[-1]


class Charges(MessagesTest, unittest.TestCase):

    def test_a_message_is_charged_its_usage(self):
        """A Messages call (key as x-api-key) charges input_tokens + output_tokens at their
        prices, rounded up once."""
        c = self.gw.caller()
        status, _, body = self.gw.call(c, MESSAGES, message("a-counted"), x_api_key=True)
        self.assertEqual(status, 200, body)
        self.assertEqual((body["type"], body["usage"]["input_tokens"],
                          body["usage"]["output_tokens"]), ("message", 1001, 499))
        self.assertEqual(agent_cost(uncached=1001, output=499), 10488)  # 10488.0
        self.assert_charged(c, 1001, 499, 10488)

    def test_a_stream_is_charged_its_last_cumulative_usage(self):
        """Four message_delta events carry the running total: the last one (499) is charged,
        never their sum; usage is settled when message_stop arrives."""
        c = self.gw.caller()
        answer = self.gw.stream(c, MESSAGES, message("a-deltas", stream=True), x_api_key=True)
        self.assertEqual(answer.status, 200, answer.raw)
        self.assertTrue(answer.headers["content-type"].startswith("text/event-stream"))
        deltas = [json.loads(e)["usage"]["output_tokens"] for e, n in
                  zip(answer.events, answer.names) if n == "message_delta"]
        self.assertEqual(deltas, [125, 250, 375, 499])
        self.assertEqual(answer.names[-1], "message_stop")
        # No wait: message_stop is given once the lease is completed.
        self.assert_charged(c, 1001, 499, agent_cost(uncached=1001, output=499))

    def test_cache_reads_and_writes_are_priced_apart(self):
        """input_tokens 1000 + cache reads 2000 + writes 3000 (5 min) and 4000 (1 h), output
        500 (thinking included): each part at its own price, streamed or not."""
        usd = agent_cost(uncached=1000, cache_read=2000, write_5m=3000, write_1h=4000, output=500)
        self.assertEqual(usd, 3000 + 600 + 11250 + 24000 + 7500)
        for stream in (False, True):
            c = self.gw.caller()
            body = message("a-cache", max_tokens=1000, stream=stream)
            if stream:
                answer = self.gw.stream(c, MESSAGES, body)
                self.assertEqual((answer.status, answer.names[-1]), (200, "message_stop"))
            else:
                status, _, answer = self.gw.call(c, MESSAGES, body)
                self.assertEqual(status, 200, answer)
                self.assertEqual(answer["usage"]["cache_creation_input_tokens"], 7000)
            self.assert_charged(c, 1000, 500, usd, cache_read=2000, cache_write=7000)

    def test_a_stream_cut_by_the_upstream_pays_its_input_and_what_was_streamed(self):
        """The upstream closes mid-stream: message_start's input (exact) and the output
        counted from the text sent; the client gets no message_stop."""
        c = self.gw.caller()
        answer = self.gw.stream(c, MESSAGES, message("a-close", stream=True))
        self.assertNotIn("message_stop", answer.names)
        output = estimate_text("alpha bravo charlie")
        wait_until(lambda: c.reserved("usd") == 0)
        self.assert_charged(c, 1001, output, agent_cost(uncached=1001, output=output))

    def test_a_stream_without_usage_pays_its_estimate_and_counted_output(self):
        """No usage anywhere in the stream: the input estimate and the counted output."""
        c = self.gw.caller()
        body = message("a-no-usage", stream=True)
        answer = self.gw.stream(c, MESSAGES, body)
        self.assertEqual((answer.status, answer.names[-1]), (200, "message_stop"))
        input_tokens = estimate("messages", body)[0]
        output = estimate_text(" ".join(["alpha", "bravo", "charlie", "delta", "echo",
                                         "foxtrot", "golf", "hotel", "india"]))
        self.assert_charged(c, input_tokens, output,
                            agent_cost(uncached=input_tokens, output=output))

    def test_count_tokens_is_forwarded_and_never_charged(self):
        """count_tokens reaches the upstream's /v1/messages/count_tokens and reserves nothing."""
        c = self.gw.caller()
        status, headers, body = self.gw.call(c, COUNT_TOKENS, {
            "model": "a-counted", "messages": [{"role": "user", "content": "hi"}]},
            x_api_key=True)
        self.assertEqual((status, body), (200, {"input_tokens": 1001}))
        self.assertNotIn("x-llmlimit-lease-id", headers)
        record = self.last_upstream()
        self.assertEqual((record["method"], record["path"]), ("POST", COUNT_TOKENS))
        self.assertEqual(c.snapshot(), {name: (0, 0, 0) for name in c.keys})


class Upstream(MessagesTest, unittest.TestCase):

    def test_what_goes_upstream(self):
        """Upstream gets the provider key as x-api-key (no Authorization), anthropic-version
        2023-06-01 when the client sent none, its anthropic-beta, ?beta=true; the model's
        upstream name; never the virtual key."""
        c = self.gw.caller()
        status, headers, _ = self.gw.call(c, MESSAGES + "?beta=true", message("a-normal"),
                                          headers={"anthropic-beta": "one-2025,two-2026"},
                                          x_api_key=True)
        self.assertEqual(status, 200)
        record = self.last_upstream()
        sent = record["headers"]
        self.assertEqual(record["path"], "/v1/messages?beta=true")
        self.assertEqual(sent["x-api-key"], self.gw.provider_key)
        self.assertNotIn("authorization", sent)
        self.assertEqual((sent["anthropic-version"], sent["anthropic-beta"]),
                         ("2023-06-01", "one-2025,two-2026"))
        self.assertEqual(record["body"]["model"], "fake-normal")
        self.assertNotIn(c.secret, json.dumps(record))
        self.assertNotIn(self.gw.provider_key, json.dumps(headers))

    def test_the_clients_anthropic_version_is_passed_on(self):
        """The client's anthropic-version (the SDK's 2026-10-21) goes upstream as it came,
        with the virtual key as a bearer token."""
        c = self.gw.caller()
        status, _, _ = self.gw.call(c, MESSAGES, message("a-normal"),
                                    headers={"anthropic-version": "2026-10-21"})
        self.assertEqual(status, 200)
        sent = self.last_upstream()["headers"]
        self.assertEqual(sent["anthropic-version"], "2026-10-21")
        self.assertNotIn("anthropic-beta", sent)

    def test_a_header_that_cannot_go_upstream_is_refused(self):
        """An anthropic-beta past the bound is a 400 naming it, and nothing is forwarded."""
        c = self.gw.caller()
        before = len(self.gw.upstream.requests())
        status, _, body = self.gw.call(c, MESSAGES, message("a-normal"),
                                       headers={"anthropic-beta": "x" * 2000})
        self.assertEqual(status, 400, body)
        self.assertEqual(body["error"]["type"], "invalid_request_error")
        self.assertIn("anthropic-beta", body["error"]["message"])
        self.assertEqual(len(self.gw.upstream.requests()), before)

    def test_x_api_key_works_on_every_surface(self):
        """The virtual key as x-api-key is accepted on chat completions and Responses too."""
        c = self.gw.caller()
        self.assertEqual(self.gw.call(c, CHAT, {"model": "m-normal", "messages": [
            {"role": "user", "content": "hi"}]}, x_api_key=True)[0], 200)
        self.assertEqual(self.gw.call(c, RESPONSES, {"model": "r-normal", "input": "hi"},
                                      x_api_key=True)[0], 200)
        self.assertEqual(self.gw.upstream.requests()[-1]["headers"]["authorization"],
                         "Bearer " + self.gw.provider_key)


class Errors(MessagesTest, unittest.TestCase):

    def assert_anthropic_error(self, status, body, expect_status, expect_type):
        self.assertEqual(status, expect_status, body)
        self.assertEqual(set(body), {"type", "error"}, body)
        self.assertEqual(body["type"], "error")
        # A 401 also names the refusal as "code" (key_revoked, ...: docs/gateway.md).
        members = {"type", "message", "code"} if expect_status == 401 else {"type", "message"}
        self.assertEqual(set(body["error"]), members, body)
        self.assertEqual(body["error"]["type"], expect_type, body)
        self.assertTrue(body["error"]["message"])
        return body["error"]["message"]

    def test_errors_have_anthropics_shape(self):
        """401 without a key, 400 bad JSON or no max_tokens, 404 unknown model, 413 too large:
        each {"type":"error","error":{type, message}}; nothing forwarded."""
        c = self.gw.caller()
        before = len(self.gw.upstream.requests())
        self.assert_anthropic_error(*self.gw.call(None, MESSAGES, message("a-normal"))[::2],
                                    401, "authentication_error")
        self.assert_anthropic_error(*self.gw.call(c, MESSAGES, raw="{nope")[::2], 400,
                                    "invalid_request_error")
        text = self.assert_anthropic_error(
            *self.gw.call(c, MESSAGES, {"model": "a-normal", "messages": [
                {"role": "user", "content": "hi"}]})[::2], 400,
            "invalid_request_error")
        self.assertIn("max_tokens", text)
        self.assert_anthropic_error(*self.gw.call(c, MESSAGES, message("claude-nope"))[::2],
                                    404, "not_found_error")
        # a body announced past the server's limit: refused before it is read
        sock = socket.create_connection((self.gw.server.host, self.gw.server.port), timeout=10)
        sock.sendall(("POST %s HTTP/1.1\r\nHost: x\r\nx-api-key: %s\r\nConnection: close\r\n"
                      "Content-Length: %d\r\n\r\n" % (MESSAGES, c.secret, 2 << 20)).encode())
        reply = read_until(sock, b"}}")
        sock.close()
        head, _, text = reply.partition(b"\r\n\r\n")
        self.assertTrue(head.startswith(b"HTTP/1.1 413"), head)
        self.assert_anthropic_error(413, json.loads(text), 413, "request_too_large")
        self.assertEqual(len(self.gw.upstream.requests()), before)

    def test_a_model_on_the_other_dialects_route_is_a_400_naming_the_right_one(self):
        """An OpenAI model on /v1/messages, an Anthropic one on chat or Responses: 400 naming
        the routes that serve it."""
        c = self.gw.caller()
        text = self.assert_anthropic_error(*self.gw.call(c, MESSAGES, message("m-normal"))[::2],
                                           400, "invalid_request_error")
        self.assertIn("/v1/chat/completions", text)
        for path, body in ((CHAT, {"model": "a-normal", "messages": [
                {"role": "user", "content": "hi"}]}), (RESPONSES, {"model": "a-normal",
                                                                   "input": "hi"})):
            message_text = self.assert_openai_error(*self.gw.call(c, path, body)[::2], 400,
                                                    "wrong_surface")
            self.assertIn("/v1/messages", message_text)

    def test_a_budget_denial_is_a_rate_limit_error_not_to_be_retried(self):
        """A budget that cannot take the call (another call holds most of it): 429
        rate_limit_error naming the limit, with retry-after, retry-after-ms and, as the wait
        is over a minute, x-should-retry: false. Nothing forwarded, nothing held."""
        c = self.gw.caller(usd=1500000)
        sock = self.gw.raw_request(c, MESSAGES, message("a-endless", max_tokens=60000,
                                                        stream=True))
        read_until(sock, b"charlie")  # this call holds 0.9 USD of the 1.5
        before = len(self.gw.upstream.requests())
        status, headers, body = self.gw.call(c, MESSAGES, message("a-normal", max_tokens=60000))
        text = self.assert_anthropic_error(status, body, 429, "rate_limit_error")
        self.assertIn(c.keys["usd"], text)
        self.assertGreater(int(headers["retry-after"]), 60)
        self.assertEqual(int(headers["retry-after"]), -(-int(headers["retry-after-ms"]) // 1000))
        self.assertEqual(headers["x-should-retry"], "false")
        self.assertEqual(len(self.gw.upstream.requests()), before)
        sock.close()
        self.assertTrue(wait_until(lambda: c.reserved("usd") == 0))

    def test_a_short_rate_limit_denial_may_be_retried(self):
        """A rolling limit that frees within seconds: 429 with its anthropic-ratelimit figures,
        and no x-should-retry (the SDK's own retry may wait for it)."""
        c = self.gw.caller()
        c.gateway.server.put_limit({"key": c.keys["req"], "kind": "rolling", "capacity": 1,
                                    "window_seconds": 5})
        self.assertEqual(self.gw.call(c, MESSAGES, message("a-normal"))[0], 200)
        status, headers, body = self.gw.call(c, MESSAGES, message("a-normal"))
        self.assert_anthropic_error(status, body, 429, "rate_limit_error")
        self.assertNotIn("x-should-retry", headers)
        self.assertLessEqual(int(headers["retry-after"]), 5)
        self.assertEqual(headers["anthropic-ratelimit-requests-limit"], "1")
        self.assertEqual(headers["x-ratelimit-limit-requests"], "1")
        self.assertLessEqual(rfc3339_seconds(headers["anthropic-ratelimit-requests-reset"]), 6)
        self.assertNotIn("anthropic-ratelimit-requests-remaining", headers)


class RateLimitHeaders(MessagesTest, unittest.TestCase):

    def test_an_answer_carries_anthropics_rate_limit_headers(self):
        """requests, tokens, input-tokens and output-tokens: -limit, and where the backend
        knows them -remaining and -reset (RFC 3339), after this call's reservation."""
        c = self.gw.caller(req=50, out=7000, **{"in": 9000})
        body = message("a-normal", max_tokens=600)
        status, headers, _ = self.gw.call(c, MESSAGES, body)
        self.assertEqual(status, 200)
        input_tokens = estimate("messages", body)[0]
        expect = {"requests": (50, 49), "output-tokens": (7000, 7000 - 600),
                  "input-tokens": (9000, 9000 - input_tokens),
                  "tokens": (7000, 7000 - 600)}
        for family, (limit, remaining) in expect.items():
            name = "anthropic-ratelimit-%s-" % family
            self.assertEqual(headers[name + "limit"], str(limit), family)
            if REMAINING_KNOWN:
                self.assertEqual(headers[name + "remaining"], str(remaining), family)
                self.assertLess(abs(rfc3339_seconds(headers[name + "reset"])), 3700, family)
            else:
                self.assertNotIn(name + "remaining", headers)
        self.assertEqual(headers["x-ratelimit-limit-requests"], "50")


# Prices from a LiteLLM file: Opus 4.1's and GPT-5's entries (the harness's copy).
OPUS_4_1 = {"input_usd_micros_per_mtok": 15000000, "cached_input_usd_micros_per_mtok": 1500000,
            "cache_write_5m_input_usd_micros_per_mtok": 18750000,
            "cache_write_1h_input_usd_micros_per_mtok": 30000000,
            "output_usd_micros_per_mtok": 75000000,
            "reasoning_output_usd_micros_per_mtok": 75000000}
GPT_5 = {"input_usd_micros_per_mtok": 1250000, "cached_input_usd_micros_per_mtok": 125000,
         "cache_write_5m_input_usd_micros_per_mtok": 1562500,
         "cache_write_1h_input_usd_micros_per_mtok": 2500000,
         "output_usd_micros_per_mtok": 10000000, "reasoning_output_usd_micros_per_mtok": 10000000}
PRICED_MODELS = (
    {"name": "a-litellm", "upstream": "fake-anthropic",
     "upstream_model": AGENT_MODELS["a-cache"][1], "prices_from": "claude-opus-4-1-20250805",
     "default_max_output_tokens": 1000},
    {"name": "r-litellm", "upstream": "fake", "upstream_model": AGENT_MODELS["r-cache"][1],
     "prices_from": "gpt-5", "default_max_output_tokens": 1000},
)


class LiteLLMPrices(MessagesTest, unittest.TestCase):
    gateway_options = {"templates": AGENT_TEMPLATES, "prices_file": LITELLM_PRICES,
                       "extra_models": PRICED_MODELS}

    def test_models_priced_from_a_litellm_file_are_charged_at_its_prices(self):
        """prices_file + prices_from: a Messages and a Responses call charged every usage part
        at the file's prices (converted per Mtok), the defaults filling what it lacks."""
        c = self.gw.caller()
        status, _, _ = self.gw.call(c, MESSAGES, message("a-litellm", max_tokens=1000))
        self.assertEqual(status, 200)
        usd = agent_cost(uncached=1000, cache_read=2000, write_5m=3000, write_1h=4000,
                         output=500, prices=OPUS_4_1)
        self.assertEqual(usd, 15000 + 3000 + 56250 + 120000 + 37500)
        self.assertEqual(c.used("usd"), usd)
        c = self.gw.caller()
        status, _, _ = self.gw.call(c, RESPONSES, {"model": "r-litellm", "input": "hi"})
        self.assertEqual(status, 200)
        usd = agent_cost(uncached=600, cache_read=401, output=598, reasoning=99, prices=GPT_5)
        self.assertEqual(usd, 750 + 51 + 5980)  # 750 + 50.125 + 5980, rounded up once
        self.assertEqual(c.used("usd"), usd)


class ClientGone(MessagesTest, unittest.TestCase):

    def test_a_client_leaving_mid_stream_frees_its_slot_at_once(self):
        """A stream that would never end: the client closes after half the answer; the slot is
        free within FREED_S_MAX, the upstream call cancelled, and the call charged
        message_start's input and the output streamed."""
        c = self.gw.caller(conc=1)
        sock = self.gw.raw_request(c, MESSAGES, message("a-endless", stream=True))
        read_until(sock, b"charlie")
        self.assertEqual(c.reserved("conc"), 1)
        sock.shutdown(socket.SHUT_RDWR)
        sock.close()
        started = time.monotonic()
        self.assertTrue(wait_until(lambda: c.reserved("conc") == 0, timeout_s=FREED_S_MAX,
                                   interval_s=0.01), "the slot was not freed in 1 s")
        print("  slot freed %.3f s after the client left" % (time.monotonic() - started))
        record = self.gw.upstream.wait_for(lambda rs: rs[-1]["end"] is not None)[-1]
        self.assertEqual(record["end"], "client_gone")
        output = estimate_text("alpha bravo charlie")
        wait_until(lambda: c.reserved("usd") == 0)
        self.assert_charged(c, 1001, output, agent_cost(uncached=1001, output=output))
        self.assertEqual(self.gw.call(c, MESSAGES, message("a-normal"))[0], 200)


if __name__ == "__main__":
    skip_unless_backend()
    unittest.main(verbosity=2)

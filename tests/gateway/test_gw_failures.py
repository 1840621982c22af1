"""What the gateway does when a call cannot be made (docs/gateway.md): a
denial is a 429 in OpenAI's shape with Retry-After and the limits named,
and never reaches the upstream; a call that can never fit is a 400; a
limit missing from the registry is a 400 naming it; an upstream that
refuses the call (4xx, 5xx), cannot be reached, closes, or never answers
gets its reservation released (usage back to what it was); a stream cut
at the upstream's timeout is charged what was streamed; an answer with no
body is passed on (a 5xx released, a 200 charged its input) and a redirect,
never followed, is a 502.

Backend from --backend (memory, sqlite, tigerbeetle)."""

import json
import math
import time
import unittest

from gw_harness import (CHAT, SHORT_TIMEOUT_SECONDS, GatewayTest, chat, cost, estimate,
                        estimate_text, skip_unless_backend)
from gw_harness import tearDownModule  # noqa: F401 - unittest calls it
from harness import wait_until


class Denials(GatewayTest, unittest.TestCase):

    def assert_retry_headers(self, headers):
        retry_after_ms = int(headers["retry-after-ms"])
        self.assertGreater(retry_after_ms, 0)
        self.assertEqual(int(headers["retry-after"]), math.ceil(retry_after_ms / 1000))
        return retry_after_ms

    def test_rate_limit_denial_is_a_429_and_not_forwarded(self):
        """A full rate limit: 429 rate_limit_exceeded naming it, Retry-After; nothing sent."""
        c = self.gw.caller(req=1)
        self.assertEqual(self.gw.call(c, CHAT, chat("m-normal"))[0], 200)
        before, forwarded = c.snapshot(), self.forwarded()
        status, headers, body = self.gw.call(c, CHAT, chat("m-normal"))
        message = self.assert_openai_error(status, body, 429, "rate_limit_exceeded")
        self.assertIn("'%s'" % c.keys["req"], message)
        for other in ("tok", "in", "out", "conc", "usd"):
            self.assertNotIn(c.keys[other], message)
        retry_after_ms = self.assert_retry_headers(headers)
        self.assertLessEqual(retry_after_ms, 3600 * 1000)  # the window
        self.assertEqual(self.forwarded(), forwarded)
        self.assertEqual(c.snapshot(), before)

    def test_budget_denial_is_insufficient_quota(self):
        """A budget that cannot take the call now: 429 insufficient_quota naming it."""
        c = self.gw.caller(usd=1000)
        self.assertEqual(self.gw.call(c, CHAT, chat("m-counted", max_tokens=600))[0], 200)
        self.assertEqual(c.used("usd"), 450)
        before, forwarded = c.snapshot(), self.forwarded()
        # about 600 usd_micros: more than the 550 left, less than the capacity
        status, headers, body = self.gw.call(c, CHAT, chat("m-counted", max_tokens=1000))
        message = self.assert_openai_error(status, body, 429, "insufficient_quota")
        self.assertEqual(body["error"]["type"], "insufficient_quota")
        self.assertIn("'%s'" % c.keys["usd"], message)
        self.assert_retry_headers(headers)
        self.assertEqual(self.forwarded(), forwarded)
        self.assertEqual(c.snapshot(), before)

    def test_a_budget_denial_far_away_says_not_to_retry(self):
        """A budget spent for the month: its 429 (chat too) carries x-should-retry: false, so
        an SDK does not retry it in a loop; the denied limit's figures ride along."""
        c = self.gw.caller(usd=1000)
        self.assertEqual(self.gw.call(c, CHAT, chat("m-counted", max_tokens=600))[0], 200)
        status, headers, body = self.gw.call(c, CHAT, chat("m-counted", max_tokens=1000))
        self.assert_openai_error(status, body, 429, "insufficient_quota")
        self.assertGreater(self.assert_retry_headers(headers), 60000)
        self.assertEqual(headers["x-should-retry"], "false")
        self.assertIn("x-llmlimit-lease-id", headers)
        # a budget is not a requests or tokens limit: no x-ratelimit-* figures for it
        self.assertFalse([h for h in headers if h.startswith("x-ratelimit-")], headers)

    def test_a_rate_denial_carries_the_denied_limits_figures(self):
        """A 429 of a tokens limit carries x-ratelimit-limit-tokens (its capacity) and
        x-ratelimit-reset-tokens (when this call would fit); no x-should-retry for a wait of
        seconds; what is left is not reported on a denial."""
        c = self.gw.caller()
        self.gw.server.put_limit({"key": c.keys["tok"], "kind": "rolling", "capacity": 600,
                                  "window_seconds": 20})
        # 300 output tokens used (and a few of input) in the window
        self.assertEqual(self.gw.call(c, CHAT, chat("m-long", max_tokens=300))[0], 200)
        status, headers, body = self.gw.call(c, CHAT, chat("m-normal", max_tokens=500))
        self.assert_openai_error(status, body, 429, "rate_limit_exceeded")
        retry_after_ms = self.assert_retry_headers(headers)
        self.assertLessEqual(retry_after_ms, 20000)
        self.assertNotIn("x-should-retry", headers)
        self.assertEqual(headers["x-ratelimit-limit-tokens"], "600")
        reset = headers["x-ratelimit-reset-tokens"]
        self.assertTrue(reset.endswith("s"), reset)
        self.assertNotIn("x-ratelimit-remaining-tokens", headers)
        self.assertNotIn("x-ratelimit-limit-requests", headers)  # not denied

    def test_an_unauthenticated_call_carries_no_limit_headers(self):
        """A 401 names no limit: no key, so no limits, no x-ratelimit-* (docs/gateway.md)."""
        status, headers, body = self.gw.call("llk-not-a-key", CHAT, chat("m-normal"))
        self.assert_openai_error(status, body, 401, "invalid_api_key")
        self.assertFalse([h for h in headers if "ratelimit" in h or h.startswith("x-llmlimit")],
                         headers)

    def test_two_limits_denied_are_both_named(self):
        """Every limit that does not fit is named in the 429."""
        c = self.gw.caller(req=1, conc=1)
        hold = self.gw.raw_request(c, CHAT, chat("m-hang-long"))
        try:
            self.gw.upstream.wait_for(lambda rs: any(r["mode"] == "hang" for r in rs))
            status, _, body = self.gw.call(c, CHAT, chat("m-normal"))
            message = self.assert_openai_error(status, body, 429, "rate_limit_exceeded")
            self.assertIn("'%s'" % c.keys["req"], message)
            self.assertIn("'%s'" % c.keys["conc"], message)
        finally:
            hold.close()

    def test_call_that_can_never_fit_is_a_400(self):
        """More than a limit's whole capacity: 400 invalid_request_error naming it."""
        c = self.gw.caller(tok=100)
        before, forwarded = c.snapshot(), self.forwarded()
        status, headers, body = self.gw.call(c, CHAT, chat("m-normal", max_tokens=200))
        message = self.assert_openai_error(status, body, 400, "request_too_large",
                                           "invalid_request_error")
        self.assertIn("'%s'" % c.keys["tok"], message)
        self.assertNotIn("retry-after", headers)
        self.assertEqual(self.forwarded(), forwarded)
        self.assertEqual(c.snapshot(), before)

    def test_limit_missing_from_the_registry_is_a_400_naming_it(self):
        """A template whose key is not defined (and has no default): 400 naming the key, not
        to be retried; nothing reserved or sent."""
        c = self.gw.caller(skip=("usd",))
        forwarded = self.forwarded()
        status, headers, body = self.gw.call(c, CHAT, chat("m-normal"))
        message = self.assert_openai_error(status, body, 400, "unknown_limit_key",
                                           "invalid_request_error")
        self.assertEqual(headers["x-should-retry"], "false")
        self.assertIn("'%s'" % c.keys["usd"], message)
        self.assertEqual(self.forwarded(), forwarded)
        for name in ("req", "tok", "in", "out", "conc"):
            self.assertEqual(c.usage(name)["reserved"] + c.usage(name)["used"], 0, name)


class UpstreamFailures(GatewayTest, unittest.TestCase):

    def assert_released(self, c, before):
        """Usage is back to what it was (the reservation was released)."""
        self.assertEqual(c.snapshot(), before)

    def check_passed_on(self, model, expect_status):
        c = self.gw.caller()
        before = c.snapshot()
        status, _, body = self.gw.call(c, CHAT, chat(model))
        record = self.gw.upstream.requests()[-1]
        self.assertEqual(record["status"], expect_status)
        self.assertEqual(status, expect_status, body)
        self.assertEqual(body["error"]["message"],
                         self.expected_message(model), body)
        self.assert_released(c, before)
        return body

    def expected_message(self, model):
        return {
            "m-fail-400": "This request was refused by the fake upstream (fail-400).",
            "m-fail-500": "The server had an error while processing your request. Sorry "
                          "about that!",
        }[model]

    def test_upstream_500_is_passed_on_and_released(self):
        """The upstream's 500 and its body reach the client; the reservation is released."""
        body = self.check_passed_on("m-fail-500", 500)
        self.assertEqual(body["error"]["type"], "server_error")

    def test_upstream_400_is_passed_on_and_released(self):
        """The upstream's 400 and its body reach the client; the reservation is released."""
        body = self.check_passed_on("m-fail-400", 400)
        self.assertEqual(body["error"]["type"], "invalid_request_error")

    def test_upstream_429_is_passed_on_and_released(self):
        """The upstream's own 429 reaches the client; the reservation is released."""
        c = self.gw.caller()
        before = c.snapshot()
        status, headers, body = self.gw.call(c, CHAT, chat("m-fail-429"))
        self.assertEqual(status, 429, body)
        self.assertEqual(body["error"]["code"], "rate_limit_exceeded")
        self.assertIn("Rate limit reached for fake-fail-429", body["error"]["message"])
        # The upstream's advice on when to retry reaches the client too.
        self.assertEqual(headers.get("retry-after"), "1")
        self.assertEqual(headers.get("retry-after-ms"), "1000")
        self.assert_released(c, before)

    def test_stream_refused_by_the_upstream_is_passed_on_and_released(self):
        """A streaming call the upstream refuses gets its status and body, and is released."""
        c = self.gw.caller()
        before = c.snapshot()
        answer = self.gw.stream(c, CHAT, chat("m-fail-500", stream=True))
        self.assertEqual(answer.status, 500, answer.raw)
        self.assertIn("Sorry about that", answer.raw)
        self.assert_released(c, before)

    def test_connection_refused_is_a_502_and_released(self):
        """No upstream listening: 502 and the reservation released; the client is not told
        the upstream's address (the log is)."""
        c = self.gw.caller()
        before = c.snapshot()
        status, _, body = self.gw.call(c, CHAT, chat("m-refused"))
        self.assert_openai_error(status, body, 502, "upstream_error", "server_error")
        message = body["error"]["message"]
        self.assertEqual(message, "The upstream could not be reached.")
        self.assertNotIn("127.0.0.1", json.dumps(body))
        self.assertTrue(wait_until(lambda: any("127.0.0.1" in line and "upstream" in line
                                               for line in self.gw.server.stderr_lines)))
        self.assert_released(c, before)

    def test_upstream_closing_before_answering_is_a_502_and_released(self):
        """The upstream reads the call and closes: 502 and the reservation released."""
        c = self.gw.caller()
        before = c.snapshot()
        status, _, body = self.gw.call(c, CHAT, chat("m-close"))
        self.assert_openai_error(status, body, 502, "upstream_error", "server_error")
        # The fake upstream logs its end after closing: the 502 may come first.
        self.gw.upstream.wait_for(lambda rs: rs and rs[-1]["end"] is not None)
        self.assertEqual(self.gw.upstream.requests()[-1]["end"], "closed")
        self.assert_released(c, before)

    def test_stream_to_an_upstream_that_closes_is_a_502_and_released(self):
        """A streaming call whose upstream closes before its head: 502, released."""
        c = self.gw.caller()
        before = c.snapshot()
        answer = self.gw.stream(c, CHAT, chat("m-close", stream=True))
        self.assertEqual(answer.status, 502, answer.raw)
        self.assert_released(c, before)

    def test_upstream_that_never_answers_is_cut_at_its_timeout(self):
        """fake-hang: 504 after the upstream's timeout_seconds, the reservation released."""
        c = self.gw.caller()
        before = c.snapshot()
        started = time.monotonic()
        status, _, body = self.gw.call(c, CHAT, chat("m-hang"))
        elapsed = time.monotonic() - started
        self.assert_openai_error(status, body, 504, "upstream_timeout", "server_error")
        self.assertGreaterEqual(elapsed, SHORT_TIMEOUT_SECONDS - 0.1)
        self.assertLess(elapsed, SHORT_TIMEOUT_SECONDS + 5)
        self.assert_released(c, before)
        # the gateway hung up on the upstream
        self.gw.upstream.wait_for(lambda rs: rs[-1]["end"] == "client_gone")

    def test_stream_that_hangs_is_cut_and_charged_what_was_streamed(self):
        """fake-stream-hang: cut at the timeout, charged input estimate + streamed output."""
        c = self.gw.caller()
        body = chat("m-stream-hang", "please count for me", max_tokens=100, stream=True)
        started = time.monotonic()
        answer = self.gw.stream(c, CHAT, body)
        elapsed = time.monotonic() - started
        self.assertEqual(answer.status, 200, answer.raw)
        self.assertGreaterEqual(elapsed, SHORT_TIMEOUT_SECONDS - 0.1)
        self.assertLess(elapsed, SHORT_TIMEOUT_SECONDS + 5)
        record = self.gw.upstream.wait_for(lambda rs: rs[-1]["end"] is not None)[-1]
        self.assertEqual(record["content_sent"], "alpha bravo charlie")  # half of 6 chunks
        self.assertEqual(answer.content(), record["content_sent"])
        self.assertNotEqual(answer.events[-1:], ["[DONE]"])
        input_tokens = estimate("chat", body)[0]
        output_tokens = estimate_text(record["content_sent"])
        self.assertEqual(c.snapshot(), {
            "req": (0, 1, 0),
            "tok": (0, input_tokens + output_tokens, 0),
            "in": (0, input_tokens, 0),
            "out": (0, output_tokens, 0),
            "conc": (0, 0, 0),
            "usd": (0, cost(input_tokens, output_tokens), 0),
        })


class EmptyAnswers(GatewayTest, unittest.TestCase):
    """An upstream answer with no body at all (Content-Length: 0)."""

    def call_both_ways(self, model):
        """The answers to the same call, streamed and not: [(status, headers, body)]."""
        c = self.gw.caller()
        before = c.snapshot()
        answers = [self.gw.call(c, CHAT, chat(model))]
        streamed = self.gw.stream(c, CHAT, chat(model, stream=True))
        answers.append((streamed.status, streamed.headers, streamed.raw))
        return c, before, answers

    def test_empty_500_is_passed_on_and_released(self):
        """A 500 with no body reaches the client as a 500; the reservation is released."""
        c, before, answers = self.call_both_ways("m-empty-500")
        for status, headers, body in answers:
            self.assertEqual((status, body), (500, ""), headers)
            self.assertIn("x-llmlimit-lease-id", headers)
        self.assertEqual(c.snapshot(), before)

    def test_empty_200_is_passed_on_and_charged_the_input(self):
        """A 200 with no body reaches the client as it came; charged the input estimate only."""
        c, _, answers = self.call_both_ways("m-empty-200")
        for status, headers, body in answers:
            self.assertEqual((status, body), (200, ""), headers)
            self.assertIn("x-llmlimit-lease-id", headers)
        input_tokens = estimate("chat", chat("m-empty-200"))[0]
        self.assertEqual(estimate("chat", chat("m-empty-200", stream=True))[0], input_tokens)
        self.assertEqual(c.snapshot(), {
            "req": (0, 2, 0),
            "tok": (0, 2 * input_tokens, 0),
            "in": (0, 2 * input_tokens, 0),
            "out": (0, 0, 0),
            "conc": (0, 0, 0),
            "usd": (0, 2 * cost(input_tokens, 0), 0),
        })

    def test_empty_307_is_a_502_and_released(self):
        """A redirect (not followed) is no answer: 502 upstream_error; the reservation released."""
        c, before, answers = self.call_both_ways("m-empty-307")
        for status, headers, body in answers:
            if isinstance(body, str):  # the streamed call's raw text
                try:
                    body = json.loads(body)
                except ValueError:
                    pass
            message = self.assert_openai_error(status, body, 502, "upstream_error",
                                               "server_error")
            self.assertIn("307", message)
        self.assertEqual(c.snapshot(), before)


if __name__ == "__main__":
    skip_unless_backend()
    unittest.main(verbosity=2)

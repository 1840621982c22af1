"""Gemini through the gateway (docs/gateway.md, "Gemini"): generateContent and
streamGenerateContent charged exactly what usageMetadata says (cached content
as cache reads, thoughts at the reasoning price, tool-use prompt tokens as
input; a stream's cumulative usageMetadata read as its last value; a missing
count never read as zero); countTokens forwarded and never charged; what goes
upstream (the provider key as x-goog-api-key, never the virtual key, never the
client's ?key=, alt=sse passed on, the reserved output bound written when the
request sets none); the virtual key as x-goog-api-key or ?key=; denials and
errors in Google's shape (RetryInfo, QuotaFailure, x-should-retry); waiting
with Prefer: wait; a client that leaves mid-stream frees its slot; hostile
input (bad JSON, a huge body, a bad model path) answered clearly, nothing
forwarded.

Backend from --backend (memory, sqlite, tigerbeetle)."""

import json
import socket
import time
import unittest
import urllib.parse

from gw_harness import (AGENT_DEFAULT_OUTPUT_TOKENS, AGENT_TEMPLATES, CHAT, GatewayTest,
                        StreamAnswer, agent_cost, estimate, estimate_text, read_until,
                        skip_unless_backend, wait_until)
from gw_harness import tearDownModule  # noqa: F401 - unittest calls it

FREED_S_MAX = 1.0  # a client that leaves frees its slot by then (docs/gateway.md, "Streams")
STATUS_NAMES = {400: "INVALID_ARGUMENT", 401: "UNAUTHENTICATED", 404: "NOT_FOUND",
                413: "INVALID_ARGUMENT", 429: "RESOURCE_EXHAUSTED"}
RETRY_INFO = "type.googleapis.com/google.rpc.RetryInfo"
QUOTA_FAILURE = "type.googleapis.com/google.rpc.QuotaFailure"


def route(model, method="generateContent", query=""):
    return "/v1beta/models/%s:%s%s" % (model, method, "?" + query if query else "")


def request(text="one two three four", **generation):
    body = {"contents": [{"role": "user", "parts": [{"text": text}]}]}
    if generation:
        body["generationConfig"] = generation
    return body


class GeminiTest(GatewayTest):
    gateway_options = {"templates": AGENT_TEMPLATES}

    def call(self, caller, path, body=None, headers=None, raw=None, key_in="header"):
        """A call with the virtual key as x-goog-api-key (key_in "header"), in
        ?key= ("query") or not at all (None)."""
        send = dict(headers or {})
        if key_in == "header":
            send["x-goog-api-key"] = caller.secret
        elif key_in == "query":
            path += ("&" if "?" in path else "?") + "key=" + urllib.parse.quote(caller.secret)
        return self.gw.call(None, path, body, headers=send, raw=raw)

    def stream(self, caller, path, body):
        """A streamed call read to its end (the key as x-goog-api-key)."""
        conn = self.gw.connection()
        try:
            conn.request("POST", path, body=json.dumps(body),
                         headers={"Content-Type": "application/json",
                                  "x-goog-api-key": caller.secret})
            response = conn.getresponse()
            data = response.read()
            headers = {k.lower(): v for k, v in response.getheaders()}
            return StreamAnswer(response.status, headers, data.decode("utf-8", "replace"))
        finally:
            conn.close()

    def assert_charged(self, caller, uncached, output, usd, cache_read=0, requests=1):
        """Every limit of caller holds exactly these amounts, all settled."""
        all_input = uncached + cache_read
        self.assertEqual(caller.snapshot(), {
            "req": (0, requests, 0), "tok": (0, all_input + output, 0),
            "in": (0, all_input, 0), "unc": (0, uncached, 0), "out": (0, output, 0),
            "conc": (0, 0, 0), "usd": (0, usd, 0)})

    def assert_google_error(self, status, body, expect_status):
        """{"error":{"code","message","status"[,"details"]}}; returns the error."""
        self.assertEqual(status, expect_status, body)
        self.assertIsInstance(body, dict, body)
        self.assertEqual(set(body), {"error"}, body)
        error = body["error"]
        self.assertLessEqual({"code", "message", "status"}, set(error), body)
        self.assertLessEqual(set(error), {"code", "message", "status", "details"}, body)
        self.assertEqual((error["code"], error["status"]),
                         (expect_status, STATUS_NAMES[expect_status]), body)
        self.assertTrue(error["message"], body)
        return error

    def last_upstream(self):
        return self.gw.upstream.requests()[-1]


class Charges(GeminiTest, unittest.TestCase):

    def test_generate_content_is_charged_its_usage(self):
        """generateContent (key as x-goog-api-key) charges promptTokenCount and
        candidatesTokenCount at their prices; the provider key goes up as x-goog-api-key, the
        virtual key never, and the model's default output bound is written into
        generationConfig (the client set none)."""
        c = self.gw.caller()
        status, headers, body = self.call(c, route("g-counted"), request(temperature=1))
        self.assertEqual(status, 200, body)
        self.assertEqual((body["usageMetadata"]["promptTokenCount"],
                          body["usageMetadata"]["candidatesTokenCount"]), (1001, 499))
        self.assertTrue(headers["x-llmlimit-lease-id"].startswith("gw:"))
        self.assert_charged(c, 1001, 499, agent_cost(uncached=1001, output=499))
        up = self.last_upstream()
        self.assertEqual(urllib.parse.urlsplit(up["path"]).path,
                         "/v1beta/models/fake-normal.prompt_tokens-1001.completion_tokens-499"
                         ":generateContent")
        self.assertEqual(up["query"], {})
        self.assertEqual(up["headers"]["x-goog-api-key"], self.gw.provider_key)
        self.assertNotIn("authorization", up["headers"])
        self.assertNotIn(c.secret, json.dumps(up))
        self.assertEqual(up["body"]["generationConfig"],
                         {"maxOutputTokens": AGENT_DEFAULT_OUTPUT_TOKENS, "temperature": 1})

    def test_a_bound_the_client_set_goes_up_unchanged(self):
        """maxOutputTokens given: the body goes upstream byte for byte; one past the model's
        maximum is a 400 naming the field, nothing forwarded."""
        c = self.gw.caller()
        body = request(maxOutputTokens=321)
        raw = json.dumps(body, indent=2)
        status, _, answer = self.call(c, route("g-normal"), raw=raw)
        self.assertEqual(status, 200, answer)
        self.assertEqual(self.last_upstream()["body"], body)
        forwarded = self.forwarded()
        error = self.assert_google_error(*self.call(
            c, route("g-normal"), request(maxOutputTokens=64001))[::2], 400)
        self.assertIn("generationConfig.maxOutputTokens", error["message"])
        self.assertEqual(self.forwarded(), forwarded)

    def test_cached_thoughts_and_tool_use_are_priced_apart(self):
        """promptTokenCount 3000 (2000 of them cached) + toolUsePromptTokenCount 50 as input,
        candidatesTokenCount 400 + thoughtsTokenCount 100 as output: cached at the cached
        price, thoughts at the reasoning price; streamed or not, the same."""
        usd = agent_cost(uncached=1050, cache_read=2000, output=500, reasoning=100)
        self.assertEqual(usd, 3150 + 600 + 6000 + 2000)
        for method, query in (("generateContent", ""), ("streamGenerateContent", "alt=sse")):
            c = self.gw.caller()
            if query:
                answer = self.stream(c, route("g-parts", method, query), request())
                self.assertEqual(answer.status, 200, answer.raw)
            else:
                status, _, answer = self.call(c, route("g-parts"), request())
                self.assertEqual(status, 200, answer)
            self.assert_charged(c, 1050, 500, usd, cache_read=2000)

    def test_a_stream_is_charged_its_last_cumulative_usage(self):
        """streamGenerateContent?alt=sse: four chunks, each with the usageMetadata so far
        (124, 249, 374, 499 candidates): the last is charged, never their sum; the answer's
        last chunk (finishReason) is given once the lease is completed, so usage shows it as
        soon as the client has the end."""
        c = self.gw.caller()
        answer = self.stream(c, route("g-chunks", "streamGenerateContent", "alt=sse"),
                             request())
        self.assertEqual(answer.status, 200, answer.raw)
        self.assertTrue(answer.headers["content-type"].startswith("text/event-stream"))
        counts = [chunk["usageMetadata"]["candidatesTokenCount"] for chunk in answer.chunks()]
        self.assertEqual(counts, [124, 249, 374, 499])
        self.assertEqual(answer.chunks()[-1]["candidates"][0]["finishReason"], "STOP")
        self.assertEqual(self.last_upstream()["query"], {"alt": "sse"})
        self.assert_charged(c, 1001, 499, agent_cost(uncached=1001, output=499))

    def test_a_stream_without_alt_sse_is_one_array_charged_its_last_usage(self):
        """streamGenerateContent without alt=sse: Google's JSON array of chunks, passed on
        whole; its last usageMetadata is charged."""
        c = self.gw.caller()
        status, _, body = self.call(c, route("g-chunks", "streamGenerateContent"), request())
        self.assertEqual(status, 200, body)
        self.assertEqual(len(body), 4)
        self.assertEqual(self.last_upstream()["query"], {})
        self.assert_charged(c, 1001, 499, agent_cost(uncached=1001, output=499))

    def test_a_missing_count_is_never_read_as_zero(self):
        """No usageMetadata in a stream: the input estimate and the output counted from the
        text; usageMetadata without candidatesTokenCount: its exact input, and the output
        counted from the text (never 0)."""
        text = " ".join(["alpha", "bravo", "charlie", "delta", "echo", "foxtrot", "golf",
                         "hotel", "india"])
        output = estimate_text(text)
        self.assertGreater(output, 0)
        c = self.gw.caller()
        body = request()
        answer = self.stream(c, route("g-no-usage", "streamGenerateContent", "alt=sse"), body)
        self.assertEqual(answer.status, 200, answer.raw)
        input_tokens, _ = estimate("gemini", body, 64000, AGENT_DEFAULT_OUTPUT_TOKENS)
        self.assert_charged(c, input_tokens, output,
                            agent_cost(uncached=input_tokens, output=output))
        for method, query in (("generateContent", ""), ("streamGenerateContent", "alt=sse")):
            c = self.gw.caller()
            if query:
                self.assertEqual(self.stream(c, route("g-no-candidates", method, query),
                                             body).status, 200)
            else:
                self.assertEqual(self.call(c, route("g-no-candidates"), body)[0], 200)
            self.assert_charged(c, 1001, output, agent_cost(uncached=1001, output=output))

    def test_count_tokens_is_forwarded_and_never_charged(self):
        """countTokens reaches the upstream with the provider key and charges nothing."""
        c = self.gw.caller()
        before = c.snapshot()
        status, _, body = self.call(c, route("g-normal", "countTokens"), request())
        self.assertEqual((status, body), (200, {"totalTokens": 4}), body)
        up = self.last_upstream()
        self.assertTrue(up["path"].endswith(":countTokens"), up["path"])
        self.assertEqual(up["headers"]["x-goog-api-key"], self.gw.provider_key)
        self.assertEqual(c.snapshot(), before)

    def test_the_key_in_the_query_is_taken_and_never_sent_on(self):
        """?key=<virtual key> (with alt=sse) authenticates the call; upstream gets alt=sse
        and the provider key, never the virtual key."""
        c = self.gw.caller()
        status, _, body = self.call(
            c, route("g-counted", "streamGenerateContent", "alt=sse"), request(),
            key_in="query")
        self.assertEqual(status, 200, body)
        up = self.last_upstream()
        self.assertEqual(up["query"], {"alt": "sse"})
        self.assertNotIn(c.secret, json.dumps(up))
        self.assertNotIn(c.secret, self.gw.server.stderr_text())
        self.assert_charged(c, 1001, 499, agent_cost(uncached=1001, output=499))

    def test_bounds_one_past_are_refused(self):
        """candidateCount 9 (past GW_GEMINI_CANDIDATES_MAX, 8) and a ?key= of 513 bytes (past
        GW_QUERY_KEY_LENGTH_MAX) are 400s in Google's shape, nothing forwarded; candidateCount
        8 reserves eight times the output."""
        c = self.gw.caller()
        before, forwarded = c.snapshot(), self.forwarded()
        error = self.assert_google_error(*self.call(
            c, route("g-normal"), request(candidateCount=9))[::2], 400)
        self.assertIn("generationConfig.candidateCount", error["message"])
        error = self.assert_google_error(*self.gw.call(
            None, route("g-normal", query="key=" + "k" * 513), request())[::2], 400)
        self.assertIn("key", error["message"])
        self.assertEqual(self.forwarded(), forwarded)
        self.assertEqual(c.snapshot(), before)
        c = self.gw.caller(out=8 * 100 - 1)
        error = self.assert_google_error(*self.call(
            c, route("g-normal"), request(candidateCount=8, maxOutputTokens=100))[::2], 400)
        self.assertIn("'%s'" % c.keys["out"], error["message"])
        self.assertEqual(self.forwarded(), forwarded)


class Errors(GeminiTest, unittest.TestCase):

    def test_a_denial_is_googles_429_with_retry_info_and_quota_failure(self):
        """A rate limit that is full for an hour: 429 RESOURCE_EXHAUSTED whose details carry
        RetryInfo (the wait, whole seconds) and QuotaFailure naming the limit, Retry-After,
        x-should-retry: false (further than 60 s); nothing forwarded."""
        c = self.gw.caller(req=1)
        self.assertEqual(self.call(c, route("g-normal"), request())[0], 200)
        forwarded = self.forwarded()
        status, headers, body = self.call(c, route("g-normal"), request())
        error = self.assert_google_error(status, body, 429)
        self.assertIn("'%s'" % c.keys["req"], error["message"])
        retry, quota = error["details"]
        self.assertEqual(retry["@type"], RETRY_INFO)
        delay = int(retry["retryDelay"][:-1])
        self.assertTrue(retry["retryDelay"].endswith("s") and 3500 < delay <= 3600, retry)
        self.assertEqual(int(headers["retry-after"]), delay)
        self.assertEqual(headers["x-should-retry"], "false")
        self.assertEqual(quota["@type"], QUOTA_FAILURE)
        self.assertEqual([v["subject"] for v in quota["violations"]], [c.keys["req"]])
        self.assertEqual(self.forwarded(), forwarded)

    def test_a_spent_monthly_budget_says_when_it_resets(self):
        """A budget spent for the month: 429 whose message names the budget and its reset,
        and whose RetryInfo is days away (the Gemini CLI stops on it)."""
        c = self.gw.caller()
        cost = agent_cost(uncached=1001, output=499)
        status, _, body = self.gw.server.put_limit({
            "key": c.keys["usd"], "kind": "budget", "capacity": cost + 100, "period": "month",
            "timeout_seconds": 120, "unit": "usd_micros"})
        self.assertEqual(status, 200, body)
        # maxOutputTokens 499: the call's worst case fits the budget; its cost nearly fills it
        self.assertEqual(self.call(c, route("g-counted"), request(maxOutputTokens=499))[0], 200)
        status, headers, body = self.call(c, route("g-counted"), request(maxOutputTokens=499))
        error = self.assert_google_error(status, body, 429)
        self.assertIn("Budget exhausted: '%s'" % c.keys["usd"], error["message"])
        self.assertIn("resets", error["message"])
        delay = int(error["details"][0]["retryDelay"][:-1])
        self.assertGreater(delay, 300)
        self.assertEqual(headers["x-should-retry"], "false")

    def test_errors_have_googles_shape(self):
        """No key 401 UNAUTHENTICATED, a wrong key too; bad JSON 400 INVALID_ARGUMENT; an
        unknown model, a method not served, no method 404 NOT_FOUND; nothing forwarded,
        nothing charged."""
        c = self.gw.caller()
        before, forwarded = c.snapshot(), self.forwarded()
        self.assert_google_error(*self.call(c, route("g-normal"), request(),
                                            key_in=None)[::2], 401)
        self.assert_google_error(*self.gw.call(None, route("g-normal"), request(),
                                               headers={"x-goog-api-key": "llk-wrong"})[::2],
                                 401)
        self.assert_google_error(*self.call(c, route("g-normal"), raw="{nope")[::2], 400)
        error = self.assert_google_error(*self.call(c, route("g-nope"), request())[::2], 404)
        self.assertIn("g-nope", error["message"])
        error = self.assert_google_error(*self.call(c, route("g-normal", "embedContent"),
                                                    request())[::2], 404)
        self.assertIn("generateContent", error["message"])
        self.assert_google_error(*self.call(c, "/v1beta/models/g-normal", request())[::2], 404)
        self.assert_google_error(*self.call(c, "/v1beta/models/:generateContent",
                                            request())[::2], 404)
        self.assert_google_error(*self.call(c, "/v1beta/models/%zz:generateContent",
                                            request())[::2], 404)
        self.assert_google_error(*self.call(c, route("g-" + "x" * 300), request())[::2], 404)
        error = self.assert_google_error(*self.call(c, route("g-normal"), {"contents": 7})[::2],
                                         400)
        self.assertIn("contents", error["message"])
        self.assertEqual(self.forwarded(), forwarded)
        self.assertEqual(c.snapshot(), before)

    def test_an_upstream_refusal_is_passed_on_and_not_charged(self):
        """The upstream's own 429 (Google's body) goes to the client as it came, with its
        Retry-After; the lease is released: nothing charged."""
        c = self.gw.caller()
        before = c.snapshot()
        status, headers, body = self.call(c, route("g-fail-429"), request())
        self.assert_google_error(status, body, 429)
        self.assertEqual(body["error"]["message"], "fake upstream: fail-429")
        self.assertEqual(headers["retry-after"], "1")
        self.assertTrue(wait_until(lambda: c.snapshot() == before), c.snapshot())

    def test_a_huge_body_is_a_413_in_googles_shape(self):
        """A body announced past the server's limit: 413 in Google's shape, never read,
        never forwarded."""
        c = self.gw.caller()
        forwarded = self.forwarded()
        sock = socket.create_connection((self.gw.server.host, self.gw.server.port), timeout=10)
        sock.sendall(("POST %s HTTP/1.1\r\nHost: x\r\nx-goog-api-key: %s\r\n"
                      "Connection: close\r\nContent-Length: %d\r\n\r\n"
                      % (route("g-normal"), c.secret, 2 << 20)).encode())
        reply = read_until(sock, b"}}")
        sock.close()
        head, _, text = reply.partition(b"\r\n\r\n")
        self.assertTrue(head.startswith(b"HTTP/1.1 413"), head)
        self.assert_google_error(413, json.loads(text), 413)
        self.assertEqual(self.forwarded(), forwarded)

    def test_a_model_on_the_other_dialects_route_is_a_400_naming_the_right_one(self):
        """An OpenAI model on a Gemini route (Google's shape), a Gemini model on chat
        (OpenAI's): 400 naming the routes that serve it."""
        c = self.gw.caller()
        error = self.assert_google_error(*self.call(c, route("m-normal"), request())[::2], 400)
        self.assertIn("/v1/chat/completions", error["message"])
        status, _, body = self.gw.call(c, CHAT, {"model": "g-normal", "messages": [
            {"role": "user", "content": "hi"}]})
        self.assertEqual(status, 400, body)
        self.assertIn("/v1beta/models/{model}:generateContent", body["error"]["message"])


def waiting_keys(_):
    return {"max_wait_seconds": 10}


class Waiting(GeminiTest, unittest.TestCase):
    gateway_options = dict(GeminiTest.gateway_options, key_fields=waiting_keys)

    def test_prefer_wait_waits_for_a_slot_instead_of_a_429(self):
        """The only slot is held by a slow stream: a second call with Prefer: wait=10 waits
        for it (x-llmlimit-waited-ms), is never told 429, and is charged once."""
        c = self.gw.caller(conc=1)
        sock = self.gw.raw_request(c, route("g-slow", "streamGenerateContent", "alt=sse"),
                                   request(), headers={"x-goog-api-key": c.secret})
        read_until(sock, b"alpha")
        status, headers, body = self.call(c, route("g-normal"), request(),
                                          headers={"Prefer": "wait=10"})
        sock.close()
        self.assertEqual(status, 200, body)
        self.assertGreater(int(headers["x-llmlimit-waited-ms"]), 0)
        wait_until(lambda: c.reserved("conc") == 0)
        self.assertEqual(c.used("req"), 2)


class Clients(GeminiTest, unittest.TestCase):

    def test_a_client_that_leaves_mid_stream_frees_its_slot_and_pays_what_was_streamed(self):
        """The upstream stops mid-stream and the client leaves: its concurrency slot is free
        within a second, and it is charged the input its chunks told and the output
        streamed (never nothing)."""
        c = self.gw.caller(conc=1)
        sock = self.gw.raw_request(c, route("g-hang", "streamGenerateContent", "alt=sse"),
                                   request(), headers={"x-goog-api-key": c.secret})
        read_until(sock, b"charlie")
        self.assertEqual(c.reserved("conc"), 1)
        started = time.monotonic()
        sock.close()
        self.assertTrue(wait_until(lambda: c.reserved("conc") == 0, timeout_s=FREED_S_MAX,
                                   interval_s=0.01))
        print("  slot freed %.3f s after the client left" % (time.monotonic() - started))
        self.assertTrue(wait_until(lambda: c.reserved("usd") == 0))
        snapshot = c.snapshot()
        self.assertEqual(snapshot["in"], (0, 1001, 0))
        self.assertEqual(snapshot["out"], (0, max(3, estimate_text("alpha bravo charlie")), 0))


if __name__ == "__main__":
    skip_unless_backend()
    unittest.main()

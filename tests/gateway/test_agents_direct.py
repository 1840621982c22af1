"""The real agents and SDKs (Claude Code, Codex, @anthropic-ai/sdk, openai's
Responses), pinned in tests/gateway/node, run headless and offline straight
against the fake upstream: what each sends (paths, headers, body fields), what
it needs back to succeed, and how it retries. These are the facts the gateway
relies on (docs/gateway.md, "What the agents send"); a new version of a
client that changes one fails here first.
Exits 77 (skipped) when node or a package (npm ci --prefix tests/gateway/node)
is missing."""

import json
import os
import sys
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import agents  # noqa: E402
import fake_upstream  # noqa: E402

NODE = agents.node_from_argv()
KEY = "sk-direct-test-key"
PROMPT = "say hi"
CLAUDE_VERSION = "2.1.197"
CODEX_VERSION = "0.171.0"
WORDS = list(fake_upstream.WORDS)
# What Claude Code's first call asks, in every field it sends.
CLAUDE_FIELDS = {"context_management", "max_tokens", "messages", "metadata", "model",
                 "output_config", "stream", "system", "thinking", "tools"}
CODEX_FIELDS = {"client_metadata", "include", "input", "model", "parallel_tool_calls",
                "prompt_cache_key", "reasoning", "store", "stream", "tool_choice", "tools"}


def custom_headers(**params):
    """ANTHROPIC_CUSTOM_HEADERS: the fake's x-fake-* parameters, one a line."""
    return "\n".join("x-fake-%s: %s" % (name.replace("_", "-"), value)
                     for name, value in params.items())


def gaps_ms(records):
    times = [r["received_unix_ms"] for r in records]
    return [later - earlier for earlier, later in zip(times, times[1:])]


class DirectTest(unittest.TestCase):
    """One fake for a class (the key enforced), its log cleared before each test."""

    @classmethod
    def setUpClass(cls):
        cls.upstream = fake_upstream.start(api_key=KEY, hang_seconds_max=30)

    @classmethod
    def tearDownClass(cls):
        cls.upstream.stop()

    def setUp(self):
        self.upstream.clear()

    def posts(self):
        return [r for r in self.upstream.requests() if r["method"] == "POST"]

    def ended(self, count):
        """The log once `count` requests have all ended."""
        return self.upstream.wait_for(lambda rs: len(rs) == count and all(r["end"] for r in rs))


class ClaudeCode(DirectTest):
    def claude(self, env=None, **options):
        result = agents.run_claude(self.upstream.url, PROMPT, api_key=KEY, env=env, node=NODE,
                                   **options)
        self.assertIsNotNone(result.code, "claude timed out:\n" + result.stderr[-2000:])
        return result

    def test_probes_head_then_streams_messages_with_max_tokens_64000(self):
        """Claude Code sends HEAD /, then one streamed POST /v1/messages?beta=true (x-api-key,
        anthropic-version 2023-06-01, max_tokens 64000) and prints the fake's answer and usage."""
        result = self.claude({"ANTHROPIC_CUSTOM_HEADERS": custom_headers(
            prompt_tokens=100, completion_tokens=4, cached_tokens=30, cache_write_5m=20,
            cache_write_1h=10, message_deltas=2)})
        self.assertEqual(result.code, 0, result.stdout + result.stderr)
        head, post = self.ended(2)
        self.assertEqual([(r["method"], r["path"], r["status"]) for r in (head, post)],
                         [("HEAD", "/", 200), ("POST", "/v1/messages?beta=true", 200)])
        headers = post["headers"]
        self.assertEqual((headers["x-api-key"], headers["anthropic-version"], headers["x-app"]),
                         (KEY, "2023-06-01", "cli"))
        self.assertNotIn("authorization", headers)
        self.assertIn("claude-code-20250219", headers["anthropic-beta"].split(","))
        self.assertTrue(headers["user-agent"].startswith("claude-cli/%s " % CLAUDE_VERSION))
        self.assertEqual(headers["x-stainless-retry-count"], "0")
        self.assertIn("x-claude-code-session-id", headers)
        body = post["body"]
        self.assertEqual(set(body), CLAUDE_FIELDS)
        self.assertEqual((body["model"], body["max_tokens"], body["stream"], body["thinking"]),
                         ("claude-opus-4-8", 64000, True, {"type": "adaptive"}))
        self.assertGreater(len(body["tools"]), 5)
        self.assertEqual({m["role"] for m in body["messages"]}, {"user", "system"})
        self.assertTrue(any(PROMPT in json.dumps(m) for m in body["messages"]
                            if m["role"] == "user"))
        self.assertIn("session_id", json.loads(body["metadata"]["user_id"]))
        self.assertEqual((post["end"], post["content_sent"]), ("stream_complete",
                                                               " ".join(WORDS[:4])))
        out = result.json
        self.assertEqual((out["is_error"], out["result"]), (False, " ".join(WORDS[:4])))
        self.assertEqual((out["usage"]["input_tokens"], out["usage"]["cache_read_input_tokens"],
                          out["usage"]["cache_creation_input_tokens"],
                          out["usage"]["output_tokens"]), (100, 30, 30, 4))

    def test_auth_token_goes_as_a_bearer_and_max_output_tokens_caps(self):
        """ANTHROPIC_AUTH_TOKEN is sent as Authorization: Bearer (no x-api-key);
        CLAUDE_CODE_MAX_OUTPUT_TOKENS sets max_tokens."""
        result = agents.run_claude(self.upstream.url, PROMPT, auth_token=KEY, node=NODE,
                                   env={"CLAUDE_CODE_MAX_OUTPUT_TOKENS": "1000"})
        self.assertEqual(result.code, 0, result.stdout + result.stderr)
        post, = self.posts()
        self.assertEqual(post["headers"]["authorization"], "Bearer " + KEY)
        self.assertNotIn("x-api-key", post["headers"])
        self.assertEqual(post["body"]["max_tokens"], 1000)

    def test_429_with_x_should_retry_false_is_not_retried(self):
        """A 429 with x-should-retry: false: one attempt, then exit 1 with api_error_status 429."""
        result = self.claude({"ANTHROPIC_CUSTOM_HEADERS": custom_headers(
            mode="fail-429", retry_after_ms=1000, should_retry=0)})
        self.assertEqual(result.code, 1)
        self.assertEqual(len(self.posts()), 1)
        self.assertEqual((result.json["is_error"], result.json["api_error_status"]), (True, 429))

    def test_429_is_retried_claude_code_max_retries_times_after_retry_after(self):
        """A 429 without x-should-retry: CLAUDE_CODE_MAX_RETRIES=2 retries, each at least
        retry-after (seconds) later, all with x-stainless-retry-count 0."""
        result = self.claude({"ANTHROPIC_CUSTOM_HEADERS": custom_headers(
            mode="fail-429", retry_after_ms=1000), "CLAUDE_CODE_MAX_RETRIES": "2"})
        self.assertEqual(result.code, 1)
        posts = self.posts()
        self.assertEqual(len(posts), 3)
        self.assertTrue(all(gap >= 950 for gap in gaps_ms(posts)), gaps_ms(posts))
        self.assertEqual({p["headers"]["x-stainless-retry-count"] for p in posts}, {"0"})
        self.assertEqual(result.json["api_error_status"], 429)

    def test_retry_after_over_60_seconds_is_not_waited_for(self):
        """A 429 whose retry-after is over 60 s: Claude Code gives up at once."""
        result = self.claude({"ANTHROPIC_CUSTOM_HEADERS": custom_headers(
            mode="fail-429", retry_after_ms=61000), "CLAUDE_CODE_MAX_RETRIES": "2"})
        self.assertEqual((result.code, len(self.posts())), (1, 1))

    def test_x_should_retry_false_stops_it_on_a_5xx_and_a_401_too(self):
        """x-should-retry: false on a 500 or a 401 (both retried without it): one attempt,
        exit 1; the 500 reported with the upstream's message as "a server-side issue"."""
        results = {}
        for status in (500, 401):
            self.upstream.clear()
            results[status] = self.claude({"ANTHROPIC_CUSTOM_HEADERS": custom_headers(
                mode="fail-%d" % status, should_retry=0), "CLAUDE_CODE_MAX_RETRIES": "2"})
            self.assertEqual((results[status].code, len(self.posts())), (1, 1), status)
            self.assertEqual(results[status].json["api_error_status"], status)
        self.assertIn("Internal server error", results[500].json["result"])
        self.assertIn("server-side issue", results[500].json["result"])

    def test_a_400_is_reported_as_it_is_and_not_retried(self):
        """A 400: one attempt, the upstream's message in the result."""
        result = self.claude({"ANTHROPIC_CUSTOM_HEADERS": custom_headers(mode="fail-400"),
                              "CLAUDE_CODE_MAX_RETRIES": "2"})
        self.assertEqual((result.code, len(self.posts())), (1, 1))
        self.assertEqual(result.json["result"],
                         "API Error: 400 This request was refused by the fake upstream "
                         "(fail-400).")

    def test_a_broken_stream_is_asked_again_without_stream(self):
        """A stream closed mid-way: Claude Code sends the same call once more, not streamed
        (max_tokens still 64000), unless CLAUDE_CODE_DISABLE_NONSTREAMING_FALLBACK is set."""
        result = self.claude({"ANTHROPIC_CUSTOM_HEADERS": custom_headers(mode="stream-close"),
                              "CLAUDE_CODE_MAX_RETRIES": "0"})
        self.assertEqual(result.code, 1)
        first, second = self.posts()
        self.assertEqual((first["body"]["stream"], first["end"]), (True, "closed"))
        self.assertNotIn("stream", second["body"])
        self.assertEqual(second["body"]["max_tokens"], 64000)
        self.assertEqual(set(second["body"]), CLAUDE_FIELDS - {"stream"})
        self.upstream.clear()
        result = self.claude({"ANTHROPIC_CUSTOM_HEADERS": custom_headers(mode="stream-close"),
                              "CLAUDE_CODE_MAX_RETRIES": "0",
                              "CLAUDE_CODE_DISABLE_NONSTREAMING_FALLBACK": "1"})
        self.assertEqual((result.code, len(self.posts())), (1, 1))


class Codex(DirectTest):
    def codex(self, model, provider=None, **options):
        result = agents.run_codex(self.upstream.url, PROMPT, KEY, model, provider=provider,
                                  node=NODE, **options)
        self.assertIsNotNone(result.code, "codex timed out:\n" + result.stderr[-2000:])
        self.assertIsNotNone(result.json, "codex printed something else:\n" + result.stdout)
        return result

    def test_streams_one_response_without_max_output_tokens(self):
        """Codex sends one streamed POST /v1/responses (bearer key, store false, no
        max_output_tokens) and reports the fake's answer and usage."""
        result = self.codex("gpt-5.1-codex", {
            "stream_max_retries": 0, "request_max_retries": 0,
            "http_headers": {"x-fake-prompt-tokens": "100", "x-fake-completion-tokens": "4",
                             "x-fake-cached-tokens": "2", "x-fake-reasoning-tokens": "3"}})
        self.assertEqual(result.code, 0, result.stdout + result.stderr)
        post, = self.ended(1)
        self.assertEqual((post["method"], post["path"], post["status"], post["end"]),
                         ("POST", "/v1/responses", 200, "stream_complete"))
        headers = post["headers"]
        self.assertEqual((headers["authorization"], headers["accept"], headers["originator"]),
                         ("Bearer " + KEY, "text/event-stream", "codex_exec"))
        self.assertTrue(headers["user-agent"].startswith("codex_exec/%s " % CODEX_VERSION))
        self.assertNotIn("x-api-key", headers)
        body = post["body"]
        self.assertEqual(set(body), CODEX_FIELDS)
        self.assertEqual((body["model"], body["stream"], body["store"], body["include"]),
                         ("gpt-5.1-codex", True, False, ["reasoning.encrypted_content"]))
        self.assertEqual(body["input"][-1]["content"], [{"type": "input_text", "text": PROMPT}])
        self.assertEqual(agents.codex_message(result.json), " ".join(WORDS[:4]))
        self.assertEqual(result.json[-1], {"type": "turn.completed", "usage": {
            "input_tokens": 100, "cached_input_tokens": 2, "cache_write_input_tokens": 0,
            "output_tokens": 7, "reasoning_output_tokens": 3}})

    def test_429_is_retried_despite_x_should_retry_false(self):
        """A 429 with x-should-retry: false is still retried stream_max_retries times,
        each at least retry-after later; then exit 1 with turn.failed."""
        result = self.codex("fake-fail-429:retry_after_ms=1000:should_retry=0",
                            {"stream_max_retries": 1, "request_max_retries": 0})
        self.assertEqual(result.code, 1)
        posts = self.posts()
        self.assertEqual(len(posts), 2)
        self.assertTrue(all(gap >= 950 for gap in gaps_ms(posts)), gaps_ms(posts))
        self.assertEqual(result.json[-1]["type"], "turn.failed")

    def test_retries_bounded_by_stream_and_request_max_retries(self):
        """With stream_max_retries and request_max_retries 0 a 429 or a 500 is tried once;
        request_max_retries alone retries a 500."""
        for model in ("fake-fail-429", "fake-fail-500"):
            self.upstream.clear()
            result = self.codex(model, {"stream_max_retries": 0, "request_max_retries": 0})
            self.assertEqual((result.code, len(self.posts())), (1, 1), model)
        self.upstream.clear()
        result = self.codex("fake-fail-500", {"stream_max_retries": 0, "request_max_retries": 2})
        self.assertEqual((result.code, len(self.posts())), (1, 3))

    def test_x_should_retry_false_on_a_5xx_is_ignored(self):
        """A 500 with x-should-retry: false is retried request_max_retries times all the same,
        and reported in words of Codex's own, without the upstream's message."""
        result = self.codex("fake-fail-500:should_retry=0",
                            {"stream_max_retries": 0, "request_max_retries": 2})
        self.assertEqual((result.code, len(self.posts())), (1, 3))
        message = result.json[-1]["error"]["message"]
        self.assertEqual(result.json[-1]["type"], "turn.failed")
        self.assertIn("high demand", message)
        self.assertNotIn("had an error", message)

    def test_a_400_is_never_retried_and_its_body_is_shown(self):
        """A 400: one attempt whatever the retry settings; the turn fails with the body."""
        result = self.codex("fake-fail-400", {"stream_max_retries": 2,
                                              "request_max_retries": 2})
        self.assertEqual((result.code, len(self.posts())), (1, 1))
        self.assertIn("This request was refused by the fake upstream (fail-400).",
                      result.json[-1]["error"]["message"])

    def test_another_4xx_is_sent_again_as_a_failed_stream(self):
        """A 403 (x-should-retry: false or not): sent again stream_max_retries times, not
        request_max_retries; reported as "unexpected status 403" with the upstream's message."""
        result = self.codex("fake-fail-403:should_retry=0", {"stream_max_retries": 1,
                                                             "request_max_retries": 2})
        self.assertEqual((result.code, len(self.posts())), (1, 2))
        message = result.json[-1]["error"]["message"]
        self.assertIn("unexpected status 403", message)
        self.assertIn("You are not allowed to sample from this model", message)

    def test_a_broken_stream_is_sent_again(self):
        """A stream closed mid-way: Codex sends the whole call again (stream_max_retries)."""
        result = self.codex("fake-stream-close", {"stream_max_retries": 1,
                                                  "request_max_retries": 0})
        self.assertEqual(result.code, 1)
        posts = self.posts()
        self.assertEqual([(p["body"]["stream"], p["end"]) for p in posts],
                         [(True, "closed"), (True, "closed")])


class Sdks(DirectTest):
    def sdk(self, calls, model, **options):
        result = agents.run_sdk(NODE, self.upstream.url, KEY, calls, model, **options)
        self.assertIsNotNone(result.json, result.stdout + result.stderr)
        return result

    def test_anthropic_sdk_create_and_stream(self):
        """@anthropic-ai/sdk sends POST /v1/messages with the key as a bearer token and
        anthropic-version 2026-10-21; a stream's usage is its last cumulative message_delta."""
        result = self.sdk(["anthropic", "anthropic_stream"],
                          "fake-normal:completion_tokens=3:cached_tokens=5:message_deltas=3")
        self.assertEqual(result.code, 0, result.stdout + result.stderr)
        plain, streamed = self.posts()
        for post in (plain, streamed):
            self.assertEqual((post["path"], post["headers"]["authorization"],
                              post["headers"]["anthropic-version"]),
                             ("/v1/messages", "Bearer " + KEY, "2026-10-21"))
            self.assertNotIn("x-api-key", post["headers"])
            self.assertNotIn("anthropic-beta", post["headers"])
        self.assertEqual(set(plain["body"]), {"model", "max_tokens", "messages"})
        self.assertEqual((streamed["body"]["stream"], streamed["body"]["max_tokens"]),
                         (True, 1000))
        for call in ("anthropic", "anthropic_stream"):
            answer = result.json[call]
            self.assertEqual((answer["text"], answer["usage"]["output_tokens"],
                              answer["usage"]["cache_read_input_tokens"]),
                             ("alpha bravo charlie", 3, 5), call)
        self.assertEqual(result.json["anthropic_stream"]["events"].count("message_delta"), 3)

    def test_openai_responses_create_and_stream(self):
        """openai's responses.create sends POST /v1/responses with the bearer key and
        max_output_tokens; both forms read the fake's text and usage."""
        result = self.sdk(["responses", "responses_stream"],
                          "fake-normal:completion_tokens=3:reasoning_tokens=2:cached_tokens=1")
        self.assertEqual(result.code, 0, result.stdout + result.stderr)
        plain, streamed = self.posts()
        self.assertEqual([(p["path"], p["headers"]["authorization"]) for p in (plain, streamed)],
                         [("/v1/responses", "Bearer " + KEY)] * 2)
        self.assertEqual(set(plain["body"]), {"model", "input", "max_output_tokens"})
        self.assertEqual(streamed["body"]["stream"], True)
        for call in ("responses", "responses_stream"):
            answer = result.json[call]
            self.assertEqual((answer["status"], answer["text"]),
                             ("completed", "alpha bravo charlie"), call)
            self.assertEqual(answer["usage"]["output_tokens_details"]["reasoning_tokens"], 2)
            self.assertEqual(answer["usage"]["input_tokens_details"]["cached_tokens"], 1)
        self.assertEqual(result.json["responses_stream"]["events"][-1], "response.completed")

    def test_both_sdks_obey_x_should_retry(self):
        """x-should-retry: false stops both SDKs after one attempt; without it they retry
        maxRetries times (x-stainless-retry-count 0, 1, 2), the openai SDK even when
        retry-after is over 60 s (it then waits its own backoff)."""
        result = self.sdk(["anthropic", "responses"],
                          "fake-fail-429:retry_after_ms=100:should_retry=0", max_retries=2)
        self.assertEqual(result.code, 1)
        self.assertEqual([(p["path"], p["status"]) for p in self.posts()],
                         [("/v1/messages", 429), ("/v1/responses", 429)])
        self.assertEqual([result.json[c]["status"] for c in ("anthropic", "responses")],
                         [429, 429])
        self.assertEqual(result.json["anthropic"]["type"], "RateLimitError")
        self.upstream.clear()
        self.sdk(["anthropic", "responses"], "fake-fail-429:retry_after_ms=100", max_retries=2)
        self.assertEqual([(p["path"], p["headers"]["x-stainless-retry-count"])
                          for p in self.posts()],
                         [("/v1/messages", str(n)) for n in range(3)]
                         + [("/v1/responses", str(n)) for n in range(3)])
        self.upstream.clear()
        self.sdk(["responses"], "fake-fail-429:retry_after_ms=61000", max_retries=1)
        self.assertEqual(len(self.posts()), 2)


if __name__ == "__main__":
    agents.skip_unless_installed(NODE)
    unittest.main(verbosity=2)

"""The real agents and SDKs (Claude Code, Codex, @anthropic-ai/sdk, openai's
Responses; tests/gateway/node) run headless through llmlimitd's gateway,
with the fake upstream behind it (docs/agents.md): each call is charged
exactly its usage on every limit; a budget denial reaches the agent as a
rate-limit failure and it exits without a retry loop (Claude Code and the
SDKs obey x-should-retry: false; Codex with its retries bounded in
config.toml as docs/agents.md says); a limit missing without a default ends
each at once (a 400 naming it, Codex at its default retries too); killing
the agent mid-stream frees its concurrency slot within a second and charges
what was streamed; Claude Code's non-streamed retry of a broken stream is a
second call with its own lease, each charged for itself; an agent whose slot
is taken waits for it (asking with a header, or by its key's default)
instead of a 429.

Backend from --backend (memory, sqlite, tigerbeetle). Exits 77 (skipped)
when node or a package (npm ci --prefix tests/gateway/node) is missing."""

import concurrent.futures
import json
import os
import re
import sys
import time
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import agents  # noqa: E402
from gw_harness import (AGENT_DEFAULT_OUTPUT_TOKENS, AGENT_MAX_OUTPUT_TOKENS,  # noqa: E402
                        AGENT_TEMPLATES, Caller,
                        GatewayTest, agent_cost, agent_model, estimate, estimate_text, skip_unless_backend,
                        wait_until)
from gw_harness import tearDownModule  # noqa: E402,F401 - unittest calls it

NODE = agents.node_from_argv()
PROMPT = "say hi"
# A killed agent's slot is free by then: the hold would otherwise last its
# 120 s timeout; the gateway frees it as it sees the socket close.
FREED_S_MAX = 1.0
SLACK_MS = 50  # of the fake's stamps of one call's end and the next one's start
HALF = "alpha bravo charlie"  # what a cut stream of 6 words sends before it stops

# Public names the agents ask for -> what the fake answers (its parameters
# ride in the upstream model's name: the gateway passes no client header on).
CLAUDE_USAGE = "prompt_tokens=100:cached_tokens=30:cache_write_5m=20:cache_write_1h=10" \
               ":completion_tokens=4:message_deltas=2"
AGENT_MODELS = [
    agent_model("claude-opus-4-8", "fake-anthropic", "fake-normal:" + CLAUDE_USAGE),
    agent_model("claude-endless", "fake-anthropic",
                "fake-stream-endless:prompt_tokens=100:chunks=6:completion_tokens=6"),
    agent_model("claude-close", "fake-anthropic",
                "fake-stream-close:prompt_tokens=100:chunks=6:completion_tokens=6"),
    agent_model("gpt-5.1-codex", "fake",
                "fake-normal:prompt_tokens=100:cached_tokens=2:completion_tokens=4"
                ":reasoning_tokens=3"),
    agent_model("codex-endless", "fake",
                "fake-stream-endless:prompt_tokens=100:chunks=6:completion_tokens=6"),
    agent_model("claude-slow", "fake-anthropic", "fake-normal:delay_ms=150:" + CLAUDE_USAGE),
    agent_model("sdk-anthropic", "fake-anthropic",
                "fake-normal:prompt_tokens=50:cached_tokens=5:completion_tokens=3"
                ":message_deltas=3"),
    agent_model("sdk-responses", "fake",
                "fake-normal:prompt_tokens=50:cached_tokens=1:completion_tokens=3"
                ":reasoning_tokens=2"),
]
# What docs/agents.md tells an operator to set for Codex: every failure
# tried once, so a denial is never retried after its retry-after.
CODEX_BOUNDED = {"stream_max_retries": 0, "request_max_retries": 0}


class AgentsTest(GatewayTest):
    gateway_options = {"templates": AGENT_TEMPLATES, "extra_models": tuple(AGENT_MODELS)}

    def charges(self, c, uncached, output, usd, cache_read=0, cache_write=0, requests=1):
        all_input = uncached + cache_read + cache_write
        return {"req": (0, requests, 0), "tok": (0, all_input + output, 0),
                "in": (0, all_input, 0), "unc": (0, uncached + cache_write, 0),
                "out": (0, output, 0), "conc": (0, 0, 0), "usd": (0, usd, 0)}

    def settled_snapshot(self, c):
        """The caller's limits once nothing is held any more."""
        self.assertTrue(wait_until(lambda: all(v[0] == 0 for v in c.snapshot().values())),
                        c.snapshot())
        return c.snapshot()

    def posts(self, since):
        return [r for r in self.gw.upstream.requests()[since:] if r["method"] == "POST"]

    def denials(self, c):
        """llmlimit_gateway_denials_total of the caller, summed over its models."""
        return self.gw.caller_total("denials", c.name)

    def hold_budget(self, c, capacity_usd_micros):
        """Defines the caller's budget and holds all but 0.01 USD of it (a lease of its own
        that times out in 120 s): the next agent call cannot fit until then."""
        status, _, body = self.gw.server.put_limit({
            "key": c.keys["usd"], "kind": "budget", "capacity": capacity_usd_micros,
            "period": "month", "timeout_seconds": 120, "unit": "usd_micros"})
        self.assertEqual(status, 200, body)
        lease = "hold-" + c.name
        status, _, body = self.gw.server.reserve(lease, {c.keys["usd"]:
                                                         capacity_usd_micros - 10000})
        self.assertEqual((status, body["allowed"]), (200, True), body)
        return lease

    def assert_freed_within(self, c, seconds):
        started = time.monotonic()
        self.assertTrue(wait_until(lambda: c.reserved("conc") == 0, timeout_s=seconds,
                                   interval_s=0.01), "the slot was not freed in %.1f s" % seconds)
        print("  slot freed %.3f s after the agent was killed" % (time.monotonic() - started))


class ClaudeCode(AgentsTest, unittest.TestCase):

    def claude(self, c, env=None, args=(), auth_token=False):
        key = {"auth_token": c.secret} if auth_token else {"api_key": c.secret}
        result = agents.run_claude(self.gw.server.url, PROMPT, env=env, args=args, node=NODE,
                                   **key)
        self.assertIsNotNone(result.code, "claude timed out:\n" + result.stderr[-2000:])
        self.assertIsNotNone(result.json, result.stdout + result.stderr)
        return result

    def test_a_call_is_charged_exactly_on_every_limit(self):
        """Claude Code (HEAD /, then POST /v1/messages?beta=true, max_tokens 64000, cache
        writes) through the gateway: its answer and usage come through, and every limit holds
        the call's usage, each part at its price; the key as x-api-key or as a bearer token."""
        usd = agent_cost(uncached=100, cache_read=30, write_5m=20, write_1h=10, output=4)
        for auth_token in (False, True):
            c = self.gw.caller()
            since = len(self.gw.upstream.requests())
            result = self.claude(c, auth_token=auth_token)
            self.assertEqual(result.code, 0, result.stdout + result.stderr)
            self.assertEqual((result.json["is_error"], result.json["result"]),
                             (False, "alpha bravo charlie delta"))
            self.assertEqual(result.json["usage"]["cache_creation_input_tokens"], 30)
            post, = self.posts(since)
            self.assertEqual((post["path"], post["body"]["max_tokens"], post["end"]),
                             ("/v1/messages?beta=true", 64000, "stream_complete"))
            self.assertEqual((post["headers"]["x-api-key"], post["headers"]["anthropic-version"]),
                             (self.gw.provider_key, "2023-06-01"))
            self.assertIn("claude-code-20250219", post["headers"]["anthropic-beta"])
            self.assertNotIn(c.secret, json.dumps(post["headers"]))
            self.assertEqual(c.snapshot(), self.charges(c, 100, 4, usd, cache_read=30,
                                                        cache_write=30))

    def test_a_budget_denial_ends_claude_code_at_once(self):
        """A budget that cannot take the call until a hold expires (over a minute): one 429
        (rate_limit_error, x-should-retry: false), Claude Code exits 1 reporting 429, no retry,
        nothing forwarded."""
        c = self.gw.caller()
        lease = self.hold_budget(c, 2000000)
        since = len(self.gw.upstream.requests())
        started = time.monotonic()
        result = self.claude(c, env={"CLAUDE_CODE_MAX_RETRIES": "10"})
        print("  claude exited %.1f s after it started" % (time.monotonic() - started))
        self.assertEqual(result.code, 1, result.stdout)
        self.assertEqual((result.json["is_error"], result.json["api_error_status"]), (True, 429))
        self.assertEqual(self.denials(c), 1)
        self.assertEqual(self.posts(since), [])
        self.assertEqual(self.gw.server.release(lease)[0], 200)

    def test_a_missing_limit_ends_claude_code_at_once_naming_it(self):
        """A limit the templates name that does not exist, without a default: one 400
        (x-should-retry: false), nothing forwarded, and Claude Code (its default 10 retries)
        exits 1 within 10 s, its result naming the limit."""
        c = self.gw.caller(skip=("usd",))
        since = len(self.gw.upstream.requests())
        answers = self.gw.route_answers("gateway_messages", 400)
        started = time.monotonic()
        result = self.claude(c)
        elapsed = time.monotonic() - started
        print("  claude exited %.1f s after it started" % elapsed)
        self.assertEqual((result.code, result.json["api_error_status"]), (1, 400), result.stdout)
        self.assertIn("'%s'" % c.keys["usd"], result.json["result"])
        self.assertEqual(self.gw.route_answers("gateway_messages", 400) - answers, 1)
        self.assertEqual(self.posts(since), [])
        self.assertLess(elapsed, 10)

    def test_killing_claude_code_mid_stream_frees_its_slot(self):
        """Claude Code killed while its stream runs (the upstream never ends it): the slot is
        free within a second, and the call is charged message_start's input and the output
        streamed."""
        c = self.gw.caller(conc=1)
        since = len(self.gw.upstream.requests())
        with agents.spawn_claude(self.gw.server.url, PROMPT, c.secret, node=NODE,
                                 args=["--model", "claude-endless"]) as claude:
            self.gw.upstream.wait_for(lambda rs: any(r["content_sent"] == HALF
                                                     for r in rs[since:]), timeout_s=120)
            self.assertEqual(c.reserved("conc"), 1)
            claude.kill()
            self.assert_freed_within(c, FREED_S_MAX)
        output = estimate_text(HALF)
        self.assertEqual(self.settled_snapshot(c),
                         self.charges(c, 100, output, agent_cost(uncached=100, output=output)))

    def test_a_broken_stream_and_its_non_streamed_retry_are_two_calls(self):
        """The upstream cuts the stream: Claude Code asks again without streaming; each call
        has its own lease: the stream charged its input and what was streamed, the retry (its
        answer also cut, a 502) its input estimate and what came of its answer counted as
        text (a cut answer does not parse; it is never read as 0 output)."""
        c = self.gw.caller()
        since = len(self.gw.upstream.requests())
        result = self.claude(c, env={"CLAUDE_CODE_MAX_RETRIES": "0"},
                             args=["--model", "claude-close"])
        self.assertEqual(result.code, 1, result.stdout)
        first, second = self.posts(since)
        self.assertEqual((first["body"]["stream"], first["end"]), (True, "closed"))
        self.assertNotIn("stream", second["body"])
        retry_body = dict(second["body"], model="claude-close")
        retry_input = estimate("messages", retry_body, AGENT_MAX_OUTPUT_TOKENS)[0]
        output = estimate_text(HALF)
        snapshot = self.settled_snapshot(c)
        retry_output = snapshot["out"][1] - output
        self.assertGreater(retry_output, 0)
        usd = (agent_cost(uncached=100, output=output)
               + agent_cost(uncached=retry_input, output=retry_output))
        self.assertEqual(snapshot, self.charges(c, 100 + retry_input, output + retry_output, usd,
                                                requests=2))


class Codex(AgentsTest, unittest.TestCase):

    def codex(self, c, model, provider=None):
        result = agents.run_codex(self.gw.server.url, PROMPT, c.secret, model,
                                  provider=dict(CODEX_BOUNDED, **(provider or {})), node=NODE)
        self.assertIsNotNone(result.code, "codex timed out:\n" + result.stderr[-2000:])
        self.assertIsNotNone(result.json, result.stdout + result.stderr)
        return result

    def test_a_turn_is_charged_exactly_on_every_limit(self):
        """Codex (POST /v1/responses streamed, no max_output_tokens) through the gateway: its
        answer comes through, and every limit holds the usage of response.completed, cached
        input and reasoning at their prices."""
        c = self.gw.caller()
        since = len(self.gw.upstream.requests())
        result = self.codex(c, "gpt-5.1-codex")
        self.assertEqual(result.code, 0, result.stdout + result.stderr)
        self.assertEqual(agents.codex_message(result.json), "alpha bravo charlie delta")
        self.assertEqual(result.json[-1]["usage"]["output_tokens"], 7)
        post, = self.posts(since)
        self.assertEqual((post["path"], post["headers"]["authorization"]),
                         ("/v1/responses", "Bearer " + self.gw.provider_key))
        # Codex sends none: the default reserved goes upstream (docs/gateway.md)
        self.assertEqual(post["body"]["max_output_tokens"], AGENT_DEFAULT_OUTPUT_TOKENS)
        usd = agent_cost(uncached=98, cache_read=2, output=7, reasoning=3)
        self.assertEqual(c.snapshot(), self.charges(c, 98, 7, usd, cache_read=2))

    def test_a_budget_denial_ends_codex_when_its_retries_are_bounded(self):
        """A budget that cannot take the call: Codex ignores x-should-retry, so with
        stream_max_retries and request_max_retries 0 (docs/agents.md) it is denied once, fails
        the turn and exits 1."""
        c = self.gw.caller()
        lease = self.hold_budget(c, 2000000)
        since = len(self.gw.upstream.requests())
        result = self.codex(c, "gpt-5.1-codex")
        self.assertEqual(result.code, 1, result.stdout)
        self.assertEqual(result.json[-1]["type"], "turn.failed")
        self.assertEqual(self.denials(c), 1)
        self.assertEqual(self.posts(since), [])
        self.assertEqual(self.gw.server.release(lease)[0], 200)

    def test_a_missing_limit_ends_codex_at_once_naming_it(self):
        """The same with Codex left at its default retries (5 and 4): one 400, nothing
        forwarded, the turn fails within 10 s with a message naming the limit (a 5xx it would
        send 30 times and report as "high demand")."""
        c = self.gw.caller(skip=("usd",))
        since = len(self.gw.upstream.requests())
        answers = self.gw.route_answers("gateway_responses", 400)
        started = time.monotonic()
        result = agents.run_codex(self.gw.server.url, PROMPT, c.secret, "gpt-5.1-codex",
                                  node=NODE)
        elapsed = time.monotonic() - started
        print("  codex exited %.1f s after it started" % elapsed)
        self.assertIsNotNone(result.json, result.stdout + result.stderr)
        self.assertEqual((result.code, result.json[-1]["type"]), (1, "turn.failed"),
                         result.stdout)
        self.assertIn("'%s'" % c.keys["usd"], result.json[-1]["error"]["message"])
        self.assertEqual(self.gw.route_answers("gateway_responses", 400) - answers, 1)
        self.assertEqual(self.posts(since), [])
        self.assertLess(elapsed, 10)

    def test_killing_codex_mid_stream_frees_its_slot(self):
        """Codex killed while its stream runs: the slot is free within a second, and the call
        is charged its input estimate and the output streamed."""
        c = self.gw.caller(conc=1)
        since = len(self.gw.upstream.requests())
        with agents.spawn_codex(self.gw.server.url, PROMPT, c.secret, "codex-endless",
                                provider=CODEX_BOUNDED, node=NODE) as codex:
            records = self.gw.upstream.wait_for(lambda rs: any(r["content_sent"] == HALF
                                                               for r in rs[since:]),
                                                timeout_s=120)
            self.assertEqual(c.reserved("conc"), 1)
            codex.kill()
            self.assert_freed_within(c, FREED_S_MAX)
        body = dict(self.posts(since)[0]["body"], model="codex-endless")
        self.assertTrue(records)
        input_tokens = estimate("responses", body)[0]
        output = estimate_text(HALF)
        self.assertEqual(self.settled_snapshot(c), self.charges(
            c, input_tokens, output, agent_cost(uncached=input_tokens, output=output)))


def wait_key_fields(index):
    """Keys that may wait a minute when they ask (Prefer: wait); the odd ones also wait
    that long when they do not (default_wait_seconds)."""
    fields = {"max_wait_seconds": 60}
    if index % 2 == 1:
        fields["default_wait_seconds"] = 60
    return fields


class Waiting(AgentsTest, unittest.TestCase):
    """An agent whose concurrency slot is taken waits for it instead of being told 429
    (docs/agents.md, "Waiting instead of a 429", whose settings it takes as written):
    Claude Code asking with ANTHROPIC_CUSTOM_HEADERS, Codex with its provider's
    http_headers, and Claude Code
    asking nothing on a key with default_wait_seconds. Each call queues, is not forwarded
    while the slot is held, goes through once it is released, with no 429 and no retry,
    and is charged exactly; three Claude Codes on one slot take turns; one killed while
    it waits leaves the queue, holding nothing."""

    gateway_options = dict(AgentsTest.gateway_options, key_fields=wait_key_fields)

    @staticmethod
    def page_settings():
        """What docs/agents.md tells each agent to send, as written there."""
        section = docs_page().split("## 7. Waiting instead of a 429")[1].split("\n## ")[0]
        claude = re.search(r'^export ANTHROPIC_CUSTOM_HEADERS="([^"]+)"$', section, re.M)
        codex = re.search(r'^http_headers = \{ "([^"]+)" = "([^"]+)" \}$', section, re.M)
        return claude.group(1), {codex.group(1): codex.group(2)}

    def caller_waiting(self, by_default):
        """A fresh key (wait_key_fields: odd index, default wait) with a 1-slot
        concurrency limit."""
        for i, (secret, name, team) in enumerate(self.gw.free_keys):
            if (int(name[1:].split("-")[0]) % 2 == 1) == by_default:
                del self.gw.free_keys[i]
                return Caller(self.gw, secret, name, team).define(conc=1)
        raise AssertionError("no free key left")

    def hold_slot(self, c):
        """Takes c's only slot with a lease of the test's own; its id."""
        lease = "hold-" + c.name
        status, _, body = self.gw.server.reserve(lease, {c.keys["conc"]: 1})
        self.assertEqual((status, body["allowed"]), (200, True), body)
        return lease

    def through_a_held_slot(self, c, run):
        """Holds c's only slot, runs the agent (run) in the background until its call
        waits, checks it was not forwarded, frees the slot; the agent's result."""
        lease = self.hold_slot(c)
        since = len(self.gw.upstream.requests())
        with concurrent.futures.ThreadPoolExecutor(1) as pool:
            agent = pool.submit(run)
            try:
                wait_until(lambda: self.gw.waiting() == 1 or agent.done(), timeout_s=120)
                self.assertEqual(self.gw.waiting(), 1, "the agent's call did not wait")
                time.sleep(0.5)  # a call that would not wait would be answered meanwhile
                self.assertEqual(self.gw.waiting(), 1)
                self.assertEqual(self.posts(since), [])
            finally:
                self.assertEqual(self.gw.server.release(lease)[0], 200)
            result = agent.result(timeout=300)
        self.assertEqual(self.denials(c), 0)
        self.assertEqual(self.gw.caller_total("waited_calls", c.name), 1)
        self.assertGreater(self.gw.caller_total("waited_ms", c.name), 0)
        self.assertEqual(len(self.posts(since)), 1)
        return result

    def claude_charges(self, c, calls=1):
        """What `calls` Claude Code calls on claude-opus-4-8 or claude-slow are charged."""
        usd = agent_cost(uncached=100, cache_read=30, write_5m=20, write_1h=10, output=4)
        return self.charges(c, 100 * calls, 4 * calls, usd * calls, cache_read=30 * calls,
                            cache_write=30 * calls, requests=calls)

    def claude_waits_for_a_held_slot(self, by_default, env):
        """Claude Code (with env) through a held slot: it answers, charged exactly."""
        c = self.caller_waiting(by_default=by_default)
        result = self.through_a_held_slot(c, lambda: agents.run_claude(
            self.gw.server.url, PROMPT, api_key=c.secret, node=NODE,
            env=dict(env, CLAUDE_CODE_MAX_RETRIES="0")))
        self.assertEqual(result.code, 0, result.stdout + result.stderr)
        self.assertEqual(result.json["result"], "alpha bravo charlie delta")
        self.assertEqual(self.settled_snapshot(c), self.claude_charges(c))

    def test_claude_code_asking_to_wait_waits_for_the_slot(self):
        self.claude_waits_for_a_held_slot(
            False, {"ANTHROPIC_CUSTOM_HEADERS": self.page_settings()[0]})

    def test_claude_code_on_a_key_that_waits_by_default(self):
        self.claude_waits_for_a_held_slot(True, {})

    def test_codex_asking_to_wait_waits_for_the_slot(self):
        c = self.caller_waiting(by_default=False)
        result = self.through_a_held_slot(c, lambda: agents.run_codex(
            self.gw.server.url, PROMPT, c.secret, "gpt-5.1-codex", node=NODE,
            provider=dict(CODEX_BOUNDED, http_headers=self.page_settings()[1])))
        self.assertEqual(result.code, 0, result.stdout + result.stderr)
        self.assertEqual(agents.codex_message(result.json), "alpha bravo charlie delta")
        usd = agent_cost(uncached=98, cache_read=2, output=7, reasoning=3)
        self.assertEqual(self.settled_snapshot(c), self.charges(c, 98, 7, usd, cache_read=2))

    def test_claude_codes_sharing_one_slot_take_turns(self):
        """Three Claude Codes at once on a key with one slot that waits by default: all three
        answer, one call upstream at a time, no 429, each charged exactly."""
        c = self.caller_waiting(by_default=True)
        since = len(self.gw.upstream.requests())
        with concurrent.futures.ThreadPoolExecutor(3) as pool:
            runs = [pool.submit(agents.run_claude, self.gw.server.url, PROMPT,
                                api_key=c.secret, node=NODE, args=["--model", "claude-slow"],
                                env={"CLAUDE_CODE_MAX_RETRIES": "0"}) for _ in range(3)]
            results = [run.result(timeout=300) for run in runs]
        for result in results:
            self.assertEqual((result.code, result.json["result"]),
                             (0, "alpha bravo charlie delta"), result.stdout + result.stderr)
        posts = self.posts(since)
        self.assertEqual(len(posts), 3)
        spans = sorted((p["received_unix_ms"], p["ended_unix_ms"]) for p in posts)
        for started, ended in spans:
            self.assertGreaterEqual(ended - started, 300, spans)  # each call takes a while
        for (_, ended), (started, _) in zip(spans, spans[1:]):
            # The next once the last ended (the fake stamps a call's end on its own
            # thread, after its last write: a few ms of slack, never a whole call).
            self.assertGreaterEqual(started, ended - SLACK_MS, spans)
        self.assertEqual(self.denials(c), 0)
        self.assertEqual(self.settled_snapshot(c), self.claude_charges(c, calls=3))

    def test_claude_code_killed_while_waiting_leaves_the_queue(self):
        """Claude Code killed while its call waits: the call leaves the queue, is never
        forwarded and holds nothing."""
        c = self.caller_waiting(by_default=True)
        lease = self.hold_slot(c)
        since = len(self.gw.upstream.requests())
        with agents.spawn_claude(self.gw.server.url, PROMPT, c.secret, node=NODE) as claude:
            self.assertTrue(wait_until(lambda: self.gw.waiting() == 1, timeout_s=120),
                            "the call did not wait")
            claude.kill()
            self.assertTrue(wait_until(lambda: self.gw.waiting() == 0, timeout_s=FREED_S_MAX,
                                       interval_s=0.01), "the call still waits")
        self.assertEqual(self.gw.server.release(lease)[0], 200)
        self.assertEqual(self.posts(since), [])
        self.assertEqual(self.settled_snapshot(c), self.charges(c, 0, 0, 0, requests=0))

    def test_without_a_wait_the_held_slot_is_a_429(self):
        """The same held slot on a key that may wait but does not by default, the agent
        asking nothing: one 429, nothing forwarded (what the tests above avoid)."""
        c = self.caller_waiting(by_default=False)
        lease = self.hold_slot(c)
        since = len(self.gw.upstream.requests())
        result = agents.run_claude(self.gw.server.url, PROMPT, api_key=c.secret, node=NODE,
                                   env={"CLAUDE_CODE_MAX_RETRIES": "0"})
        self.assertEqual((result.code, result.json["api_error_status"]), (1, 429),
                         result.stdout)
        self.assertEqual(self.denials(c), 1)
        self.assertEqual(self.posts(since), [])
        self.assertEqual(self.gw.server.release(lease)[0], 200)


def docs_page():
    with open(os.path.join(HERE, "..", "..", "docs", "agents.md"), encoding="utf-8") as page:
        return page.read()


class DocsSettings(AgentsTest, unittest.TestCase):
    """docs/agents.md's settings for each agent, taken from the page as written."""

    def test_the_pages_settings_end_each_agent_after_one_far_denial(self):
        """Claude Code with the page's environment and Codex with the page's config.toml
        (its URL pointed at this gateway): a spent budget ends each after one 429."""
        page = docs_page()
        exports = dict(re.findall(r"^export (\w+)=(\S+)$", page.split("## 5. Claude Code")[1]
                                  .split("## 6.")[0], re.M))
        self.assertEqual(set(exports), {"ANTHROPIC_BASE_URL", "ANTHROPIC_API_KEY",
                                        "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC"})
        toml = re.search(r"<<'TOML'\n(.*?)\nTOML\n", page, re.S).group(1) + "\n"
        key_variable = re.search(r'^env_key = "(\w+)"$', toml, re.M).group(1)
        base = "http://localhost:8470"
        self.assertIn(base, exports["ANTHROPIC_BASE_URL"] + toml)
        c = self.gw.caller()
        lease = self.hold_budget(c, 2000000)
        env = {name: value.replace(base, self.gw.server.url).replace("$CLAUDE_KEY", c.secret)
               for name, value in exports.items()}
        result = agents.run_claude(self.gw.server.url, PROMPT, env=env, node=NODE)
        self.assertEqual((result.code, result.json["api_error_status"]), (1, 429), result.stdout)
        self.assertEqual(self.denials(c), 1)
        result = agents.run_codex(self.gw.server.url, PROMPT, c.secret, None, node=NODE,
                                  config_text=toml.replace(base, self.gw.server.url),
                                  key_variable=key_variable)
        self.assertEqual((result.code, result.json[-1]["type"]), (1, "turn.failed"),
                         result.stdout)
        self.assertEqual(self.denials(c), 2)
        self.assertEqual(self.gw.server.release(lease)[0], 200)


class Sdks(AgentsTest, unittest.TestCase):

    def sdk(self, c, calls, model, **options):
        result = agents.run_sdk(NODE, self.gw.server.url, c.secret, calls, model, **options)
        self.assertIsNotNone(result.json, result.stdout + result.stderr)
        return result

    def test_anthropic_sdk_create_and_stream_are_charged_exactly(self):
        """@anthropic-ai/sdk (bearer key, anthropic-version 2026-10-21, passed on):
        messages.create and messages.stream each charged their usage."""
        c = self.gw.caller()
        since = len(self.gw.upstream.requests())
        result = self.sdk(c, ["anthropic", "anthropic_stream"], "sdk-anthropic")
        self.assertEqual(result.code, 0, result.stdout + result.stderr)
        for call in ("anthropic", "anthropic_stream"):
            self.assertEqual(result.json[call]["usage"]["output_tokens"], 3, call)
        self.assertIn("anthropic-ratelimit-requests-limit", result.json["anthropic"]["headers"])
        for post in self.posts(since):
            self.assertEqual(post["headers"]["anthropic-version"], "2026-10-21")
        usd = 2 * agent_cost(uncached=50, cache_read=5, output=3)
        self.assertEqual(c.snapshot(), self.charges(c, 100, 6, usd, cache_read=10, requests=2))

    def test_openai_responses_create_and_stream_are_charged_exactly(self):
        """openai's responses.create, streamed and not, each charged its usage (cached input
        and reasoning at their prices)."""
        c = self.gw.caller()
        result = self.sdk(c, ["responses", "responses_stream"], "sdk-responses")
        self.assertEqual(result.code, 0, result.stdout + result.stderr)
        for call in ("responses", "responses_stream"):
            self.assertEqual((result.json[call]["status"], result.json[call]["usage"]
                              ["output_tokens"]), ("completed", 5), call)
        usd = 2 * agent_cost(uncached=49, cache_read=1, output=5, reasoning=2)
        self.assertEqual(c.snapshot(), self.charges(c, 98, 10, usd, cache_read=2, requests=2))

    def test_both_sdks_take_a_far_denial_once(self):
        """With maxRetries 2, a budget denial a minute or more away reaches each SDK once
        (x-should-retry: false) as a RateLimitError, where it would otherwise be sent three
        times."""
        c = self.gw.caller()
        lease = self.hold_budget(c, 2000000)
        for call, model in (("anthropic", "sdk-anthropic"), ("responses", "sdk-responses")):
            result = self.sdk(c, [call], model, max_retries=2, max_tokens=64000)
            self.assertEqual(result.code, 1)
            answer = result.json[call]
            self.assertEqual((answer["status"], answer["type"]), (429, "RateLimitError"), call)
            self.assertEqual(answer["headers"]["x-should-retry"], "false", call)
            self.assertGreater(int(answer["headers"]["retry-after"]), 60, call)
        self.assertEqual(self.denials(c), 2)
        self.assertEqual(self.gw.server.release(lease)[0], 200)


if __name__ == "__main__":
    skip_unless_backend()
    agents.skip_unless_installed(NODE)
    unittest.main(verbosity=2)

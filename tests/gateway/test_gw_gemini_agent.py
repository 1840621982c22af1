"""The real Gemini CLI (@google/gemini-cli) and the official @google/genai SDK
through the gateway (docs/agents.md, "Gemini CLI"), against the fake Gemini
upstream: a CLI call is charged exactly on every limit, with the provider key
upstream and the virtual key never; a killed CLI frees its concurrency slot at
once; a monthly budget that is spent stops the CLI after one request (the
RetryInfo of the 429 is days away) with a message naming the budget; the
SDK's generateContent and generateContentStream are charged exactly.

Backend from --backend (memory, sqlite, tigerbeetle). Exits 77 (skipped)
when node or a package (npm ci --prefix tests/gateway/gemini) is missing."""

import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import agents  # noqa: E402
from gw_harness import (AGENT_TEMPLATES, GatewayTest, agent_cost, agent_model,  # noqa: E402
                        estimate_text, skip_unless_backend, wait_until)
from gw_harness import tearDownModule  # noqa: E402,F401 - unittest calls it

NODE = agents.node_from_argv()
GEMINI_DIR = os.path.join(HERE, "gemini")
MODULES = os.path.join(GEMINI_DIR, "node_modules")
GEMINI = os.path.join(MODULES, ".bin", "gemini")
SDK_SCRIPT = os.path.join(GEMINI_DIR, "genai_sdk.mjs")
PACKAGES = ("@google/gemini-cli", "@google/genai")
PROMPT = "say hi"
TIMEOUT_S = 180
FREED_S_MAX = 1.0  # a killed CLI's slot is free by then (the gateway sees its socket close)
HALF = "alpha bravo charlie"  # what a cut stream of 6 words sends before it stops
# The Gemini CLI's settings for an API key (docs/agents.md).
SETTINGS = {"security": {"auth": {"selectedType": "gemini-api-key"}}}

MODELS = [
    agent_model("gemini-counted", "fake-gemini",
                "fake-normal.prompt_tokens-1001.completion_tokens-4.reasoning_tokens-2"),
    agent_model("gemini-hang", "fake-gemini",
                "fake-stream-hang.prompt_tokens-1001.chunks-6.completion_tokens-6"),
    # what spends a 0.1 USD budget to 10 usd_micros of its end: 33330 input at 3 USD/Mtok
    agent_model("gemini-spend", "fake-gemini",
                "fake-normal.prompt_tokens-33330.completion_tokens-0"),
    agent_model("gemini-sdk", "fake-gemini", "fake-normal.prompt_tokens-50.cached_tokens-5"
                ".completion_tokens-3.reasoning_tokens-2"),
]


def missing_prerequisite():
    if not NODE or not os.access(NODE, os.X_OK):
        return "node not found"
    for package in PACKAGES:
        if not os.path.isdir(os.path.join(MODULES, package)):
            return "%s is not installed (npm ci --prefix tests/gateway/gemini)" % package
    return None


def cli_home():
    """A temporary HOME holding the CLI's settings: the caller removes it."""
    home = tempfile.mkdtemp(prefix="gemini-home-")
    os.makedirs(os.path.join(home, ".gemini"))
    with open(os.path.join(home, ".gemini", "settings.json"), "w", encoding="utf-8") as f:
        json.dump(SETTINGS, f)
    return home


def cli_env(home, base_url, key):
    """GOOGLE_GEMINI_BASE_URL without /v1beta: the CLI's SDK adds it."""
    return agents.clean_env(home, NODE, {"GOOGLE_GEMINI_BASE_URL": base_url,
                                         "GEMINI_API_KEY": key,
                                         "GEMINI_CLI_TRUST_WORKSPACE": "true"})


def cli_argv(model):
    return [GEMINI, "-p", PROMPT, "-m", model, "--output-format", "json"]


def run_cli(base_url, key, model):
    home = cli_home()
    try:
        result = agents.run_group(cli_argv(model), cli_env(home, base_url, key), home,
                                  TIMEOUT_S)
    finally:
        shutil.rmtree(home, ignore_errors=True)
    return result._replace(json=agents.parse_json(result.stdout))


class GeminiAgentTest(GatewayTest):
    gateway_options = {"templates": AGENT_TEMPLATES, "extra_models": tuple(MODELS)}

    def charges(self, uncached, output, usd, cache_read=0, requests=1):
        all_input = uncached + cache_read
        return {"req": (0, requests, 0), "tok": (0, all_input + output, 0),
                "in": (0, all_input, 0), "unc": (0, uncached, 0), "out": (0, output, 0),
                "conc": (0, 0, 0), "usd": (0, usd, 0)}

    def posts(self, since):
        return [r for r in self.gw.upstream.requests()[since:] if r["method"] == "POST"]


class GeminiCli(GeminiAgentTest, unittest.TestCase):

    def test_a_cli_call_is_charged_exactly_on_every_limit(self):
        """gemini -p through the gateway: one streamGenerateContent?alt=sse upstream with the
        provider key as x-goog-api-key (the virtual key nowhere), the answer comes back, and
        every limit holds the call's usageMetadata, thoughts at the reasoning price."""
        c = self.gw.caller()
        since = len(self.gw.upstream.requests())
        result = run_cli(self.gw.server.url, c.secret, "gemini-counted")
        self.assertEqual(result.code, 0, result.stdout + result.stderr)
        self.assertEqual(result.json["response"], "alpha bravo charlie delta")
        post, = self.posts(since)
        self.assertEqual(post["path"], "/v1beta/models/fake-normal.prompt_tokens-1001"
                         ".completion_tokens-4.reasoning_tokens-2:streamGenerateContent?alt=sse")
        self.assertEqual(post["headers"]["x-goog-api-key"], self.gw.provider_key)
        self.assertNotIn(c.secret, json.dumps(post))
        usd = agent_cost(uncached=1001, output=6, reasoning=2)
        self.assertEqual(c.snapshot(), self.charges(1001, 6, usd))

    def test_killing_the_cli_mid_stream_frees_its_slot(self):
        """The CLI killed while its stream runs (the upstream never ends it): the slot is free
        within a second; the call is charged the input its chunks told and what was
        streamed."""
        c = self.gw.caller(conc=1)
        since = len(self.gw.upstream.requests())
        home = cli_home()
        with agents.Spawned(cli_argv("gemini-hang"), cli_env(home, self.gw.server.url,
                                                             c.secret), home, [home]) as cli:
            self.gw.upstream.wait_for(lambda rs: any(r["content_sent"] == HALF
                                                     for r in rs[since:]), timeout_s=120)
            self.assertEqual(c.reserved("conc"), 1)
            started = time.monotonic()
            cli.kill()
            self.assertTrue(wait_until(lambda: c.reserved("conc") == 0, timeout_s=FREED_S_MAX,
                                       interval_s=0.01), "the slot was not freed")
            print("  slot freed %.3f s after the CLI was killed" % (time.monotonic() - started))
        self.assertTrue(wait_until(lambda: c.reserved("usd") == 0))
        output = max(3, estimate_text(HALF))
        self.assertEqual(c.snapshot(), self.charges(1001, output,
                                                    agent_cost(uncached=1001, output=output)))

    def test_a_spent_monthly_budget_stops_the_cli_after_one_request(self):
        """The team's monthly budget is spent (a call used all but 10 usd_micros of it): the
        CLI's call is denied once (429 with a RetryInfo days away), the CLI does not retry,
        exits with an error naming the budget, and nothing reaches the upstream."""
        c = self.gw.caller()
        capacity = 100000
        status, _, body = self.gw.server.put_limit({
            "key": c.keys["usd"], "kind": "budget", "capacity": capacity, "period": "month",
            "timeout_seconds": 120, "unit": "usd_micros"})
        self.assertEqual(status, 200, body)
        status, _, body = self.gw.call(
            None, "/v1beta/models/gemini-spend:generateContent",
            {"contents": [{"parts": [{"text": "hi"}]}], "generationConfig": {"maxOutputTokens": 1}},
            headers={"x-goog-api-key": c.secret})
        self.assertEqual(status, 200, body)
        self.assertEqual(c.used("usd"), capacity - 10)
        denied = self.gw.route_answers("gateway_gemini", 429)
        since = len(self.gw.upstream.requests())
        started = time.monotonic()
        result = run_cli(self.gw.server.url, c.secret, "gemini-counted")
        print("  the CLI exited %.1f s after it started" % (time.monotonic() - started))
        self.assertNotEqual(result.code, 0, result.stdout + result.stderr)
        self.assertIn(c.keys["usd"], result.stdout + result.stderr)
        self.assertEqual(self.gw.route_answers("gateway_gemini", 429) - denied, 1)
        self.assertEqual(self.posts(since), [])


class GenaiSdk(GeminiAgentTest, unittest.TestCase):

    def sdk(self, c, model, *calls):
        done = subprocess.run([NODE, SDK_SCRIPT, self.gw.server.url, c.secret, model]
                              + list(calls), capture_output=True, text=True, timeout=TIMEOUT_S,
                              cwd=GEMINI_DIR)
        self.assertEqual(done.returncode, 0, done.stdout + done.stderr)
        return json.loads(done.stdout)

    def test_generate_content_and_its_stream_are_charged_exactly(self):
        """models.generateContent and models.generateContentStream (httpOptions.baseUrl the
        gateway): each answer and its usageMetadata come through, and the two calls are
        charged exactly (each rounded up once), cached input and thoughts at their prices."""
        c = self.gw.caller()
        since = len(self.gw.upstream.requests())
        results = self.sdk(c, "gemini-sdk", "generate", "stream")
        for call in ("generate", "stream"):
            self.assertEqual(results[call].get("text"), "alpha bravo charlie", results)
            self.assertEqual(results[call]["usage"]["thoughtsTokenCount"], 2, results)
        paths = [r["path"].rsplit(":", 1)[1] for r in self.posts(since)]
        self.assertEqual(paths, ["generateContent", "streamGenerateContent?alt=sse"])
        one = agent_cost(uncached=45, cache_read=5, output=5, reasoning=2)
        self.assertEqual(c.snapshot(), self.charges(90, 10, 2 * one, cache_read=10, requests=2))


if __name__ == "__main__":
    skip_unless_backend()
    reason = missing_prerequisite()
    if reason:
        print("SKIPPED: " + reason)
        sys.exit(agents.SKIP)
    unittest.main()

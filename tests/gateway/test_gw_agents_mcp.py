"""Claude Code and Codex themselves (tests/gateway/node) calling an MCP tool
through the gateway (docs/mcp.md): their model calls on /v1/messages or
/v1/responses (the fake upstream answers a call of the MCP web_search tool,
then text) and their MCP session on /mcp/{server} (a fake server of the
official @modelcontextprotocol/sdk): the tool runs, the agent finishes, and
the team's one budget holds exactly both model calls and the tool's price;
with the budget spent the tool call is refused, nothing reaches the MCP
server, and the agent reports it; a killed Claude Code frees its slot at
once.

Backend from --backend. Exits 77 (skipped) when node, the agents or the
MCP SDK is missing."""

import json
import os
import sys
import time
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import agents  # noqa: E402
import fake_common  # noqa: E402
from gw_harness import (AGENT_TEMPLATES, SKIP, Gateway, agent_cost, agent_model,  # noqa: E402
                        skip_unless_backend, wait_until)
from mcp_fake import SERVER_SECRET, FakeMcp, missing, wait_for  # noqa: E402

NODE = agents.node_from_argv()
MCP_KEY_ENV = "GW_TEST_MCP_SERVER_KEY"
PROMPT = "search the web for llmlimit"
MODEL = "claude-mcp"
CODEX_MODEL = "codex-mcp"
# What docs/agents.md tells an operator to set for Codex: every failure tried once.
CODEX_BOUNDED = {"stream_max_retries": 0, "request_max_retries": 0}
# The variable docs/mcp.md's Codex config reads the MCP server's bearer token from.
MCP_TOKEN_VARIABLE = "LLMLIMIT_KEY"
WEB_SEARCH_PRICE = 5000
PRICEY = 2000000  # web_search on "pricey": 2 USD a call
TOOL = "mcp__%s__web_search"
FREED_S_MAX = 1.0
# Each model call of the agent: 100 input tokens, 4 words of text; the first
# also a tool_use block (fake_common.TOOL_CALL_TOKENS of output).
FIRST_CALL = agent_cost(uncached=100, output=4 + fake_common.TOOL_CALL_TOKENS)
SECOND_CALL = agent_cost(uncached=100, output=4)


def setUpModule():  # noqa: N802
    global GW, FAKE, FAKE_SLOW
    skip_unless_backend()
    agents.skip_unless_installed(NODE)
    reason = missing(NODE)
    if reason:
        print("SKIPPED: " + reason)
        sys.exit(SKIP)
    FAKE = FakeMcp(NODE)
    FAKE_SLOW = FakeMcp(NODE, slow_ms=120000)
    model = agent_model(MODEL, "fake-anthropic",
                        "fake-normal:prompt_tokens=100:completion_tokens=4:mcp_tool=1")
    codex_model = agent_model(CODEX_MODEL, "fake",
                              "fake-normal:prompt_tokens=100:completion_tokens=4:mcp_tool=1")
    GW = Gateway(templates=AGENT_TEMPLATES, extra_models=(model, codex_model),
                 env={MCP_KEY_ENV: SERVER_SECRET})
    tools = lambda price: [{"name": "web_search", "usd_micros_per_call": price}]  # noqa: E731
    GW.config["mcp_servers"] = [
        {"name": "search", "url": FAKE.url, "api_key_env": MCP_KEY_ENV,
         "tools": tools(WEB_SEARCH_PRICE)},
        {"name": "pricey", "url": FAKE.url, "api_key_env": MCP_KEY_ENV, "tools": tools(PRICEY)},
        {"name": "slowsearch", "url": FAKE_SLOW.url, "api_key_env": MCP_KEY_ENV,
         "tools": tools(WEB_SEARCH_PRICE)}]
    GW.write_config(GW.config)
    GW.server.start()
    assert wait_until(lambda: GW.server.request("GET", "/readyz")[0] == 200, 30)


def tearDownModule():  # noqa: N802
    code = GW.stop()
    FAKE.stop()
    FAKE_SLOW.stop()
    assert code == 0, "llmlimitd exit code %r:\n%s" % (code, GW.server.stderr_text())


def mcp_args(server, secret):
    config = {"mcpServers": {server: {
        "type": "http", "url": "%s/mcp/%s" % (GW.server.url, server),
        "headers": {"Authorization": "Bearer " + secret}}}}
    return ["--model", MODEL, "--mcp-config", json.dumps(config),
            "--allowedTools", TOOL % server]


SPENT = 8500000  # of a 10 USD budget: room for the model calls, not for the tool's 2 USD


def caller_with_budget_spent(test):
    """A caller whose 10 USD budget has SPENT of it spent."""
    c = GW.caller(usd=10 ** 7)
    lease = "spent-" + c.name
    test.assertEqual(GW.server.reserve(lease, {c.keys["usd"]: SPENT})[0], 200)
    test.assertEqual(GW.server.complete(lease)[0], 200)
    return c


def posts(since):
    return [r for r in GW.upstream.requests()[since:] if r["method"] == "POST"]


def tool_results(body):
    """The tool_result blocks of a Messages request's last message."""
    content = body["messages"][-1]["content"]
    return [b for b in content if isinstance(b, dict) and b.get("type") == "tool_result"] \
        if isinstance(content, list) else []


def result_text(block):
    content = block.get("content")
    if isinstance(content, list):
        return " ".join(part.get("text", "") for part in content if isinstance(part, dict))
    return str(content)


class ClaudeCodeTools(unittest.TestCase):

    def claude(self, c, server):
        result = agents.run_claude(GW.server.url, PROMPT, api_key=c.secret, node=NODE,
                                   args=mcp_args(server, c.secret))
        self.assertIsNotNone(result.code, "claude timed out:\n" + result.stderr[-2000:])
        self.assertIsNotNone(result.json, result.stdout + result.stderr)
        return result

    def test_the_tool_runs_and_the_team_budget_holds_models_and_tool(self):
        """Claude Code's MCP session goes through (initialize, tools/list, tools/call with the
        server's credential), the tool's result reaches the model, the agent finishes, and the
        one budget holds the two model calls and the tool's price, exactly."""
        c = GW.caller()
        since, seen = len(GW.upstream.requests()), len(FAKE.requests())
        result = self.claude(c, "search")
        self.assertEqual(result.code, 0, result.stdout + result.stderr)
        self.assertEqual((result.json["is_error"], result.json["result"]),
                         (False, "alpha bravo charlie delta"))
        requests = FAKE.requests()[seen:]
        rpcs = [e["rpc"] for e in requests if e["rpc"]]
        print("  the MCP server saw: %s" % ", ".join(
            "%s %s" % (e["http"], e["rpc"] or "") for e in requests))
        self.assertEqual(rpcs[:2], ["initialize", "notifications/initialized"])
        self.assertIn("tools/list", rpcs)
        calls = [e for e in requests if e["rpc"] == "tools/call"]
        self.assertEqual([e["tool"] for e in calls], ["web_search"])
        for entry in requests:
            self.assertEqual(entry["authorization"], "Bearer " + SERVER_SECRET)
        first, second = posts(since)
        self.assertEqual(tool_results(first["body"]), [])
        result_block, = tool_results(second["body"])
        self.assertIn("results for alpha: llmlimit.example", result_text(result_block))
        self.assertTrue(wait_until(lambda: c.reserved("usd") == 0 and c.reserved("conc") == 0))
        self.assertEqual(c.used("usd"), FIRST_CALL + SECOND_CALL + WEB_SEARCH_PRICE)
        self.assertEqual(c.used("req"), 3)  # two model calls, one tool call

    def test_a_spent_budget_refuses_the_tool_and_claude_code_reports_it(self):
        """The budget takes the model calls (each reserves 64000 output tokens) but not the
        tool's 2 USD: the tools/call is refused with the limit named, nothing reaches the
        MCP server, the model gets the refusal as the tool's error and the agent finishes;
        the budget holds the model calls only."""
        c = caller_with_budget_spent(self)
        since, seen = len(GW.upstream.requests()), len(FAKE.requests())
        result = self.claude(c, "pricey")
        self.assertEqual(result.code, 0, result.stdout + result.stderr)
        self.assertEqual(result.json["result"], "alpha bravo charlie delta")
        self.assertEqual([e for e in FAKE.requests()[seen:] if e["rpc"] == "tools/call"], [])
        first, second = posts(since)
        refusal, = tool_results(second["body"])
        print("  the model was told: %s" % result_text(refusal)[:300])
        self.assertTrue(refusal.get("is_error"), refusal)
        self.assertIn("usd:" + c.team, result_text(refusal))
        self.assertIn("Limit reached", result_text(refusal))
        self.assertTrue(wait_until(lambda: c.reserved("usd") == 0))
        self.assertEqual(c.used("usd"), SPENT + FIRST_CALL + SECOND_CALL)

    def test_a_killed_agent_frees_its_slot(self):
        """Claude Code killed while its tool call runs (the server takes minutes): the call's
        concurrency slot and its price are free within a second, nothing charged for it, and
        the MCP server is told the call was cancelled."""
        c = GW.caller(conc=1)
        with agents.spawn_claude(GW.server.url, PROMPT, c.secret, node=NODE,
                                 args=mcp_args("slowsearch", c.secret)) as claude:
            self.assertTrue(wait_for(lambda: any(e.get("tool_ran") == "web_search"
                                                 for e in FAKE_SLOW.log()), timeout_s=120))
            self.assertEqual(c.reserved("conc"), 1)
            self.assertEqual(c.reserved("usd"), WEB_SEARCH_PRICE)
            started = time.monotonic()
            claude.kill()
            self.assertTrue(wait_until(lambda: c.reserved("conc") == 0, timeout_s=FREED_S_MAX,
                                       interval_s=0.01), "the slot was not freed in time")
            print("  slot freed %.3f s after the agent was killed" % (time.monotonic() - started))
        self.assertEqual(c.reserved("usd"), 0)
        self.assertEqual(c.used("usd"), FIRST_CALL)
        self.assertTrue(wait_for(lambda: any(e.get("rpc") == "notifications/cancelled"
                                             for e in FAKE_SLOW.requests())))


def codex_config(server):
    """docs/mcp.md's Codex config: the gateway's route for the server, the
    virtual key from MCP_TOKEN_VARIABLE; and the model on the same gateway."""
    return agents.codex_config(GW.server.url, CODEX_MODEL, CODEX_BOUNDED) + (
        "\n[mcp_servers.%s]\nurl = \"%s/mcp/%s\"\nbearer_token_env_var = \"%s\"\n"
        "default_tools_approval_mode = \"approve\"\n"
        % (server, GW.server.url, server, MCP_TOKEN_VARIABLE))


def function_outputs(body):
    """The function_call_output items of a Responses request's input."""
    items = body.get("input")
    return [i for i in items if isinstance(i, dict) and i.get("type") == "function_call_output"] \
        if isinstance(items, list) else []


class CodexTools(unittest.TestCase):

    def codex(self, c, server):
        result = agents.run_codex(GW.server.url, PROMPT, c.secret, CODEX_MODEL, node=NODE,
                                  config_text=codex_config(server),
                                  env={MCP_TOKEN_VARIABLE: c.secret})
        self.assertIsNotNone(result.code, "codex timed out:\n" + result.stderr[-2000:])
        self.assertIsNotNone(result.json, result.stdout + result.stderr)
        return result

    def test_the_tool_runs_and_the_team_budget_holds_models_and_tool(self):
        """Codex's MCP session goes through with the server's credential, the tool's
        result reaches the model, the turn ends, and the one budget holds the two model
        calls and the tool's price, exactly."""
        c = GW.caller()
        since, seen = len(GW.upstream.requests()), len(FAKE.requests())
        result = self.codex(c, "search")
        self.assertEqual(result.code, 0, result.stdout + result.stderr)
        self.assertEqual(agents.codex_message(result.json), "alpha bravo charlie delta")
        requests = FAKE.requests()[seen:]
        print("  the MCP server saw: %s" % ", ".join(
            "%s %s" % (e["http"], e["rpc"] or "") for e in requests))
        rpcs = [e["rpc"] for e in requests if e["rpc"]]
        self.assertEqual(rpcs[:2], ["initialize", "notifications/initialized"])
        self.assertIn("tools/list", rpcs)
        self.assertEqual([e["tool"] for e in requests if e["rpc"] == "tools/call"],
                         ["web_search"])
        for entry in requests:
            self.assertEqual(entry["authorization"], "Bearer " + SERVER_SECRET)
        first, second = posts(since)
        self.assertEqual(function_outputs(first["body"]), [])
        output, = function_outputs(second["body"])
        self.assertIn("results for alpha: llmlimit.example", json.dumps(output["output"]))
        self.assertTrue(wait_until(lambda: c.reserved("usd") == 0 and c.reserved("conc") == 0))
        self.assertEqual(c.used("usd"), FIRST_CALL + SECOND_CALL + WEB_SEARCH_PRICE)
        self.assertEqual(c.used("req"), 3)  # two model calls, one tool call

    def test_a_spent_budget_refuses_the_tool_and_codex_reports_it(self):
        """The budget takes the model calls but not the tool's 2 USD: the tools/call is
        refused with the limit named, nothing reaches the MCP server, the model gets the
        refusal as the call's output and the turn ends; the budget holds the model calls."""
        c = caller_with_budget_spent(self)
        since, seen = len(GW.upstream.requests()), len(FAKE.requests())
        result = self.codex(c, "pricey")
        self.assertEqual(result.code, 0, result.stdout + result.stderr)
        self.assertEqual(agents.codex_message(result.json), "alpha bravo charlie delta")
        self.assertEqual([e for e in FAKE.requests()[seen:] if e["rpc"] == "tools/call"], [])
        first, second = posts(since)
        refusal, = function_outputs(second["body"])
        text = json.dumps(refusal["output"])
        print("  the model was told: %s" % text[:300])
        self.assertIn("usd:" + c.team, text)
        self.assertIn("Limit reached", text)
        self.assertTrue(wait_until(lambda: c.reserved("usd") == 0))
        self.assertEqual(c.used("usd"), SPENT + FIRST_CALL + SECOND_CALL)


if __name__ == "__main__":
    unittest.main(verbosity=2)

"""Budgets on MCP tool calls (docs/mcp.md), against the real llmlimitd in
front of a fake MCP server built with the official @modelcontextprotocol/sdk
(tests/gateway/mcp): everything passes through with the server's credential
and never the virtual key; each tools/call reserves its price in the team
budget model calls share, and is completed, released or denied as its
answer says; bad input and bad servers get clear JSON-RPC errors with the
lease settled. Skipped (77) without node or the SDK.

Command line: as every gateway test (gw_harness.py) and --node NODE."""

import os
import json
import re
import socket
import sys
import threading
import time
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from gw_harness import (CHAT, SKIP, Caller, Gateway, argument, chat, cost,  # noqa: E402
                        skip_unless_backend, wait_until)
from mcp_fake import SERVER_SECRET, FakeMcp, McpClient, missing, wait_for  # noqa: E402

NODE = argument("--node", "")
MCP_KEY_ENV = "GW_TEST_MCP_SERVER_KEY"
WEB_SEARCH_PRICE = 5000
BROKEN_PRICE = 3000
RPC_ERROR_PRICE = 700
DEFAULT_PRICE = 11
ROLLING = {"kind": "rolling", "capacity": 100000, "window_seconds": 3600}
TEMPLATES = [
    ("usd", "usd:{team}", "usd_micros"),          # model calls and tool calls: one budget
    ("req", "req:{caller}", "requests"),          # both
    ("conc", "conc:{caller}", "requests"),        # both
    ("tools", "tools:{caller}", "tool_calls", ROLLING),                # tool calls only
    ("mcp", "mcp:{mcp_server}:{tool}:{caller}", "requests", ROLLING),  # tool calls only
    ("tpm", "tpm:{caller}:{model}", "tokens", ROLLING),                # model calls only
]
MODEL_COUNTED = "m-counted"  # prompt 1001, completion 499 tokens
SESSION_ID_LENGTH_MAX = 255  # GW_MCP_SESSION_ID_LENGTH_MAX, src/gateway/gw_bounds.h


def mcp_servers(fake, fake_json):
    tools = [{"name": "web_search", "usd_micros_per_call": WEB_SEARCH_PRICE},
             {"name": "broken_search", "usd_micros_per_call": BROKEN_PRICE},
             {"name": "rpc_error", "usd_micros_per_call": RPC_ERROR_PRICE,
              "charge_errors": True},
             {"name": "garbage", "usd_micros_per_call": 1},
             {"name": "hang", "usd_micros_per_call": 1},
             {"name": "stream_cut", "usd_micros_per_call": 1},
             {"name": "slow", "usd_micros_per_call": 1}]
    common = {"api_key_env": MCP_KEY_ENV, "tools": tools,
              "default_usd_micros_per_call": DEFAULT_PRICE}
    return [dict(common, name="search", url=fake.url, timeout_seconds=60),
            dict(common, name="search-json", url=fake_json.url, timeout_seconds=60),
            dict(common, name="search-short", url=fake.url, timeout_seconds=2)]


def setUpModule():  # noqa: N802
    global GW, FAKE, FAKE_JSON, LONG_SESSIONS
    skip_unless_backend()
    reason = missing(NODE)
    if reason:
        print("SKIPPED: " + reason)
        sys.exit(SKIP)
    FAKE = FakeMcp(NODE)
    FAKE_JSON = FakeMcp(NODE, json_answers=True)
    # servers whose session ids are at their bound and one past it
    LONG_SESSIONS = [FakeMcp(NODE, session_id_length=n)
                     for n in (SESSION_ID_LENGTH_MAX, SESSION_ID_LENGTH_MAX + 1)]
    GW = Gateway(templates=TEMPLATES, env={MCP_KEY_ENV: SERVER_SECRET},
                 key_fields=lambda i: {"max_wait_seconds": 20})
    GW.config["mcp_servers"] = mcp_servers(FAKE, FAKE_JSON) + [
        {"name": "long-%d" % i, "url": fake.url, "api_key_env": MCP_KEY_ENV}
        for i, fake in enumerate(LONG_SESSIONS)]
    GW.config["keys"][-1]["mcp_servers"] = ["search-json"]  # the restricted key
    GW.write_config(GW.config)
    GW.server.start()
    assert wait_until(lambda: GW.server.request("GET", "/readyz")[0] == 200, 30)


def tearDownModule():  # noqa: N802
    code = GW.stop()
    FAKE.stop()
    FAKE_JSON.stop()
    for fake in LONG_SESSIONS:
        fake.stop()
    assert code == 0, "llmlimitd exit code %r:\n%s" % (code, GW.server.stderr_text())


def client(caller, server="search"):
    secret = caller.secret if isinstance(caller, Caller) else caller
    return McpClient(GW.server.host, GW.server.port, server, secret)


def used(key):
    status, _, body = GW.server.usage(key)
    return (body["used"], body["reserved"]) if status == 200 else None


class PassThrough(unittest.TestCase):
    def test_initialize_list_and_session_pass_through(self):
        """initialize, notifications/initialized and tools/list reach the
        server and come back as it answered, the session id both ways; the
        server sees its own credential, never the virtual key."""
        c = GW.caller()
        mcp = client(c)
        before = len(FAKE.requests())
        init = mcp.initialize()
        self.assertEqual(init["result"]["serverInfo"]["name"], "fake-search", init)
        self.assertTrue(mcp.session)
        status, _, messages = mcp.request("tools/list")
        self.assertEqual(status, 200)
        names = sorted(t["name"] for t in messages[-1]["result"]["tools"])
        self.assertEqual(names, ["broken_search", "slow", "web_search"])
        seen = FAKE.requests()[before:]
        self.assertEqual([e["rpc"] for e in seen],
                         ["initialize", "notifications/initialized", "tools/list"])
        for entry in seen:
            self.assertEqual(entry["authorization"], "Bearer " + SERVER_SECRET)
            self.assertNotIn(c.secret, str(entry))
        self.assertEqual(seen[1]["session"], mcp.session)
        self.assertEqual(seen[2]["session"], mcp.session)
        self.assertEqual(seen[2]["protocol_version"], "2025-06-18")
        self.assertEqual(seen[2]["accept"], "application/json, text/event-stream")
        # nothing listed or initialized is charged
        self.assertEqual(c.used("usd"), 0)
        self.assertEqual(c.used("req"), 0)

    def test_delete_ends_the_session(self):
        """DELETE goes through with the session: the server forgets it."""
        c = GW.caller()
        mcp = client(c)
        mcp.initialize()
        conn = GW.connection()
        conn.request("DELETE", "/mcp/search", headers=mcp.headers())
        response = conn.getresponse()
        response.read()
        conn.close()
        self.assertEqual(response.status, 200)
        self.assertEqual(FAKE.requests()[-1]["http"], "DELETE")
        status, _, _ = mcp.request("tools/list")
        self.assertEqual(status, 404)  # the server's answer to a session it ended

    def test_get_stream_passes_through(self):
        """The GET event stream opens with the server's head, streamed."""
        c = GW.caller()
        mcp = client(c)
        mcp.initialize()
        sock = socket.create_connection((GW.server.host, GW.server.port), timeout=10)
        try:
            sock.sendall(("GET /mcp/search HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer %s\r\n"
                          "Accept: text/event-stream\r\nMcp-Session-Id: %s\r\n"
                          "MCP-Protocol-Version: 2025-06-18\r\n\r\n"
                          % (c.secret, mcp.session)).encode())
            head = b""
            while b"\r\n\r\n" not in head:
                head += sock.recv(4096)
        finally:
            sock.close()
        self.assertTrue(head.startswith(b"HTTP/1.1 200"), head)
        self.assertIn(b"text/event-stream", head.lower())
        self.assertTrue(wait_for(lambda: FAKE.requests()[-1]["http"] == "GET"))


class ToolCallCharges(unittest.TestCase):
    def test_model_and_tool_calls_share_the_team_budget(self):
        """One template usd:{team} takes a chat call's cost and a tool call's
        price; tool_calls and {tool} templates only the tool call, {model}
        ones only the model call; nothing is left reserved."""
        c = GW.caller()
        status, _, body = GW.call(c, CHAT, chat(MODEL_COUNTED, max_tokens=600))
        self.assertEqual(status, 200, body)
        model_cost = cost(1001, 499)
        self.assertEqual(c.used("usd"), model_cost)
        self.assertIsNone(used("tools:" + c.name))  # never touched by a model call
        mcp = client(c)
        mcp.initialize()
        status, answer, _ = mcp.call_tool("web_search", {"query": "budgets"})
        self.assertEqual(status, 200)
        self.assertEqual(answer["result"]["content"][0]["text"],
                         "results for budgets: llmlimit.example")
        self.assertEqual(c.used("usd"), model_cost + WEB_SEARCH_PRICE)
        self.assertEqual(c.reserved("usd"), 0)
        self.assertEqual(c.used("req"), 2)
        self.assertEqual(used("tools:" + c.name), (1, 0))
        self.assertEqual(used("mcp:search:web_search:" + c.name), (1, 0))
        self.assertEqual(used("tpm:%s:%s" % (c.name, MODEL_COUNTED)), (1500, 0))
        self.assertEqual(c.used("conc"), 0)

    def test_json_answers_and_unlisted_tools(self):
        """A server answering JSON (not a stream) settles the same; a tool
        not in the config costs the server's default price."""
        c = GW.caller()
        mcp = client(c, "search-json")
        mcp.initialize()
        status, answer, _ = mcp.call_tool("web_search", {"query": "x"})
        self.assertEqual(status, 200)
        self.assertIn("result", answer)
        self.assertEqual(c.used("usd"), WEB_SEARCH_PRICE)
        status, answer, _ = mcp.call_tool("no_such_tool")
        self.assertEqual(status, 200)
        # the server's error for an unknown tool: released at the default price
        self.assertEqual(c.used("usd"), WEB_SEARCH_PRICE)
        self.assertEqual(c.reserved("usd"), 0)

    def test_is_error_releases(self):
        """A result with isError: true releases the lease: nothing charged."""
        c = GW.caller()
        mcp = client(c)
        mcp.initialize()
        status, answer, _ = mcp.call_tool("broken_search", {"query": "x"})
        self.assertEqual(status, 200)
        self.assertTrue(answer["result"]["isError"])
        self.assertEqual(c.used("usd"), 0)
        self.assertEqual(c.reserved("usd"), 0)
        self.assertEqual(used("tools:" + c.name), (0, 0))
        self.assertEqual(len(FAKE.tool_calls("broken_search")) >= 1, True)

    def test_charge_errors_charges(self):
        """A JSON-RPC error of a tool with charge_errors is charged its price."""
        c = GW.caller()
        mcp = client(c)
        mcp.initialize()
        status, answer, _ = mcp.call_tool("rpc_error")
        self.assertEqual(status, 200)
        self.assertEqual(answer["error"]["message"], "the tool crashed")
        self.assertEqual(c.used("usd"), RPC_ERROR_PRICE)
        self.assertEqual(c.reserved("usd"), 0)


def lease_events(lease_id):
    status, _, body = GW.events(lease_id=lease_id, limit=1000)
    assert status == 200, body
    return body["events"]


class AuditLog(unittest.TestCase):
    def test_events_of_a_tool_call_name_its_server_and_tool(self):
        """On sqlite every event of a tools/call's lease (reserved, then
        committed or released) names the MCP server and the tool, with the
        key's caller; a model call's events name neither."""
        if GW.backend != "sqlite":
            status, _, _ = GW.events(limit=1)
            self.assertEqual(status, 404)  # no audit log: not_supported_by_backend
            self.skipTest("the audit log is sqlite's")
        c = GW.caller()
        status, headers, body = GW.call(c, CHAT, chat(MODEL_COUNTED, max_tokens=600))
        self.assertEqual(status, 200, body)
        model_lease = headers["x-llmlimit-lease-id"]
        mcp = client(c)
        mcp.initialize()
        settled = {}
        for tool, outcome in (("web_search", "committed"), ("broken_search", "released")):
            status, reply, _ = mcp.request("tools/call", {"name": tool,
                                                          "arguments": {"query": "x"}})
            self.assertEqual(status, 200)
            settled[reply["x-llmlimit-lease-id"]] = (tool, outcome)
        # a tool the config does not list: the client's name, as it came
        odd = 'odd"tool\\x'
        status, reply, _ = mcp.request("tools/call", {"name": odd, "arguments": {}})
        self.assertEqual(status, 200)
        settled[reply["x-llmlimit-lease-id"]] = (odd, "released")  # the server's error
        for lease_id, (tool, outcome) in settled.items():
            events = lease_events(lease_id)
            types = [e["type"] for e in events]
            self.assertEqual(types.count("reserved"), 5, events)  # usd req conc tools mcp
            self.assertEqual(types.count(outcome), 5, events)
            self.assertEqual(len(events), 10, events)
            for e in events:
                self.assertEqual((e["mcp_server"], e["tool"], e["caller"]),
                                 ("search", tool, c.name), e)
        spent = [e for e in lease_events(next(iter(settled))) if e["type"] == "committed"
                 and e["key"] == "usd:" + c.team]
        self.assertEqual(spent[0]["actual_amount"], WEB_SEARCH_PRICE)
        events = lease_events(model_lease)
        self.assertTrue(events)
        for e in events:
            self.assertNotIn("mcp_server", e)
            self.assertNotIn("tool", e)
        # by key: the team budget's log holds both kinds, told apart
        status, _, body = GW.events(key="usd:" + c.team, limit=1000)
        self.assertEqual(status, 200)
        tools = sorted(e.get("tool", "") for e in body["events"] if e["type"] == "reserved")
        self.assertEqual(tools, sorted(["", "web_search", "broken_search", odd]))


BUDGET = {"kind": "budget", "capacity": 10 ** 12, "period": "month", "timeout_seconds": 120,
          "unit": "usd_micros"}


class SpendApart(unittest.TestCase):
    def test_team_tool_and_model_spend_apart_by_caller(self):
        """Templates with "calls": "tool" and "calls": "model" beside the
        budget both share: a team's tool spend and model spend each in its
        own limit, exactly, and by caller with group_by=caller."""
        if GW.backend == "tigerbeetle":
            # the split is the gateway's plan, the same on every backend, and
            # tigerbeetle has no group_by=caller: a second cluster would test nothing more
            self.skipTest("tested on memory and sqlite")
        gw = Gateway(keys=2, env={MCP_KEY_ENV: SERVER_SECRET},
                     key_fields=lambda i: {"team": "apart"},
                     templates=[("usd", "spend:{team}", "usd_micros", BUDGET),
                                ("tools", "spend:{team}:tools", "usd_micros", BUDGET),
                                ("models", "spend:{team}:models", "usd_micros", BUDGET)])
        try:
            gw.config["limits"][1]["calls"] = "tool"
            gw.config["limits"][2]["calls"] = "model"
            gw.config["mcp_servers"] = mcp_servers(FAKE, FAKE_JSON)
            gw.write_config(gw.config)
            gw.server.start()
            self.assertTrue(wait_until(
                lambda: gw.server.request("GET", "/readyz")[0] == 200, 30))
            (secret_a, a, _), (secret_b, b, _) = gw.free_keys[:2]
            status, _, body = gw.call(secret_a, CHAT, chat(MODEL_COUNTED, max_tokens=600))
            self.assertEqual(status, 200, body)
            model_cost = cost(1001, 499)
            for secret, times in ((secret_a, 1), (secret_b, 2)):
                mcp = McpClient(gw.server.host, gw.server.port, "search", secret)
                mcp.initialize()
                for _ in range(times):
                    _, answer, _ = mcp.call_tool("web_search", {"query": "q"})
                    self.assertIn("result", answer)

            def used(key):
                status, _, body = gw.server.usage(key)
                self.assertEqual(status, 200, body)
                return body["used"], body["reserved"]

            self.assertEqual(used("spend:apart"), (model_cost + 3 * WEB_SEARCH_PRICE, 0))
            self.assertEqual(used("spend:apart:tools"), (3 * WEB_SEARCH_PRICE, 0))
            self.assertEqual(used("spend:apart:models"), (model_cost, 0))
            status, _, body = gw.server.request("GET", "/v1/console/gateway/limits")
            self.assertEqual(status, 200, body)
            calls = {t["key"]: t["calls"] for t in body["limits"]}
            self.assertEqual(calls, {"spend:{team}": "all", "spend:{team}:tools": "tool",
                                     "spend:{team}:models": "model"})

            def by_caller(key):
                status, _, body = gw.server.usage(key, query="group_by=caller")
                self.assertEqual(status, 200, body)
                return {c["caller"]: (c["spent"], c["calls"]) for c in body["callers"]}

            self.assertEqual(by_caller("spend:apart:tools"),
                             {a: (WEB_SEARCH_PRICE, 1), b: (2 * WEB_SEARCH_PRICE, 2)})
            self.assertEqual(by_caller("spend:apart:models"), {a: (model_cost, 1)})
        finally:
            code = gw.stop()
            self.assertEqual(code, 0)


class Denials(unittest.TestCase):
    def test_spent_budget_refuses_the_tool_call(self):
        """With the budget spent the tools/call is answered -32000 naming
        the limit, with data.retry_after_ms and data.denied_keys; nothing
        reaches the server and nothing is charged or held."""
        c = GW.caller(usd=WEB_SEARCH_PRICE + 100)
        mcp = client(c)
        mcp.initialize()
        status, answer, _ = mcp.call_tool("web_search", {"query": "first"})
        self.assertIn("result", answer)
        calls_before = len(FAKE.tool_calls())
        status, answer, _ = mcp.call_tool("web_search", {"query": "second"})
        self.assertEqual(status, 200)
        error = answer["error"]
        self.assertEqual(answer["id"], mcp.next_id - 1)
        self.assertEqual(error["code"], -32000)
        self.assertIn("usd:" + c.team, error["message"])
        self.assertEqual(error["data"]["denied_keys"], ["usd:" + c.team])
        self.assertIsInstance(error["data"]["retry_after_ms"], int)
        self.assertGreater(error["data"]["retry_after_ms"], 0)
        self.assertEqual(len(FAKE.tool_calls()), calls_before)
        self.assertEqual(c.used("usd"), WEB_SEARCH_PRICE)
        self.assertEqual(c.reserved("usd"), 0)

    def test_denied_keys_are_json_whatever_the_tool_name(self):
        """A tool name with '"' and '\\' under {tool}: the denial's denied_keys is valid
        JSON naming that very key."""
        c = GW.caller()
        mcp = client(c)
        mcp.initialize()
        tool = 'a"b\\c'
        key = "mcp:search:%s:%s" % (tool, c.name)
        status, _, body = GW.server.put_limit(dict(ROLLING, key=key, capacity=1))
        self.assertEqual(status, 200, body)
        hold = "hold-" + c.name
        self.assertEqual(GW.server.reserve(hold, {key: 1})[0], 200)
        status, answer, _ = mcp.call_tool(tool)
        self.assertEqual(status, 200)
        self.assertEqual(answer["error"]["data"]["denied_keys"], [key])
        self.assertEqual(GW.server.release(hold)[0], 200)

    def test_prefer_wait_waits_for_a_slot(self):
        """A tools/call whose concurrency slot is taken: without Prefer: wait it is denied at
        once; with Prefer: wait=N it waits, and runs once the slot is freed."""
        c = GW.caller(conc=1)
        mcp = client(c)
        mcp.initialize()
        hold = "hold-" + c.name
        self.assertEqual(GW.server.reserve(hold, {c.keys["conc"]: 1})[0], 200)
        status, answer, _ = mcp.call_tool("web_search", {"query": "now"})
        self.assertEqual(answer["error"]["data"]["denied_keys"], [c.keys["conc"]])
        results = []
        calls_before = len(FAKE.tool_calls())
        waiter = threading.Thread(target=lambda: results.append(mcp.call_tool(
            "web_search", {"query": "later"}, headers={"Prefer": "wait=15"})))
        waiter.start()
        self.assertTrue(wait_until(lambda: GW.waiting() >= 1, 10))
        self.assertEqual(len(FAKE.tool_calls()), calls_before)  # not sent while it waits
        self.assertEqual(GW.server.release(hold)[0], 200)
        waiter.join(30)
        status, answer, _ = results[0]
        self.assertEqual(status, 200)
        self.assertIn("results for later", answer["result"]["content"][0]["text"])
        self.assertEqual(c.used("usd"), WEB_SEARCH_PRICE)

    def test_key_not_allowed_the_server(self):
        """A key whose mcp_servers does not list the server: 403 in JSON-RPC;
        an unknown server 404; no key 401; nothing forwarded."""
        before = len(FAKE.requests())
        secret = GW.restricted[0]
        status, _, text = client(secret, "search").post(
            {"jsonrpc": "2.0", "id": 1, "method": "tools/list"})
        self.assertEqual(status, 403, text)
        self.assertIn('"code":-32000', text)
        self.assertIn("may not use the MCP server 'search'", text)
        status, _, text = client(GW.caller(), "nope").post(
            {"jsonrpc": "2.0", "id": 1, "method": "tools/list"})
        self.assertEqual(status, 404, text)
        self.assertIn("No MCP server 'nope'", text)
        status, _, text = client(None, "search").post(
            {"jsonrpc": "2.0", "id": 1, "method": "tools/list"})
        self.assertEqual(status, 401, text)
        self.assertIn('"jsonrpc":"2.0"', text)
        self.assertEqual(len(FAKE.requests()), before)


KEYS = "/v1/admin/keys"
KEYS_MCP_SERVERS_MAX = 64  # src/server/server_bounds.h


def api_key(**fields):
    """A key of the Keys API with its limits defined: (Caller, the create's answer)."""
    name = "k-" + os.urandom(4).hex()
    status, _, body = GW.server.request("POST", KEYS, dict(caller=name, team="t-" + name,
                                                            **fields))
    assert status == 201, (status, body)
    return Caller(GW, body["secret"], name, "t-" + name).define(), body


class KeysApiServers(unittest.TestCase):
    def assert_refused(self, secret, server, method="initialize"):
        """403 in JSON-RPC's shape naming the server; nothing reaches it."""
        before = len(FAKE.requests()) + len(FAKE_JSON.requests())
        mcp = client(secret, server)
        params = {"name": "web_search", "arguments": {}} if method == "tools/call" else {}
        status, _, text = mcp.post({"jsonrpc": "2.0", "id": 7, "method": method,
                                    "params": params})
        self.assertEqual(status, 403, text)
        body = json.loads(text)
        # refused before the body is read: no id (JSON-RPC's null)
        self.assertEqual((body["jsonrpc"], body["id"], body["error"]["code"]),
                         ("2.0", None, -32000))
        self.assertIn("may not use the MCP server '%s'" % server, body["error"]["message"])
        self.assertEqual(len(FAKE.requests()) + len(FAKE_JSON.requests()), before)

    def test_a_key_limited_to_some_servers(self):
        """Keys API mcp_servers: the limited key initializes, lists and calls only its
        server (the other 403, nothing forwarded or reserved); the unlimited one uses
        both; an update widens, narrows to none, and a restart keeps the list."""
        wide, wide_body = api_key()
        narrow, body = api_key(mcp_servers=["search-json"])
        self.assertIsNone(wide_body["mcp_servers"])
        self.assertEqual(body["mcp_servers"], ["search-json"])
        for server in ("search", "search-short"):
            self.assert_refused(narrow.secret, server)
            self.assert_refused(narrow.secret, server, "tools/call")
        self.assertEqual((narrow.used("usd"), narrow.reserved("usd")), (0, 0))
        mcp = client(narrow, "search-json")
        mcp.initialize()
        status, _, messages = mcp.request("tools/list")
        self.assertEqual(status, 200)
        self.assertIn("web_search", [t["name"] for t in messages[-1]["result"]["tools"]])
        status, answer, _ = mcp.call_tool("web_search", {"query": "x"})
        self.assertIn("result", answer)
        self.assertEqual(narrow.used("usd"), WEB_SEARCH_PRICE)
        for server in ("search", "search-json"):
            mcp = client(wide, server)
            mcp.initialize()
            status, answer, _ = mcp.call_tool("web_search", {"query": "y"})
            self.assertIn("result", answer, server)
        self.assertEqual(wide.used("usd"), 2 * WEB_SEARCH_PRICE)

        status, _, shown = GW.server.request("PATCH", KEYS + "/" + body["id"],
                                             {"mcp_servers": None})
        self.assertEqual((status, shown["mcp_servers"]), (200, None), shown)
        mcp = client(narrow, "search")
        mcp.initialize()
        status, answer, _ = mcp.call_tool("web_search", {"query": "z"})
        self.assertIn("result", answer)
        status, _, shown = GW.server.request("PATCH", KEYS + "/" + body["id"],
                                             {"mcp_servers": []})
        self.assertEqual((status, shown["mcp_servers"]), (200, []), shown)
        self.assert_refused(narrow.secret, "search-json")
        status, _, shown = GW.server.request("PATCH", KEYS + "/" + body["id"],
                                             {"mcp_servers": ["search"]})
        self.assertEqual((status, shown["mcp_servers"]), (200, ["search"]), shown)

        GW.server.restart()
        status, _, shown = GW.server.request("GET", KEYS + "/" + body["id"])
        self.assertEqual((status, shown["mcp_servers"]), (200, ["search"]), shown)
        status, _, listed = GW.server.request("GET", KEYS + "?caller=" + wide.name)
        self.assertIsNone(listed["keys"][0]["mcp_servers"], listed)
        self.assert_refused(narrow.secret, "search-json")

    def test_gateway_json_keys_show_their_list(self):
        """A gateway.json key's mcp_servers is shown by the Keys API."""
        status, _, listed = GW.server.request("GET", KEYS + "?caller=restricted")
        self.assertEqual(status, 200, listed)
        self.assertEqual([k["mcp_servers"] for k in listed["keys"]], [["search-json"]])
        status, _, listed = GW.server.request("GET", KEYS + "?caller=" + GW.caller().name)
        self.assertEqual([k["mcp_servers"] for k in listed["keys"]], [None])

    def test_bad_lists_are_refused(self):
        """An unknown server, a duplicate, a name that is not one, one past the bound:
        400 naming mcp_servers, no key made or changed."""
        _, body = api_key(mcp_servers=["search"])
        status, _, before = GW.server.request("GET", KEYS + "?limit=1000")
        cases = [
            (["nope"], "unknown MCP server 'nope'"),
            (["search", "search"], "duplicate"),
            ([7], "MCP server name"),
            (["has space"], "MCP server name"),
            (["x" * 129], "MCP server name"),
            ("search", "at most %d" % KEYS_MCP_SERVERS_MAX),
            (["s%d" % i for i in range(KEYS_MCP_SERVERS_MAX + 1)],
             "at most %d" % KEYS_MCP_SERVERS_MAX),
        ]
        for value, reason in cases:
            status, _, answer = GW.server.request("POST", KEYS, {
                "caller": "bad-list", "team": "bad-list", "mcp_servers": value})
            self.assertEqual(status, 400, (value, answer))
            self.assertIn("mcp_servers", answer["error"])
            self.assertIn(reason, answer["error"])
            status, _, answer = GW.server.request("PATCH", KEYS + "/" + body["id"],
                                                  {"mcp_servers": value})
            self.assertEqual(status, 400, (value, answer))
            self.assertIn(reason, answer["error"])
        status, _, after = GW.server.request("GET", KEYS + "?limit=1000")
        self.assertEqual(len(after["keys"]), len(before["keys"]))
        status, _, shown = GW.server.request("GET", KEYS + "/" + body["id"])
        self.assertEqual(shown["mcp_servers"], ["search"])
        # at the bound: accepted when every name is a server (the bound is on the list)
        names = ["search", "search-json", "search-short"]
        _, body = api_key(mcp_servers=names)
        self.assertEqual(body["mcp_servers"], names)


class BadInput(unittest.TestCase):
    def test_malformed_messages(self):
        """Not JSON, a batch, a tools/call without a name or an id: each a
        JSON-RPC error (400) with its code; nothing forwarded or reserved."""
        c = GW.caller()
        mcp = client(c)
        mcp.initialize()
        before = len(FAKE.requests())
        cases = [
            ("{not json", -32700, None),
            ('[{"jsonrpc":"2.0","id":1,"method":"tools/list"}]', -32600, None),
            ('{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{}}', -32602, 5),
            ('{"jsonrpc":"2.0","method":"tools/call","params":{"name":"web_search"}}', -32600,
             None),
            ('{"jsonrpc":"2.0","id":{"a":1},"method":"tools/list"}', -32600, None),
        ]
        for raw, code, answer_id in cases:
            status, _, text = mcp.post(None, raw=raw)
            self.assertEqual(status, 400, (raw, text))
            body = json.loads(text)
            self.assertEqual(body["error"]["code"], code, (raw, body))
            self.assertEqual(body["id"], answer_id, (raw, body))
        self.assertEqual(len(FAKE.requests()), before)
        self.assertEqual(c.used("usd"), 0)
        self.assertEqual(c.reserved("usd"), 0)

    def test_session_id_bound_both_ways(self):
        """A client's Mcp-Session-Id of 256 bytes, or one with a space, is refused 400
        -32600 naming the header; one of 255 the server never gave is MCP's 404; nothing
        is forwarded. A server's session id of 255 bytes comes back whole and goes on
        whole; one of 256 is refused (502 naming it), never cut."""
        c = GW.caller()
        mcp = client(c)
        before = len(FAKE.requests())
        for value in ("s" * SESSION_ID_LENGTH_MAX, "s" * (SESSION_ID_LENGTH_MAX + 1),
                      "has space"):
            mcp.session = value
            status, _, text = mcp.post({"jsonrpc": "2.0", "id": 4, "method": "tools/list"})
            if len(value) == SESSION_ID_LENGTH_MAX:
                self.assertEqual(status, 404, text)  # the gateway's: not a session it saw
                self.assertIn("No MCP session with this Mcp-Session-Id", text)
                continue
            self.assertEqual(status, 400, (value, text))
            body = json.loads(text)
            self.assertEqual(body["error"]["code"], -32600, body)
            self.assertIn("Mcp-Session-Id: must be 1-%d bytes" % SESSION_ID_LENGTH_MAX,
                          body["error"]["message"])
        self.assertEqual(len(FAKE.requests()), before)
        at_bound = client(c, "long-0")
        at_bound.initialize()
        self.assertEqual(len(at_bound.session), SESSION_ID_LENGTH_MAX)
        self.assertEqual(LONG_SESSIONS[0].requests()[-1]["session"], at_bound.session)
        status, _, messages = at_bound.request("tools/list")
        self.assertEqual(status, 200, messages)
        self.assertEqual(LONG_SESSIONS[0].requests()[-1]["session"], at_bound.session)
        over = client(c, "long-1")
        status, headers, text = over.post({"jsonrpc": "2.0", "id": 1, "method": "initialize",
                                           "params": {"protocolVersion": "2025-06-18",
                                                      "capabilities": {},
                                                      "clientInfo": {"name": "t",
                                                                     "version": "1"}}})
        self.assertEqual(status, 502, text)
        self.assertNotIn("mcp-session-id", headers)
        self.assertIn("Mcp-Session-Id", text)
        self.assertEqual(GW.server.request("GET", "/readyz")[0], 200)

    def test_a_session_of_another_key_is_404(self):
        """A session opened by one key, presented by another (the same server) or on
        another server by the same key: MCP's 404 in JSON-RPC, nothing forwarded; the
        key that opened it goes on using it."""
        owner, other = GW.caller(), GW.caller()
        mine = client(owner)
        mine.initialize()
        before = len(FAKE.requests())
        for secret, server in ((other.secret, "search"), (owner.secret, "search-short")):
            thief = client(secret, server)
            thief.session = mine.session
            for method in ("tools/list", "tools/call"):
                params = {"name": "web_search", "arguments": {}} if method == "tools/call" else {}
                status, _, text = thief.post({"jsonrpc": "2.0", "id": 9, "method": method,
                                              "params": params})
                self.assertEqual(status, 404, (server, method, text))
                self.assertEqual(json.loads(text)["error"]["code"], -32000, text)
                self.assertIn("No MCP session", text)
        self.assertEqual(len(FAKE.requests()), before)
        self.assertEqual((other.used("usd"), other.reserved("usd")), (0, 0))
        status, answer, _ = mine.call_tool("web_search", {"query": "still mine"})
        self.assertIn("result", answer)

    def test_server_answering_garbage(self):
        """A 200 that is not a JSON-RPC answer to the call: 502 with a
        JSON-RPC error for its id; released; the gateway stays up."""
        c = GW.caller()
        mcp = client(c)
        mcp.initialize()
        status, answer, _ = mcp.call_tool("garbage")
        self.assertEqual(status, 502)
        self.assertEqual(answer["error"]["code"], -32000)
        self.assertEqual(answer["id"], mcp.next_id - 1)
        self.assertEqual(c.used("usd"), 0)
        self.assertEqual(c.reserved("usd"), 0)
        self.assertEqual(GW.server.request("GET", "/readyz")[0], 200)

    def test_stream_ending_without_the_answer(self):
        """An event stream that ends without the call's answer: the client gets what came
        and then a JSON-RPC error for its id; released."""
        c = GW.caller()
        mcp = client(c)
        mcp.initialize()
        status, answer, messages = mcp.call_tool("stream_cut")
        self.assertEqual(status, 200)
        self.assertEqual(messages[0]["method"], "notifications/message")
        self.assertEqual(answer["id"], mcp.next_id - 1)
        self.assertEqual(answer["error"]["code"], -32000)
        self.assertIn("ended without an answer", answer["error"]["message"])
        self.assertEqual(c.used("usd"), 0)
        self.assertEqual(c.reserved("usd"), 0)

    def test_server_never_answering(self):
        """A server that never answers is cut at its timeout: 504 in
        JSON-RPC, released, the gateway up."""
        c = GW.caller()
        mcp = client(c, "search-short")
        mcp.initialize()
        started = time.time()
        status, answer, _ = mcp.call_tool("hang")
        self.assertEqual(status, 504)
        self.assertLess(time.time() - started, 30)
        self.assertEqual(answer["error"]["code"], -32000)
        self.assertEqual(c.used("usd"), 0)
        self.assertTrue(wait_for(lambda: c.reserved("usd") == 0))
        self.assertEqual(GW.server.request("GET", "/readyz")[0], 200)

    def test_client_gone_releases_and_cancels_upstream(self):
        """A client that leaves mid tools/call: the lease is released at
        once, and the server gets notifications/cancelled for the call."""
        c = GW.caller()
        mcp = client(c)
        mcp.initialize()
        sock = socket.create_connection((GW.server.host, GW.server.port), timeout=10)
        body = ('{"jsonrpc":"2.0","id":42,"method":"tools/call",'
                '"params":{"name":"slow","arguments":{"ms":30000}}}')
        head = "".join("%s: %s\r\n" % kv for kv in mcp.headers().items())
        sock.sendall(("POST /mcp/search HTTP/1.1\r\nHost: x\r\n%sContent-Length: %d\r\n\r\n%s"
                      % (head, len(body), body)).encode())
        self.assertTrue(wait_for(lambda: any(e.get("tool_ran") == "slow" for e in FAKE.log())))
        self.assertEqual(c.reserved("usd"), 1)
        self.assertEqual(c.reserved("conc"), 1)
        sock.close()
        self.assertTrue(wait_for(lambda: c.reserved("conc") == 0))
        self.assertEqual(c.used("usd"), 0)
        self.assertEqual(c.reserved("usd"), 0)
        self.assertTrue(wait_for(lambda: any(
            e.get("rpc") == "notifications/cancelled" and e["body"]["params"]["requestId"] == 42
            for e in FAKE.requests())))


MCP_STATS_SERIES_MAX = 256  # GATEWAY_MCP_STATS_SERIES_MAX, src/server/gateway_internal.h
TOOL_CALLS = "llmlimit_mcp_tool_calls_total"
TOOL_COST = "llmlimit_mcp_tool_cost_usd_micros_total"


def tool_metrics():
    """{(metric, server, tool, outcome or None): value} of the MCP series in /metrics."""
    pattern = re.compile(r'^(%s|%s)\{server="((?:[^"\\]|\\.)*)",tool="((?:[^"\\]|\\.)*)"'
                         r'(?:,outcome="([a-z_]+)")?\} (\d+)$' % (TOOL_CALLS, TOOL_COST))
    result = {}
    for line in GW.metrics().splitlines():
        match = pattern.match(line)
        if match:
            metric, server, tool, outcome, value = match.groups()
            result[(metric, server, tool, outcome)] = int(value)
    return result


class ToolMetrics(unittest.TestCase):
    def test_tool_calls_and_spend_by_server_and_tool(self):
        """/metrics counts each tools/call by server, tool and outcome (result, tool_error,
        rpc_error, denied) and its settled cost by server and tool; /v1/console/gateway
        lists the same beside the model calls. Then the bound: distinct (server, tool)
        pairs up to GATEWAY_MCP_STATS_SERIES_MAX have their own series, the one past it
        is counted under server="other", tool="other"."""
        before = tool_metrics()
        c = GW.caller()
        mcp = client(c, "search-json")
        mcp.initialize()
        for tool in ("web_search", "web_search", "broken_search", "rpc_error"):
            status, answer, _ = mcp.call_tool(tool, {"query": "m"})
            self.assertEqual(status, 200, answer)
        denied = GW.caller(usd=WEB_SEARCH_PRICE)
        hold = "hold-" + denied.name
        self.assertEqual(GW.server.reserve(hold, {denied.keys["usd"]: 1})[0], 200)
        status, answer, _ = client(denied, "search-json").call_tool("web_search")
        self.assertEqual(answer["error"]["data"]["denied_keys"], [denied.keys["usd"]], answer)
        self.assertEqual(GW.server.release(hold)[0], 200)
        after = tool_metrics()

        def delta(metric, tool, outcome=None):
            key = (metric, "search-json", tool, outcome)
            return after.get(key, 0) - before.get(key, 0)
        self.assertEqual(delta(TOOL_CALLS, "web_search", "result"), 2)
        self.assertEqual(delta(TOOL_CALLS, "web_search", "denied"), 1)
        self.assertEqual(delta(TOOL_CALLS, "broken_search", "tool_error"), 1)
        self.assertEqual(delta(TOOL_CALLS, "rpc_error", "rpc_error"), 1)
        self.assertEqual(delta(TOOL_COST, "web_search"), 2 * WEB_SEARCH_PRICE)
        self.assertEqual(delta(TOOL_COST, "broken_search"), 0)  # released
        self.assertEqual(delta(TOOL_COST, "rpc_error"), RPC_ERROR_PRICE)  # charge_errors
        self.assertEqual(c.used("usd"), 2 * WEB_SEARCH_PRICE + RPC_ERROR_PRICE)
        status, _, body = GW.server.request("GET", "/v1/console/gateway")
        self.assertEqual(status, 200, body)
        row = [t for t in body["tools"]
               if (t["server"], t["tool"]) == ("search-json", "web_search")][0]
        self.assertGreaterEqual(row["calls"], 2)
        self.assertGreaterEqual(row["denials"], 1)
        self.assertEqual(row["usd_micros"], after[(TOOL_COST, "search-json", "web_search", None)])
        self.assertIn("keys", body)  # the model calls' rows beside

        # the bound: fill the table with tools the server does not have, then one more
        pairs = {(s, t) for (_, s, t, _) in tool_metrics()} - {("other", "other")}
        self.assertLess(len(pairs), MCP_STATS_SERIES_MAX)
        names = ["fill-%d" % i for i in range(MCP_STATS_SERIES_MAX - len(pairs))]
        for name in names + ["one-past", 'bad"name\\x']:
            mcp.call_tool(name)
        final = tool_metrics()
        pairs = {(s, t) for (_, s, t, _) in final} - {("other", "other")}
        self.assertEqual(len(pairs), MCP_STATS_SERIES_MAX)
        self.assertIn(("search-json", names[-1]), pairs)
        self.assertNotIn(("search-json", "one-past"), pairs)
        others = sum(v for (m, s, t, _), v in final.items()
                     if m == TOOL_CALLS and (s, t) == ("other", "other"))
        self.assertGreaterEqual(others, 2)
        self.assertEqual(GW.server.request("GET", "/readyz")[0], 200)


if __name__ == "__main__":
    unittest.main(verbosity=2)

"""The fake MCP server (tests/gateway/mcp/fake_mcp_server.mjs, built with the
official @modelcontextprotocol/sdk) run from Python, and a small MCP client
speaking Streamable HTTP through the gateway's /mcp/{server} route, for
test_gw_mcp.py and test_gw_agents_mcp.py. Standard library only."""

import http.client
import json
import os
import subprocess
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
MCP_DIR = os.path.join(HERE, "mcp")
SERVER_SCRIPT = os.path.join(MCP_DIR, "fake_mcp_server.mjs")
SERVER_SECRET = "mcp-server-secret"  # what the fake takes as Authorization: Bearer
PROTOCOL_VERSION = "2025-06-18"


def missing(node):
    """Why the fake cannot run here, or None."""
    if not node or not os.path.exists(node):
        return "node is not installed"
    if not os.path.isdir(os.path.join(MCP_DIR, "node_modules", "@modelcontextprotocol", "sdk")):
        return ("@modelcontextprotocol/sdk is not installed in tests/gateway/mcp "
                "(sh scripts/install-test-deps.sh)")
    return None


class FakeMcp:
    """One fake MCP server process; `log()` is every request it got."""

    def __init__(self, node, json_answers=False, slow_ms=0, session_id_length=0):
        handle, self.log_path = tempfile.mkstemp(prefix="llmlimit-fake-mcp-", suffix=".log")
        os.close(handle)
        args = [node, SERVER_SCRIPT, "--log", self.log_path] + (["--json"] if json_answers else [])
        if slow_ms:
            args += ["--slow-ms", str(slow_ms)]
        if session_id_length:
            args += ["--session-id-length", str(session_id_length)]
        self.process = subprocess.Popen(args, stderr=subprocess.PIPE, text=True)
        line = self.process.stderr.readline()
        if "listening on" not in line:
            self.stop()
            raise RuntimeError("the fake MCP server did not start: " + line)
        self.port = int(line.split()[-1])
        self.url = "http://127.0.0.1:%d/mcp" % self.port

    def log(self):
        with open(self.log_path) as f:
            return [json.loads(line) for line in f if line.strip()]

    def requests(self):
        return [entry for entry in self.log() if "http" in entry]

    def tool_calls(self, tool=None):
        return [e for e in self.requests()
                if e.get("rpc") == "tools/call" and (tool is None or e.get("tool") == tool)]

    def stop(self):
        if self.process.poll() is None:
            self.process.kill()
            self.process.wait()
        if os.path.exists(self.log_path):
            os.unlink(self.log_path)


def messages_of(content_type, text):
    """The JSON-RPC messages of an answer: its JSON, or each event's data."""
    if content_type.startswith("text/event-stream"):
        messages = []
        for block in text.replace("\r\n", "\n").split("\n\n"):
            data = [line[5:].lstrip(" ") for line in block.split("\n") if line.startswith("data:")]
            if data:
                messages.append(json.loads("\n".join(data)))
        return messages
    if not text.strip():
        return []
    value = json.loads(text)
    return value if isinstance(value, list) else [value]


class McpClient:
    """An MCP client on /mcp/{server} of the gateway, keyed by a virtual key."""

    def __init__(self, host, port, server, secret):
        self.host, self.port, self.server, self.secret = host, port, server, secret
        self.session = None
        self.next_id = 1

    def headers(self, extra=None):
        headers = {"Content-Type": "application/json",
                   "Accept": "application/json, text/event-stream",
                   "MCP-Protocol-Version": PROTOCOL_VERSION}
        if self.secret is not None:
            headers["Authorization"] = "Bearer " + self.secret
        if self.session is not None:
            headers["Mcp-Session-Id"] = self.session
        headers.update(extra or {})
        return headers

    def post(self, message, raw=None, headers=None, timeout_s=30):
        """(status, headers with lower-case names, body text)."""
        conn = http.client.HTTPConnection(self.host, self.port, timeout=timeout_s)
        try:
            body = raw if raw is not None else json.dumps(message)
            conn.request("POST", "/mcp/" + self.server, body=body, headers=self.headers(headers))
            response = conn.getresponse()
            text = response.read().decode("utf-8", "replace")
            return response.status, {k.lower(): v for k, v in response.getheaders()}, text
        finally:
            conn.close()

    def request(self, method, params=None, headers=None, timeout_s=30):
        """A request; (status, headers, its messages)."""
        message = {"jsonrpc": "2.0", "id": self.next_id, "method": method}
        self.next_id += 1
        if params is not None:
            message["params"] = params
        status, reply_headers, text = self.post(message, headers=headers, timeout_s=timeout_s)
        return status, reply_headers, messages_of(reply_headers.get("content-type", ""), text)

    def initialize(self):
        status, headers, messages = self.request("initialize", {
            "protocolVersion": PROTOCOL_VERSION, "capabilities": {},
            "clientInfo": {"name": "llmlimit-test", "version": "1"}})
        assert status == 200, (status, messages)
        self.session = headers.get("mcp-session-id")
        status, _, _ = self.post({"jsonrpc": "2.0", "method": "notifications/initialized"})
        assert status == 202, status
        return messages[-1]

    def call_tool(self, name, arguments=None, headers=None, timeout_s=30):
        """(status, the answer to the call or None, all messages)."""
        status, _, messages = self.request("tools/call", {"name": name,
                                                         "arguments": arguments or {}},
                                           headers=headers, timeout_s=timeout_s)
        answers = [m for m in messages if "result" in m or "error" in m]
        return status, (answers[-1] if answers else None), messages


def wait_for(predicate, timeout_s=20.0):
    deadline = time.time() + timeout_s
    while time.time() < deadline:
        if predicate():
            return True
        time.sleep(0.05)
    return predicate()

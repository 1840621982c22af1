"""The official openai SDK (Node, tests/gateway/node) against llmlimitd's
gateway: node/sdk_gateway.mjs makes a chat, two streaming chats (with and
without include_usage), a completion, an embedding and a models list, and
each answer parses as the SDK expects; a key whose limit is full gets a
RateLimitError carrying Retry-After and retry-after-ms; a wrong key an
AuthenticationError; and what the gateway charged is exactly the usage of
the calls the SDK made.

Backend from --backend (memory, sqlite, tigerbeetle). Exits 77 (skipped)
when node or the installed SDK (npm ci --prefix tests/gateway/node) is
missing."""

import json
import os
import subprocess
import sys
import unittest

from gw_harness import (AGENT_MODELS, CHAT, HERE, MODELS, REMAINING_KNOWN, SKIP, GatewayTest,
                        chat, cost, skip_unless_backend)
from gw_harness import tearDownModule  # noqa: F401 - unittest calls it
from node_sdk import NODE_DIR, missing_prerequisite, node_from_argv


NODE = node_from_argv()
PROMPT, COMPLETION = 1001, 499  # m-counted's usage


class Sdk(GatewayTest, unittest.TestCase):

    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        cls.caller = cls.gw.caller(req=100, tok=10 ** 6)
        cls.limited = cls.gw.caller(req=1)
        status, _, body = cls.gw.call(cls.limited, CHAT, chat("m-normal"))
        assert status == 200, (status, body)
        env = dict(os.environ, GW_BASE_URL=cls.gw.server.url + "/v1",
                   GW_API_KEY=cls.caller.secret, GW_LIMITED_API_KEY=cls.limited.secret,
                   GW_MODEL="m-counted")
        done = subprocess.run([NODE, os.path.join(NODE_DIR, "sdk_gateway.mjs")], env=env,
                              capture_output=True, text=True, timeout=120)
        lines = [json.loads(line) for line in done.stdout.splitlines() if line.strip()]
        if done.returncode != 0:
            raise AssertionError("sdk_gateway.mjs exited %d:\n%s\n%s"
                                 % (done.returncode, done.stdout, done.stderr))
        cls.calls = {line["call"]: line for line in lines}

    def test_chat(self):
        """A chat parses, with its usage and the gateway's headers."""
        chat_call = self.calls["chat"]
        self.assertEqual(chat_call["object"], "chat.completion")
        self.assertEqual(len(chat_call["content"].split()), COMPLETION)
        self.assertEqual((chat_call["usage"]["prompt_tokens"],
                          chat_call["usage"]["completion_tokens"]), (PROMPT, COMPLETION))
        headers = chat_call["headers"]
        self.assertEqual(headers["x-ratelimit-limit-requests"], "100")
        if REMAINING_KNOWN:
            self.assertEqual(headers["x-ratelimit-remaining-requests"], "99")
        self.assertEqual(headers["x-ratelimit-limit-tokens"], str(10 ** 6))
        self.assertTrue(headers["x-llmlimit-lease-id"])

    def test_stream_without_usage(self):
        """A stream the SDK did not ask usage for: every word, no usage chunk."""
        stream = self.calls["chat_stream"]
        self.assertEqual((stream["words"], stream["finish_reason"], stream["usage"]),
                         (COMPLETION, "stop", None))
        self.assertEqual(stream["chunks"], 1 + COMPLETION + 1)  # role, words, finish
        self.assertEqual(stream["headers"]["x-ratelimit-limit-requests"], "100")

    def test_stream_with_usage(self):
        """A stream with include_usage: the SDK reads the usage chunk."""
        stream = self.calls["chat_stream_usage"]
        self.assertEqual(stream["chunks"], 1 + COMPLETION + 1 + 1)
        self.assertEqual((stream["usage"]["prompt_tokens"], stream["usage"]["completion_tokens"]),
                         (PROMPT, COMPLETION))

    def test_completion_and_embedding(self):
        """A completion and a base64 embedding parse, with their usage."""
        self.assertEqual(self.calls["completion"]["object"], "text_completion")
        self.assertEqual(self.calls["completion"]["usage"]["completion_tokens"], COMPLETION)
        embedding = self.calls["embedding"]
        self.assertEqual((embedding["count"], embedding["dimensions"]), (2, [8, 8]))
        self.assertEqual(embedding["usage"]["prompt_tokens"], PROMPT)

    def test_models(self):
        """models.list() pages through the key's models."""
        self.assertEqual(self.calls["models"]["ids"], list(MODELS) + list(AGENT_MODELS))

    def test_rate_limit_error(self):
        """A full limit is a RateLimitError with the code, Retry-After and retry-after-ms."""
        error = self.calls["rate_limited"]
        self.assertTrue(error["rate_limit_error"])
        self.assertEqual((error["status"], error["code"]), (429, "rate_limit_exceeded"))
        self.assertIn(self.limited.keys["req"], error["message"])
        retry_after_ms = int(error["retry_after_ms"])
        self.assertGreater(retry_after_ms, 0)
        self.assertEqual(int(error["retry_after"]), -(-retry_after_ms // 1000))

    def test_wrong_key(self):
        """A wrong key is an AuthenticationError (401 invalid_api_key)."""
        error = self.calls["bad_key"]
        self.assertEqual((error["authentication_error"], error["status"], error["code"]),
                         (True, 401, "invalid_api_key"))

    def test_charges(self):
        """The gateway charged exactly the usage of the SDK's calls."""
        calls = 4  # chat, two streams, completion: 1001 in, 499 out each
        self.assertEqual(self.caller.snapshot(), {
            "req": (0, calls + 1, 0),
            "tok": (0, (calls + 1) * PROMPT + calls * COMPLETION, 0),
            "in": (0, (calls + 1) * PROMPT, 0),
            "out": (0, calls * COMPLETION, 0),
            "conc": (0, 0, 0),
            "usd": (0, calls * cost(PROMPT, COMPLETION) + cost(PROMPT, 0), 0),
        })
        self.assertEqual(self.limited.snapshot()["req"], (0, 1, 0))


if __name__ == "__main__":
    reason = missing_prerequisite(NODE)
    if reason:
        print("SKIPPED: " + reason)
        sys.exit(SKIP)
    skip_unless_backend()
    unittest.main(verbosity=2)

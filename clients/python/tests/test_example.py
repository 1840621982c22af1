"""examples/openai_wrapper.py against the real llmlimitd and a fake
OpenAI-compatible provider on loopback (no network)."""

import http.server
import json
import os
import subprocess
import sys
import threading
import unittest

import support
from support import unique_key
from llmlimit import Client

sys.path.insert(0, os.path.join(support.REPO, "clients", "python", "examples"))
import openai_wrapper  # noqa: E402


class FakeProvider:
    """Answers POST /v1/chat/completions like OpenAI, with fixed usage, or
    with HTTP `fail_status` when set."""

    def __init__(self, prompt_tokens=12, completion_tokens=30, fail_status=None):
        self.requests = []
        provider = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def do_POST(self):
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                provider.requests.append((self.path, self.headers.get("Authorization"), body))
                if fail_status:
                    status, answer = fail_status, {"error": {"message": "overloaded"}}
                else:
                    status, answer = 200, {
                        "id": "chatcmpl-1", "object": "chat.completion", "model": body["model"],
                        "choices": [{"index": 0, "finish_reason": "stop",
                                     "message": {"role": "assistant", "content": "Queues wait."}}],
                        "usage": {"prompt_tokens": prompt_tokens,
                                  "completion_tokens": completion_tokens,
                                  "total_tokens": prompt_tokens + completion_tokens}}
                data = json.dumps(answer).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        self.httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    @property
    def url(self):
        return "http://127.0.0.1:%d/v1" % self.httpd.server_address[1]

    def close(self):
        self.httpd.shutdown()
        self.httpd.server_close()


class OpenAIWrapperTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.server = support.Server().start()
        cls.client = Client(cls.server.url)

    @classmethod
    def tearDownClass(cls):
        cls.client.close()
        cls.server.stop()
        cls.server.cleanup()

    def chat_for(self, provider):
        chat = openai_wrapper.LimitedChat(self.client, unique_key("team"), provider.url, "sk-test")
        chat.setup_limits("gpt-4o")
        return chat

    def usage(self, key):
        u = self.server.usage_of(key)
        return u["reserved"], u["used"]

    def test_cost_arithmetic(self):
        """Cost is exact integer usd_micros, rounded up: 12 in + 30 out of gpt-4o = 330 micros."""
        # 12 * 2.5 + 30 * 10 = 330 dollars per million tokens -> 330 usd_micros.
        self.assertEqual(openai_wrapper.cost_usd_micros("gpt-4o", 12, 30), 330)
        self.assertEqual(openai_wrapper.cost_usd_micros("gpt-4o-mini", 1, 0), 1)

    def test_real_usage_and_cost_recorded(self):
        """After a call, TPM and the budget hold the provider's real tokens and cost, nothing reserved."""
        provider = FakeProvider(prompt_tokens=12, completion_tokens=30)
        self.addCleanup(provider.close)
        chat = self.chat_for(provider)
        report = chat.chat([{"role": "user", "content": "Write a haiku about queues"}],
                           model="gpt-4o", max_tokens=200)
        self.assertEqual(report.reply, "Queues wait.")
        self.assertEqual((report.prompt_tokens, report.completion_tokens, report.total_tokens),
                         (12, 30, 42))
        self.assertEqual(report.cost_usd_micros, 330)
        self.assertGreater(report.reserved_tokens, 42)
        self.assertGreater(report.reserved_usd_micros, 330)
        keys = chat.keys("gpt-4o")
        self.assertEqual(self.usage(keys["tpm"]), (0, 42))
        self.assertEqual(self.usage(keys["usd"]), (0, 330))
        self.assertEqual(self.usage(keys["rpm"]), (0, 1))
        path, auth, body = provider.requests[0]
        self.assertEqual((path, auth, body["model"], body["max_tokens"]),
                         ("/v1/chat/completions", "Bearer sk-test", "gpt-4o", 200))

    def test_provider_error_releases(self):
        """A provider error propagates and leaves nothing reserved or charged."""
        provider = FakeProvider(fail_status=500)
        self.addCleanup(provider.close)
        chat = self.chat_for(provider)
        with self.assertRaises(Exception) as raised:
            chat.chat([{"role": "user", "content": "hi"}], model="gpt-4o")
        self.assertIn("500", str(raised.exception))
        for key in chat.keys("gpt-4o").values():
            self.assertEqual(self.usage(key), (0, 0))

    def test_command_line(self):
        """The script run as documented prints the reply and a usage and cost line."""
        provider = FakeProvider(prompt_tokens=5, completion_tokens=7)
        self.addCleanup(provider.close)
        script = os.path.join(support.REPO, "clients", "python", "examples", "openai_wrapper.py")
        env = dict(os.environ, LLMLIMIT_URL=self.server.url, OPENAI_BASE_URL=provider.url,
                   OPENAI_API_KEY="sk-test")
        team = unique_key("team")
        run = subprocess.run([sys.executable, script, "--setup", "--team", team, "hello"],
                             env=env, capture_output=True, text=True, timeout=30)
        self.assertEqual(run.returncode, 0, run.stderr)
        self.assertEqual(run.stdout.strip(), "Queues wait.")
        self.assertIn("tokens: prompt 5, completion 7, total 12", run.stderr)
        self.assertIn("cost $0.000005", run.stderr)  # 5*0.15 + 7*0.6 = 4.95 -> 5 micros

    def test_setup_changes_only_what_differs(self):
        """--setup creates a missing limit with the example's defaults, leaves one that exists as
        it is (an operator's TPM of 200,000 stays), and changes only a capacity asked for, as
        `llmlimit limits put` does."""
        provider = FakeProvider(prompt_tokens=5, completion_tokens=7)
        self.addCleanup(provider.close)
        script = os.path.join(support.REPO, "clients", "python", "examples", "openai_wrapper.py")
        env = dict(os.environ, LLMLIMIT_URL=self.server.url, OPENAI_BASE_URL=provider.url,
                   OPENAI_API_KEY="sk-test")
        team = unique_key("team")
        tpm = "global:llm:openai:gpt-4o-mini:tpm"
        usd = "team:%s:usd:month" % team
        self.client.put_limit({"key": tpm, "kind": "rolling", "capacity": 200000,
                               "window_seconds": 60, "unit": "tokens", "description": "ops"})
        before = self.client.get_limit(tpm)["definition"]

        def setup(*flags):
            run = subprocess.run([sys.executable, script, "--setup", "--team", team] +
                                 list(flags) + ["hello"],
                                 env=env, capture_output=True, text=True, timeout=30)
            self.assertEqual(run.returncode, 0, run.stderr)
            return run.stderr

        err = setup()
        self.assertEqual(self.client.get_limit(tpm)["definition"], before)
        self.assertIn("setup: %s unchanged" % tpm, err)
        self.assertEqual(self.client.get_limit(usd)["definition"]["capacity"], 100_000_000)
        self.assertIn("setup: %s created" % usd, err)
        err = setup("--tpm", "50000")
        self.assertEqual(self.client.get_limit(tpm)["definition"], dict(before, capacity=50000))
        self.assertIn("setup: %s capacity 200000 -> 50000" % tpm, err)
        self.assertIn("setup: %s unchanged" % usd, err)
        err = setup("--tpm", "50000")
        self.assertIn("setup: %s unchanged" % tpm, err)


if __name__ == "__main__":
    unittest.main()

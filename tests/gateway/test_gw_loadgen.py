"""`llmlimit bench --mode post`, the load generator the gateway benchmark runs
beside wrk (bench/gateway/run.sh), against the real gateway: every answer it
counts is one the gateway gave, whole answers (Content-Length) and streams
(chunked) alike, and its usage errors are clear.

The generator does not depend on the backend: memory only."""

import json
import os
import subprocess
import tempfile
import unittest

from gw_harness import CHAT, CLI, MESSAGES, GatewayTest, chat, skip_unless_backend
from gw_harness import tearDownModule  # noqa: F401 - unittest calls it


class Loadgen(GatewayTest, unittest.TestCase):

    def bench(self, caller, *args):
        return subprocess.run([CLI, "--url", self.gw.server.url, "--compact", "bench"] + list(args),
                              env=dict(os.environ, LLMLIMIT_TOKEN=caller.secret),
                              capture_output=True, text=True, timeout=60)

    def post(self, caller, path, body, *more, code=0):
        with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as f:
            json.dump(body, f)
        try:
            done = self.bench(caller, "--mode", "post", "--path", path, "--body-file", f.name,
                              "--connections", "4", "--duration", "1", "--quiet", "--json",
                              *more)
        finally:
            os.unlink(f.name)
        self.assertEqual(done.returncode, code, done.stdout + done.stderr)
        return json.loads(done.stdout)

    def test_every_call_counted_is_a_call_the_gateway_charged(self):
        """A whole chat answer and a Messages stream: requests == allowed == the calls the
        gateway charged, no errors."""
        for path, body in ((CHAT, chat("m-normal")),
                           (MESSAGES, {"model": "a-normal", "max_tokens": 100, "stream": True,
                                       "messages": [{"role": "user", "content": "hi"}]})):
            c = self.gw.caller()
            report = self.post(c, path, body)
            self.assertEqual(report["mode"], "post")
            self.assertGreater(report["requests"], 0, report)
            self.assertEqual((report["allowed"], report["errors"],
                              report["connection_errors"]), (report["requests"], 0, 0), report)
            self.assertEqual(c.used("req"), report["requests"], path)

    def test_headers_go_with_every_request(self):
        """--header lines reach the server: one X-Request-Id on every call is one call
        charged, every other answered as a replay (not a 200)."""
        c = self.gw.caller()
        report = self.post(c, CHAT, chat("m-normal"), "--header", "X-Request-Id: lg-" + c.name,
                           "--header", "X-Other: 1", code=3)  # 3: answers not 200
        self.assertGreater(report["requests"], 1, report)
        self.assertEqual(report["allowed"], 1, report)
        self.assertEqual(report["errors"], report["requests"] - 1, report)
        self.assertEqual(c.used("req"), 1)

    def test_header_errors(self):
        """A header without a name, with a byte not printable, or past the 1,024 bytes of
        headers: exit 2 before anything is sent."""
        c = self.gw.caller()
        base = ["--mode", "post", "--path", "/x", "--body-file", "/dev/null"]
        one_past = ["--header", "X-A: " + "a" * (1024 - 2 - 5 + 1)]
        at_bound = ["--header", "X-A: " + "a" * (1024 - 2 - 5)]
        for args in (["--header", ": v"], ["--header", "X-A v"], ["--header", "X-A: \x01"],
                     one_past):
            done = self.bench(c, *(base + args))
            self.assertEqual(done.returncode, 2, (args, done.stderr))
            self.assertIn("--header", done.stderr)
        done = self.bench(c, *(base + at_bound))  # the header fits; the empty body does not
        self.assertNotIn("--header", done.stderr)
        self.assertIn("cannot read", done.stderr)

    def test_usage_errors(self):
        """post needs a path and a body file and takes no keys; the other modes take no path."""
        c = self.gw.caller()
        for args, text in ((["--mode", "post", "--body-file", "/dev/null"], "--path"),
                           (["--mode", "post", "--path", "/v1/messages"], "--body-file"),
                           (["--mode", "post", "--path", "/x", "--body-file", "/nonexistent"],
                            "cannot read"),
                           (["--mode", "post", "--path", "/x", "--body-file", "/dev/null",
                             "--keys", "k"], "no --keys"),
                           (["--keys", "k", "--path", "/x"], "--mode post")):
            done = self.bench(c, *args)
            self.assertEqual(done.returncode, 2, done.stderr)
            self.assertIn(text, done.stderr)


if __name__ == "__main__":
    skip_unless_backend()
    unittest.main(verbosity=2)

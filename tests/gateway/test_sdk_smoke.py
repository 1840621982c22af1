"""The official openai SDK (Node, tests/gateway/node) understands the fake
upstream: node/sdk_smoke.mjs makes every kind of call against it, and each
answer the SDK parsed (stream chunks, usage, base64 embeddings, the model
list) matches what the fake is defined to send; the fake saw the SDK's key.
Exits 77 (skipped) when node or the installed SDK (npm ci --prefix
tests/gateway/node) is missing."""

import json
import os
import subprocess
import sys
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import fake_upstream  # noqa: E402
from node_sdk import NODE_DIR, missing_prerequisite, node_from_argv  # noqa: E402

SKIP = 77
API_KEY = "sk-fake-provider"
SEVEN_WORDS = "alpha bravo charlie delta echo foxtrot golf"


NODE = node_from_argv()


def run_smoke(base_url):
    env = dict(os.environ, SDK_SMOKE_BASE_URL=base_url, SDK_SMOKE_API_KEY=API_KEY,
               SDK_SMOKE_MODEL="fake-normal")
    done = subprocess.run([NODE, os.path.join(NODE_DIR, "sdk_smoke.mjs")], env=env,
                          capture_output=True, text=True, timeout=120)
    lines = [json.loads(line) for line in done.stdout.splitlines() if line.strip()]
    if done.returncode != 0:
        raise AssertionError("sdk_smoke.mjs exited %d:\n%s\n%s"
                             % (done.returncode, done.stdout, done.stderr))
    return {line["call"]: line for line in lines}


class SdkAgainstFake(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.upstream = fake_upstream.start(api_key=API_KEY)
        try:
            cls.calls = run_smoke(cls.upstream.base_url)
            cls.log = cls.upstream.wait_for(
                lambda rs: len(rs) == 6 and all(r["end"] for r in rs))
        finally:
            cls.upstream.stop()

    def test_chat_completion_and_its_headers(self):
        chat = self.calls["chat"]
        self.assertEqual((chat["object"], chat["content"], chat["finish_reason"]),
                         ("chat.completion", "alpha bravo charlie delta echo", "length"))
        self.assertEqual((chat["usage"]["prompt_tokens"], chat["usage"]["completion_tokens"],
                          chat["usage"]["total_tokens"]), (4, 5, 9))
        self.assertEqual(chat["headers"]["x-ratelimit-limit-requests"], "10000")

    def test_stream_without_usage(self):
        stream = self.calls["chat_stream"]
        self.assertEqual((stream["chunks"], stream["content"], stream["finish_reason"],
                          stream["usage"]), (9, SEVEN_WORDS, "stop", None))

    def test_stream_with_usage_reads_the_last_chunk(self):
        stream = self.calls["chat_stream_usage"]
        self.assertEqual((stream["chunks"], stream["content"]), (10, SEVEN_WORDS))
        self.assertEqual(stream["usage"]["prompt_tokens"], 4)
        self.assertEqual(stream["usage"]["completion_tokens"], 7)
        self.assertEqual(stream["usage"]["prompt_tokens_details"]["cached_tokens"], 0)

    def test_completion(self):
        self.assertEqual(self.calls["completion"], {
            "call": "completion", "object": "text_completion",
            "text": "alpha bravo charlie delta", "finish_reason": "length",
            "usage": {"prompt_tokens": 2, "completion_tokens": 4, "total_tokens": 6}})

    def test_embeddings_decoded_from_base64(self):
        embedding = self.calls["embedding"]
        self.assertEqual(embedding["count"], 2)
        self.assertEqual(embedding["vectors"],
                         [fake_upstream.embedding_vector("one two", 0, 8),
                          fake_upstream.embedding_vector("three", 1, 8)])
        self.assertEqual(embedding["usage"], {"prompt_tokens": 3, "total_tokens": 3})

    def test_models_list(self):
        self.assertEqual(self.calls["models"]["ids"],
                         ["fake-" + mode for mode in fake_upstream.MODES])

    def test_fake_saw_the_key_and_the_stream_options(self):
        self.assertEqual([(r["method"], r["path"]) for r in self.log], [
            ("POST", "/v1/chat/completions"), ("POST", "/v1/chat/completions"),
            ("POST", "/v1/chat/completions"), ("POST", "/v1/completions"),
            ("POST", "/v1/embeddings"), ("GET", "/v1/models")])
        for record in self.log:
            self.assertEqual(record["headers"]["authorization"], "Bearer " + API_KEY)
            self.assertEqual(record["status"], 200)
        self.assertNotIn("stream_options", self.log[1]["body"])
        self.assertEqual(self.log[2]["body"]["stream_options"], {"include_usage": True})
        self.assertEqual(self.log[4]["body"]["encoding_format"], "base64")
        self.assertEqual([r["end"] for r in self.log[1:3]], ["stream_complete"] * 2)


if __name__ == "__main__":
    reason = missing_prerequisite(NODE)
    if reason:
        print("SKIPPED: " + reason)
        sys.exit(SKIP)
    unittest.main(verbosity=2)

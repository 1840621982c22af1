"""The gateway charges every limit exactly what a call used (docs/gateway.md,
"Cost" and "The plan"): the budget's used amount and the token limits'
used amounts equal the cost and tokens computed here by hand from the fake
upstream's usage and the model's prices; a stream's usage chunk is asked
for upstream always and passed to the client only when it asked; a stream
without usage is charged its input estimate plus its counted output.

Backend from --backend (memory, sqlite, tigerbeetle)."""

import unittest

from gw_harness import (CHAT, COMPLETIONS, EMBEDDINGS, GatewayTest, chat, cost, estimate,
                        estimate_text, skip_unless_backend)
from gw_harness import tearDownModule  # noqa: F401 - unittest calls it

# m-counted: the fake reports 1001 prompt and 499 completion tokens;
# m-cached: the same with 401 of the prompt tokens cached.
PROMPT, COMPLETION, CACHED = 1001, 499, 401


class Charges(GatewayTest, unittest.TestCase):

    def assert_charged(self, caller, input_tokens, output_tokens, usd, requests=1):
        """Every limit of caller holds exactly these amounts, all settled."""
        snapshot = caller.snapshot()
        self.assertEqual(snapshot, {
            "req": (0, requests, 0),
            "tok": (0, input_tokens + output_tokens, 0),
            "in": (0, input_tokens, 0),
            "out": (0, output_tokens, 0),
            "conc": (0, 0, 0),
            "usd": (0, usd, 0),
        })

    def test_plain_chat_is_charged_its_usage(self):
        """A chat completion charges prompt + completion tokens and their cost, rounded up."""
        c = self.gw.caller()
        status, _, body = self.gw.call(c, CHAT, chat("m-counted", max_tokens=600))
        self.assertEqual(status, 200, body)
        self.assertEqual(body["usage"]["prompt_tokens"], PROMPT)
        self.assertEqual(cost(PROMPT, COMPLETION), 450)  # 449.55 rounded up
        self.assert_charged(c, PROMPT, COMPLETION, 450)

    def test_streaming_chat_is_charged_from_its_usage_chunk(self):
        """A streamed chat is charged from the usage chunk the gateway asked for."""
        c = self.gw.caller()
        answer = self.gw.stream(c, CHAT, chat("m-counted", max_tokens=600, stream=True))
        self.assertEqual(answer.status, 200, answer.raw)
        self.assertEqual(answer.events[-1], "[DONE]")
        self.assert_charged(c, PROMPT, COMPLETION, cost(PROMPT, COMPLETION))

    def test_cached_input_is_priced_at_the_cached_price(self):
        """prompt_tokens_details.cached_tokens are charged at the cached price."""
        c = self.gw.caller()
        status, _, body = self.gw.call(c, CHAT, chat("m-cached", max_tokens=600))
        self.assertEqual(status, 200, body)
        self.assertEqual(body["usage"]["prompt_tokens_details"]["cached_tokens"], CACHED)
        expected = cost(PROMPT, COMPLETION, CACHED)
        self.assertEqual(expected, 420)  # 419.475 rounded up; 450 at the full price
        self.assert_charged(c, PROMPT, COMPLETION, expected)

    def test_cached_input_in_a_stream(self):
        """A stream's usage chunk with cached tokens is priced the same way."""
        c = self.gw.caller()
        answer = self.gw.stream(c, CHAT, chat("m-cached", max_tokens=600, stream=True))
        self.assertEqual(answer.status, 200, answer.raw)
        self.assert_charged(c, PROMPT, COMPLETION, cost(PROMPT, COMPLETION, CACHED))

    def test_embeddings_charge_input_only(self):
        """An embedding charges its input tokens; its output limit takes nothing."""
        c = self.gw.caller()
        status, _, body = self.gw.call(c, EMBEDDINGS, {"model": "m-counted",
                                                       "input": ["one two", "three"]})
        self.assertEqual(status, 200, body)
        self.assertEqual(len(body["data"]), 2)
        self.assertEqual(cost(PROMPT, 0), 151)  # 150.15 rounded up
        self.assert_charged(c, PROMPT, 0, 151)

    def test_completions_are_charged_their_usage(self):
        """A legacy completion charges like a chat."""
        c = self.gw.caller()
        status, _, body = self.gw.call(c, COMPLETIONS, {"model": "m-counted",
                                                        "prompt": "say something",
                                                        "max_tokens": 600})
        self.assertEqual(status, 200, body)
        self.assertEqual(body["object"], "text_completion")
        self.assert_charged(c, PROMPT, COMPLETION, cost(PROMPT, COMPLETION))

    def test_streamed_completion_is_charged_its_usage(self):
        """A streamed legacy completion is charged from its usage chunk."""
        c = self.gw.caller()
        answer = self.gw.stream(c, COMPLETIONS, {"model": "m-counted", "prompt": "go",
                                                 "max_tokens": 600, "stream": True})
        self.assertEqual(answer.status, 200, answer.raw)
        self.assert_charged(c, PROMPT, COMPLETION, cost(PROMPT, COMPLETION))

    def test_several_calls_add_up(self):
        """Three calls of different kinds add up exactly in every limit."""
        c = self.gw.caller()
        self.assertEqual(self.gw.call(c, CHAT, chat("m-counted", max_tokens=600))[0], 200)
        self.assertEqual(self.gw.call(c, CHAT, chat("m-cached", max_tokens=600))[0], 200)
        self.assertEqual(self.gw.call(c, EMBEDDINGS, {"model": "m-counted", "input": "x"})[0],
                         200)
        usd = cost(PROMPT, COMPLETION) + cost(PROMPT, COMPLETION, CACHED) + cost(PROMPT, 0)
        self.assert_charged(c, 3 * PROMPT, 2 * COMPLETION, usd, requests=3)


class UsageChunk(GatewayTest, unittest.TestCase):

    def usage_chunks(self, answer):
        return [chunk for chunk in answer.chunks() if chunk.get("choices") == []]

    def test_usage_chunk_is_stripped_when_not_asked_for(self):
        """Without include_usage the client gets no usage chunk; upstream was asked for one."""
        c = self.gw.caller()
        answer = self.gw.stream(c, CHAT, chat("m-normal", stream=True))
        self.assertEqual(answer.status, 200, answer.raw)
        self.assertEqual(self.usage_chunks(answer), [])
        self.assertFalse([chunk for chunk in answer.chunks() if chunk.get("usage")])
        self.assertEqual(answer.events[-1], "[DONE]")
        self.assertEqual(answer.content(), "alpha bravo charlie delta echo foxtrot golf")
        record = self.gw.upstream.requests()[-1]
        self.assertEqual(record["body"]["stream_options"], {"include_usage": True})
        self.assertTrue(record["usage_sent"])

    def test_usage_chunk_is_passed_when_asked_for(self):
        """With include_usage the client gets the upstream's usage chunk, last before [DONE]."""
        c = self.gw.caller()
        answer = self.gw.stream(c, CHAT, chat("m-normal", stream=True,
                                              stream_options={"include_usage": True}))
        self.assertEqual(answer.status, 200, answer.raw)
        usage = self.usage_chunks(answer)
        self.assertEqual(len(usage), 1)
        self.assertEqual(answer.chunks()[-1], usage[0])
        self.assertEqual((usage[0]["usage"]["prompt_tokens"],
                          usage[0]["usage"]["completion_tokens"]), (4, 7))
        record = self.gw.upstream.requests()[-1]
        self.assertEqual(record["body"]["stream_options"], {"include_usage": True})

    def test_include_usage_false_is_overridden_upstream(self):
        """include_usage: false from the client still asks upstream, and strips the chunk."""
        c = self.gw.caller()
        answer = self.gw.stream(c, CHAT, chat("m-normal", stream=True,
                                              stream_options={"include_usage": False}))
        self.assertEqual(answer.status, 200, answer.raw)
        self.assertEqual(self.usage_chunks(answer), [])
        record = self.gw.upstream.requests()[-1]
        self.assertEqual(record["body"]["stream_options"], {"include_usage": True})
        self.assertEqual(c.used("tok"), 4 + 7)

    def test_non_streaming_call_gets_no_stream_options(self):
        """A call that does not stream goes upstream without stream_options."""
        c = self.gw.caller()
        self.assertEqual(self.gw.call(c, CHAT, chat("m-normal"))[0], 200)
        self.assertNotIn("stream_options", self.gw.upstream.requests()[-1]["body"])


class NoUsage(GatewayTest, unittest.TestCase):

    def test_stream_without_usage_is_charged_estimate_and_counted_output(self):
        """A finished stream with no usage: input estimate + output counted from its chunks."""
        c = self.gw.caller()
        body = chat("m-no-usage", "tell me something about the weather", max_tokens=50,
                    stream=True)
        answer = self.gw.stream(c, CHAT, body)
        self.assertEqual(answer.status, 200, answer.raw)
        self.assertEqual(answer.events[-1], "[DONE]")
        record = self.gw.upstream.requests()[-1]
        self.assertFalse(record["usage_sent"])
        self.assertEqual(answer.content(), record["content_sent"])
        input_tokens = estimate("chat", body)[0]
        output_tokens = estimate_text(record["content_sent"])
        self.assertGreater(output_tokens, 0)
        self.assertEqual(c.snapshot(), {
            "req": (0, 1, 0),
            "tok": (0, input_tokens + output_tokens, 0),
            "in": (0, input_tokens, 0),
            "out": (0, output_tokens, 0),
            "conc": (0, 0, 0),
            "usd": (0, cost(input_tokens, output_tokens), 0),
        })

    def test_answer_without_usage_is_charged_estimate_and_counted_text(self):
        """A whole answer with no usage: input estimate + its text counted."""
        c = self.gw.caller()
        body = chat("m-no-usage", "what is the time", max_tokens=50)
        status, _, answer = self.gw.call(c, CHAT, body)
        self.assertEqual(status, 200, answer)
        self.assertNotIn("usage", answer)
        input_tokens = estimate("chat", body)[0]
        output_tokens = estimate_text(answer["choices"][0]["message"]["content"])
        self.assertEqual((c.used("in"), c.used("out"), c.used("usd")),
                         (input_tokens, output_tokens, cost(input_tokens, output_tokens)))


if __name__ == "__main__":
    skip_unless_backend()
    unittest.main(verbosity=2)
